from adaserve.planner.core import Feedback, Pending, Scheduler
from adaserve.planner.edf import EdfScheduler
from adaserve.planner.latency import LinearLatency


def _p(i: int, deadline: float) -> Pending:
    return Pending(f"j{i}", "r", "app", "m", 0.0, deadline)


def test_is_a_scheduler() -> None:
    assert isinstance(EdfScheduler(), Scheduler)


def test_earliest_deadline_first_and_largest_batch_that_fits() -> None:
    s = EdfScheduler(LinearLatency(c0=0.010, c1=0.010))
    for i, d in enumerate([0.50, 0.045, 0.30, 0.20]):
        s.add(_p(i, d), 0.0)
    # Earliest deadline 0.045 s: l(k) = 0.01 + 0.01 k <= 0.045 allows k = 3.
    d = s.next_batch(0.0, 32)
    assert [p.job_id for p in d.batch] == ["j1", "j3", "j2"]
    assert abs(d.predicted_s - 0.04) < 1e-9
    assert len(s) == 1


def test_max_size_caps_the_batch() -> None:
    s = EdfScheduler(LinearLatency(c0=0.0, c1=0.001))
    for i in range(10):
        s.add(_p(i, 10.0), 0.0)
    assert len(s.next_batch(0.0, 4).batch) == 4


def test_infeasible_requests_expire() -> None:
    s = EdfScheduler(LinearLatency(c0=0.010, c1=0.010))
    s.add(_p(0, 0.015), 0.0)  # alone it needs 0.02 s
    s.add(_p(1, 1.0), 0.0)
    d = s.next_batch(0.0, 32)
    assert [p.job_id for p in d.expired] == ["j0"]
    assert [p.job_id for p in d.batch] == ["j1"]


def test_feedback_moves_the_latency_model() -> None:
    s = EdfScheduler(LinearLatency(c0=0.1, c1=0.1))
    for _ in range(200):
        for k in (1, 8, 32):
            s.observe(Feedback("m", k, 0.001 + 0.0005 * k))
    assert abs(s.latency.predict(16) - (0.001 + 0.0005 * 16)) < 1e-3
