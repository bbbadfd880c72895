import pytest

from adaserve.planner.baselines import ClipperScheduler
from adaserve.planner.core import Feedback, Pending


def _p(i: int, deadline: float) -> Pending:
    return Pending(f"j{i}", "r", "a", "m", 0.0, deadline, seq=i)


def test_aimd_grows_additively_and_backs_off_by_ten_percent() -> None:
    s = ClipperScheduler(start=10)
    s.add(_p(0, 0.2), 0.0)  # the objective is the SLO: 0.2 s
    for _ in range(3):
        s.observe(Feedback("m", 10 + _, 0.1))
    assert int(s.size) == 13
    s.observe(Feedback("m", 13, 0.3))
    assert s.size == pytest.approx(13 * 0.9)
    s.observe(Feedback("m", 2, 0.3))  # a batch smaller than the limit says nothing
    assert s.size == pytest.approx(13 * 0.9)


def test_batches_follow_the_adapted_size_and_late_requests_still_run() -> None:
    s = ClipperScheduler(start=2)
    for i in range(5):
        s.add(_p(i, 0.1), 0.0)
    d = s.next_batch(5.0, 16)  # long past every deadline: Clipper still evaluates them
    assert [p.job_id for p in d.batch] == ["j0", "j1"] and d.expired == []
    dropping = ClipperScheduler(drop_late=True)
    dropping.add(_p(0, 0.1), 0.0)
    assert len(dropping.next_batch(5.0, 16).expired) == 1


def test_bad_options() -> None:
    with pytest.raises(ValueError):
        ClipperScheduler(backoff=1.5)


def test_an_objective_learnt_elsewhere_lets_batches_judged_before_any_request_count() -> None:
    """What the pipeline simulator does with the batches the live policy judged before a run."""
    s = ClipperScheduler()
    s.observe(Feedback("m", 1, 0.01))
    assert s.size == 1.0  # no objective yet: a batch says nothing
    s.learn_objective(0.03)
    for k in (1, 2):
        s.observe(Feedback("m", k, 0.01))
    assert s.size == 3.0
    s.learn_objective(0.1)  # only a tighter objective replaces the one held, as a request's would
    s.add(_p(0, 0.05), 0.0)
    assert s.slo_s == pytest.approx(0.03)
