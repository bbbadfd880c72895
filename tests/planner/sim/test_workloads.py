import numpy as np
import pytest

from adaserve.broker.profiles import ExecHistogram
from adaserve.planner.sim.workloads import PAPER_WORKLOADS, Workload, from_histogram, paper_workload


def test_peaks_and_apps() -> None:
    w = paper_workload("four-modal")
    assert w.peaks_ms == (40.0, 60.0, 80.0, 100.0) and w.app_names == ("app0", "app1", "app2", "app3")
    x, which = w.sample(40000, np.random.default_rng(0))
    for j, peak in enumerate(w.peaks_ms):
        assert x[which == j].mean() == pytest.approx(peak / 1e3, abs=1e-3)
        assert x[which == j].std() == pytest.approx(0.010, abs=1e-3)


def test_std_cases_differ_only_in_spread() -> None:
    narrow, wide = paper_workload("std-0.5"), paper_workload("std-2")
    assert narrow.peaks_ms == wide.peaks_ms and (narrow.std_ms, wide.std_ms) == (5.0, 20.0)
    assert wide.alone_p99_s() > narrow.alone_p99_s()


def test_static_is_constant_and_p99_is_of_the_time_alone() -> None:
    w = paper_workload("static")
    x, _ = w.sample(100, np.random.default_rng(1))
    assert np.all(x == 0.070)
    assert w.alone_p99_s() == pytest.approx(0.050 + 0.25 * 0.070)
    assert w.batch_s(16, 0.07) == pytest.approx(0.33)


def test_measured_histogram() -> None:
    w = from_histogram(ExecHistogram(variant="v", device="cpu", edges_ms=[10.0, 20.0, 30.0], counts=[1, 3]))
    x, which = w.sample(20000, np.random.default_rng(2))
    assert np.all((x >= 0.010) & (x <= 0.030)) and np.all(which == 0)
    assert (x >= 0.020).mean() == pytest.approx(0.75, abs=0.02)


def test_catalogue_and_errors() -> None:
    assert {"std-0.5", "std-1", "std-2", "one-modal", "two-modal", "four-modal", "eight-modal", "static"} <= set(PAPER_WORKLOADS)
    with pytest.raises(ValueError):
        paper_workload("nine-modal")
    with pytest.raises(ValueError):
        Workload("x", c1=0.0)
    with pytest.raises(ValueError):
        from_histogram(ExecHistogram(variant="v", device="cpu", edges_ms=[1.0, 2.0], counts=[1, 2]))
