import numpy as np

from adaserve.planner.baselines import ClockworkScheduler, MeanLatency
from adaserve.planner.core import Feedback, Pending
from adaserve.planner.orloj.prior import Prior

PRIOR = Prior(np.array([0.06, 0.08]), np.array([1.0]), 0.05, 0.25, 0.05, 0.0175)  # l(k) = 0.05 + 0.0175 k


def _p(i: int, deadline: float) -> Pending:
    return Pending(f"j{i}", "r", "a", "m", 0.0, deadline, seq=i)


def test_edf_with_the_largest_supported_batch_that_meets_the_head() -> None:
    s = ClockworkScheduler(MeanLatency(PRIOR), sizes=(1, 2, 4, 8), action_window_s=None)
    for i, d in enumerate([1.0, 0.13, 0.5, 0.6, 0.7]):
        s.add(_p(i, d), 0.0)
    d = s.next_batch(0.0, 16)  # head 0.13: l(4) = 0.12 fits, l(8) does not (and only 5 wait)
    assert [p.job_id for p in d.batch] == ["j1", "j2", "j3", "j4"]
    assert s.earliest_deadline() == 1.0


def test_drops_what_cannot_finish_even_alone() -> None:
    s = ClockworkScheduler(MeanLatency(PRIOR), action_window_s=None)
    s.add(_p(0, 0.06), 0.0)
    s.add(_p(1, 1.0), 0.0)
    d = s.next_batch(0.0, 16)
    assert [p.job_id for p in d.expired] == ["j0"] and [p.job_id for p in d.batch] == ["j1"]


def test_an_overrun_fails_the_batch_planned_for_the_slot() -> None:
    s = ClockworkScheduler(MeanLatency(PRIOR), sizes=(1,), action_window_s=0.005)
    for i in range(3):
        s.add(_p(i, 10.0), 0.0)
    first = s.next_batch(0.0, 1)  # predicted to end at 0.0675
    s.observe(Feedback("m", 1, 0.2))
    d = s.next_batch(0.2, 1)  # the slot freed 0.13 s late: the action planned for 0.0675 is rejected
    assert [p.job_id for p in first.batch] == ["j0"]
    assert [p.job_id for p in d.expired] == ["j1"] and [p.job_id for p in d.batch] == ["j2"]
    assert s.rejected_batches == 1


def test_on_time_slots_fail_nothing() -> None:
    s = ClockworkScheduler(MeanLatency(PRIOR), sizes=(1,), action_window_s=0.005)
    for i in range(2):
        s.add(_p(i, 10.0), 0.0)
    s.next_batch(0.0, 1)
    s.observe(Feedback("m", 1, 0.06))
    d = s.next_batch(0.06, 1)
    assert d.expired == [] and len(d.batch) == 1
