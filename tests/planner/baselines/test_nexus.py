import numpy as np

from adaserve.planner.baselines import MeanLatency, NexusScheduler
from adaserve.planner.core import Feedback, Pending
from adaserve.planner.orloj.prior import Prior

PRIOR = Prior(np.array([0.06, 0.08]), np.array([1.0]), 0.05, 0.25, 0.05, 0.0175)  # mean 70 ms


def _p(i: int, arrival: float, deadline: float) -> Pending:
    return Pending(f"j{i}", "r", "a", "m", arrival, deadline, seq=i)


def test_plan_is_the_largest_batch_whose_two_latencies_fit_the_slo() -> None:
    s = NexusScheduler(MeanLatency(PRIOR), sizes=(1, 2, 4, 8, 16))
    s.add(_p(0, 0.0, 0.4), 0.0)  # SLO 0.4 s: 2 * (0.05 + 0.0175 k) <= 0.4 up to k = 8
    assert s.plan(32) == 8
    assert s.plan(4) == 4


def test_early_drop_skips_heads_that_cannot_make_it() -> None:
    s = NexusScheduler(MeanLatency(PRIOR), sizes=(1, 2, 4))
    s.add(_p(0, -0.42, 0.08), 0.0)  # every request has a 0.5 s SLO; this one arrived earlier
    s.add(_p(1, 0.0, 0.5), 0.0)
    s.add(_p(2, 0.0, 0.5), 0.0)
    d = s.next_batch(0.02, 16)  # 0.02 + l(2) = 0.105 > 0.08: the head goes
    assert [p.job_id for p in d.expired] == ["j0"]
    assert [p.job_id for p in d.batch] == ["j1", "j2"]
    assert d.predicted_s > 0


def test_latency_learns_from_feedback() -> None:
    lat = MeanLatency(PRIOR)
    for _ in range(200):
        lat.update(Feedback("m", 4, 0.05 + 0.25 * 4 * 0.2, ("a",) * 4, (0.2, 0.18, 0.15, 0.19)))
    assert lat.mean_s > 0.15
    assert abs(lat.fit.c1 - 0.25) < 0.02
