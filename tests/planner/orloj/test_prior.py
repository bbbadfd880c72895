import numpy as np
import pytest

from adaserve.broker.profiles import ExecHistogram, LatencyPoint, Profile
from adaserve.planner.orloj.prior import prior_from_profile


def _profile(with_hist: bool = True, with_points: bool = True) -> Profile:
    points = [LatencyPoint(variant="v", device="cpu", batch_size=k, p50_ms=50 + 0.25 * k * 70.0,
                           p90_ms=1.0, mean_ms=50 + 0.25 * k * 70.0, repeats=3) for k in (1, 2, 4, 8)]
    hist = ExecHistogram(variant="v", device="cpu", edges_ms=[69.0, 71.0], counts=[10])
    return Profile(model="m", created_ms=0.0, latency=points if with_points else [],
                   exec_hist=[hist] if with_hist else [])


def test_static_profile_recovers_the_batch_line() -> None:
    p = prior_from_profile(_profile())
    assert p.mean_s == pytest.approx(0.070)
    assert p.c0 == pytest.approx(0.05, abs=1e-3) and p.c1 == pytest.approx(0.25, abs=5e-3)
    assert p.line_c0 == pytest.approx(0.05, abs=1e-3) and p.line_c1 == pytest.approx(0.0175, abs=1e-4)


def test_missing_parts_fall_back() -> None:
    none = prior_from_profile(None)
    assert none.mean_s > 0 and none.c1 > 0
    only_points = prior_from_profile(_profile(with_hist=False))
    assert only_points.mean_s == pytest.approx(0.0675, rel=0.02)
    only_hist = prior_from_profile(_profile(with_points=False))
    assert (only_hist.c0, only_hist.c1) == (0.0, 1.0)
    assert np.all(only_hist.counts > 0)


def test_malformed_histogram_is_refused() -> None:
    bad = Profile(model="m", created_ms=0.0,
                  exec_hist=[ExecHistogram(variant="v", device="cpu", edges_ms=[1.0, 2.0, 3.0], counts=[1])])
    with pytest.raises(ValueError):
        prior_from_profile(bad)
