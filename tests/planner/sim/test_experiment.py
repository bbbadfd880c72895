import numpy as np
import pytest

from adaserve.planner.sim.bursty import bursty
from adaserve.planner.sim.experiment import (
    Setup,
    draw,
    experiment_arrivals,
    mean_batch_s,
    paper_load,
    run,
    saturation_rate,
    workload_profile,
)
from adaserve.planner.sim.workloads import paper_workload


def test_saturation_and_the_papers_load() -> None:
    w = paper_workload("static")
    assert mean_batch_s(w, 16) == pytest.approx(0.33, rel=1e-3)
    assert saturation_rate(w) == pytest.approx(16 / 0.33, rel=1e-3)
    # the rate that keeps one worker busy serving requests one at a time
    assert paper_load(w) * saturation_rate(w) == pytest.approx(1 / 0.0675, rel=1e-3)
    assert saturation_rate(w, workers=2) == pytest.approx(2 * saturation_rate(w))


def test_profile_of_a_workload() -> None:
    p = workload_profile(paper_workload("two-modal"), "m")
    assert p.model == "m" and [pt.batch_size for pt in p.latency] == [1, 2, 4, 8, 16]
    assert len(p.exec_hist[0].edges_ms) == len(p.exec_hist[0].counts) + 1


@pytest.mark.parametrize("pattern", ["trace", "poisson", "constant", "bursty"])
def test_arrival_patterns_have_the_rate_asked(pattern: str) -> None:
    t = experiment_arrivals(pattern, 50.0, 5000, seed=3)
    assert np.all(np.diff(t) >= 0)
    assert t.size / 5000 == pytest.approx(1.0, rel=0.1)
    with pytest.raises(ValueError):
        experiment_arrivals("weekly", 1.0, 10, seed=0)


def test_bursty_is_burstier_than_poisson() -> None:
    gaps_b = np.diff(bursty(100.0, 200.0, seed=1))
    gaps_p = np.diff(experiment_arrivals("poisson", 100.0, 20000, seed=1))
    cv = lambda g: g.std() / g.mean()  # noqa: E731
    assert cv(gaps_b) > 1.2 * cv(gaps_p)


def test_draw_is_a_function_of_the_seed() -> None:
    s = Setup(paper_workload("two-modal"), 2.0, requests=500, seed=4)
    a, b = draw(s), draw(s)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and a[2] == b[2]
    assert not np.array_equal(a[1], draw(Setup(paper_workload("two-modal"), 2.0, requests=500, seed=5))[1])


def test_orloj_beats_every_baseline_on_a_small_workload() -> None:
    setup = Setup(paper_workload("two-modal"), 2.0, requests=1500, seed=0)
    rates = {p: run(setup, p)[0].finish_rate for p in ("orloj", "clipper", "nexus", "clockwork", "fifo")}
    assert all(rates["orloj"] >= rates[p] for p in rates), rates


def test_std1_and_two_modal_are_one_distribution_drawn_as_two_runs() -> None:
    a_w, b_w = paper_workload("std-1"), paper_workload("two-modal")
    assert (a_w.peaks_ms, a_w.std_ms, a_w.weights) == (b_w.peaks_ms, b_w.std_ms, b_w.weights)
    a, b = draw(Setup(a_w, 2.0, requests=800, seed=0)), draw(Setup(b_w, 2.0, requests=800, seed=0))
    assert np.array_equal(a[0], b[0])  # one trace at one rate for every case
    assert not np.array_equal(a[1], b[1])  # separately generated inputs
    assert a[1].mean() == pytest.approx(b[1].mean(), abs=0.003)


def test_clockwork_plans_for_as_many_lanes_as_the_simulation_has_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    import adaserve.planner.sim.experiment as experiment

    built: list[dict[str, object]] = []
    real = experiment.make_scheduler

    def spy(policy: str, **kw: object) -> object:
        built.append(kw)
        return real(policy, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(experiment, "make_scheduler", spy)
    for workers in (1, 3):
        run(Setup(paper_workload("two-modal"), 2.0, requests=200, workers=workers, seed=0), "clockwork")
    run(Setup(paper_workload("two-modal"), 2.0, requests=200, workers=3, seed=0), "clockwork", opts={"lanes": 2})
    assert [kw["lanes"] for kw in built] == [1, 3, 2]
