import numpy as np

from adaserve.planner.baselines import ClockworkScheduler, MeanLatency
from adaserve.planner.core import Decision, Feedback, Pending
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


def test_a_slot_that_freed_on_time_is_not_failed_for_a_late_read() -> None:
    # The planner read the finish 0.1 s after it happened; the worker freed the slot on time.
    s = ClockworkScheduler(MeanLatency(PRIOR), sizes=(1,), action_window_s=0.005)
    for i in range(2):
        s.add(_p(i, 10.0), 0.0)
    s.next_batch(0.0, 1)  # predicted to end at 0.0675
    s.observe(Feedback("m", 1, 0.06, finished_s=0.066))
    d = s.next_batch(0.17, 1)
    assert d.expired == [] and len(d.batch) == 1 and s.rejected_batches == 0


def test_a_slot_that_freed_late_fails_however_soon_it_was_read() -> None:
    s = ClockworkScheduler(MeanLatency(PRIOR), sizes=(1,), action_window_s=0.005)
    for i in range(3):
        s.add(_p(i, 10.0), 0.0)
    s.next_batch(0.0, 1)
    s.observe(Feedback("m", 1, 0.08, finished_s=0.08))  # 12.5 ms past the prediction
    d = s.next_batch(0.0, 1)  # a decision clock that lags the worker's changes nothing
    assert [p.job_id for p in d.expired] == ["j1"] and s.rejected_batches == 1


def _two_in_flight(lanes: int) -> ClockworkScheduler:
    """Two batches of one planned at 0, both reported finished one after the other (0.0675 s each)."""
    s = ClockworkScheduler(MeanLatency(PRIOR), sizes=(1,), action_window_s=0.005, lanes=lanes)
    for i in range(4):
        s.add(_p(i, 10.0), 0.0)
    s.next_batch(0.0, 1)
    s.next_batch(0.0, 1)
    s.observe(Feedback("m", 1, 0.0675, finished_s=0.0675))
    s.observe(Feedback("m", 1, 0.0675, finished_s=0.135))
    return s


def test_a_batch_planned_behind_another_on_one_worker_is_due_after_it() -> None:
    s = _two_in_flight(lanes=1)
    d = s.next_batch(0.135, 1)
    assert d.expired == [] and s.rejected_batches == 0


def test_on_two_workers_the_second_batch_was_due_at_once() -> None:
    s = _two_in_flight(lanes=2)
    d = s.next_batch(0.135, 1)
    assert len(d.expired) == 1 and s.rejected_batches == 1


def test_a_prediction_left_over_does_not_shift_the_later_pairings() -> None:
    # One prediction whose finish never came (from 1 s ago): the next finishes still pair with
    # their own predictions, on time, and the stale one is forgotten.
    s = ClockworkScheduler(MeanLatency(PRIOR), sizes=(1,), action_window_s=0.005)
    for i in range(6):
        s.add(_p(i, 100.0), 0.0)
    s.next_batch(0.0, 1)  # its finish is never reported
    t = 2.0
    for _ in range(3):
        s.next_batch(t, 1)  # each predicted to end 0.0675 s later, reported so
        s.observe(Feedback("m", 1, 0.0675, finished_s=t + 0.0675))
        t += 0.1
    d = s.next_batch(t, 1)
    assert d.expired == [] and s.rejected_batches == 0


def _planned(at: tuple[float, ...], lanes: int = 1) -> tuple[ClockworkScheduler, list[Decision]]:
    """Batches of one planned at each time of ``at`` (0.0675 s each), three requests behind them."""
    s = ClockworkScheduler(MeanLatency(PRIOR), sizes=(1,), action_window_s=0.005, lanes=lanes)
    for i in range(len(at) + 3):
        s.add(_p(i, 10.0), 0.0)
    return s, [s.next_batch(t, 1) for t in at]


def test_a_finish_is_judged_against_its_own_batch_not_the_nearest_prediction() -> None:
    # Two workers; b planned 3 ms after a. Each freed its slot within the window of its own
    # prediction, but a's finish is nearer b's: matched by time, b's would be judged against a's.
    s, (a, b) = _planned((0.0, 0.003), lanes=2)  # predicted to end at 0.0675 and 0.0705
    assert a.token is not None and b.token is not None and a.token != b.token
    s.observe(Feedback("m", 1, 0.0675, finished_s=0.070, token=a.token))
    s.observe(Feedback("m", 1, 0.0675, finished_s=0.0735, token=b.token))
    d = s.next_batch(0.08, 1)
    assert d.expired == [] and s.rejected_batches == 0


def test_a_late_batch_heard_after_others_were_planned_still_fails() -> None:
    # a ran 42.5 ms past its prediction, and b (planned behind it) as late; matched by time,
    # a's finish was nearer b's prediction and only one of the two failed.
    s, (a, b) = _planned((0.0, 0.05))  # 0.0675, and behind a 0.135
    s.observe(Feedback("m", 1, 0.0675, finished_s=0.11, token=a.token))
    s.observe(Feedback("m", 1, 0.0675, finished_s=0.1775, token=b.token))
    d = s.next_batch(0.18, 1)
    assert len(d.expired) == 2 and s.rejected_batches == 2


def test_a_decision_sent_as_several_messages_is_judged_once() -> None:
    # Its second message's finish is not another batch's: b's prediction stays for b's own finish.
    s, (a, b) = _planned((0.0, 0.0))  # 0.0675, and behind a 0.135
    s.observe(Feedback("m", 1, 0.0675, finished_s=0.0675, token=a.token))
    s.observe(Feedback("m", 1, 0.0675, finished_s=0.2, token=a.token))  # a's second message
    s.observe(Feedback("m", 1, 0.0675, finished_s=0.135, token=b.token))
    d = s.next_batch(0.2, 1)
    assert d.expired == [] and s.rejected_batches == 0
