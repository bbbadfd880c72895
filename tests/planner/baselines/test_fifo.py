from adaserve.planner.baselines import FifoScheduler
from adaserve.planner.core import Feedback, Pending, Scheduler


def _p(i: int, deadline: float) -> Pending:
    return Pending(f"j{i}", "r", "a", "m", 0.0, deadline, seq=i)


def test_fixed_batches_in_arrival_order() -> None:
    s = FifoScheduler(batch=2)
    assert isinstance(s, Scheduler)
    for i, d in enumerate([5.0, 1.0, 3.0]):
        s.add(_p(i, d), 0.0)
    assert [p.job_id for p in s.next_batch(0.0, 8).batch] == ["j0", "j1"]
    assert [p.job_id for p in s.next_batch(0.0, 8).batch] == ["j2"]
    s.observe(Feedback("m", 1, 0.1))


def test_drops_only_what_is_already_late() -> None:
    s = FifoScheduler(batch=4)
    for i, d in enumerate([1.0, 0.5, 2.0]):
        s.add(_p(i, d), 0.0)
    assert s.earliest_deadline() == 0.5
    d = s.next_batch(0.6, 1)
    assert [p.job_id for p in d.expired] == ["j1"]
    assert [p.job_id for p in d.batch] == ["j0"]
    assert len(s) == 1 and s.earliest_deadline() == 2.0
