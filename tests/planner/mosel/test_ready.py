"""ReadyQueues: per-subset queues of released requests, batch formation, expiry and backlog."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from adaserve.planner.mosel import QueueState, StrategyMatrix
from adaserve.planner.mosel.held import MoselJob
from adaserve.planner.mosel.planned import PlannedJobs
from adaserve.planner.mosel.ready import INFLIGHT_FORGET_S, ReadyQueues
from adaserve.planner.mosel.shared import Selection


class Parts:
    """A selector over the test matrix, the planned jobs and the ready queues, wired as live."""

    def __init__(self, matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
        self.live_job = live_job
        self.sel = Selection(matrix.costs, "random", learn_rate=1.0)
        self.sel.use(matrix)
        self.plans = PlannedJobs(self.sel, "av-digits")
        self.ready = ReadyQueues(self.sel, self.plans, itertools.count(1))

    def released(self, key: str, n: int, deadline: float, **kw: object) -> MoselJob:
        job = self.gated(key, n, deadline, **kw)
        self.ready.release(job)
        return job

    def gated(self, key: str, n: int, deadline: float, **kw: object) -> MoselJob:
        job = self.live_job(key, n, deadline, **kw)
        self.plans.admit(job)
        self.plans.open_gate(job)
        return job


@pytest.fixture
def parts(matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> Parts:
    return Parts(matrix, live_job)


def test_a_batch_is_one_subset_in_deadline_order(parts: Parts) -> None:
    parts.released("a-late", 3, 5.0, inputs=("audio",))   # pinned to audio: it has no image
    parts.released("a-early", 2, 3.0, inputs=("audio",))
    parts.released("img", 2, 1.0, inputs=("image",))
    assert len(parts.ready) == 7 and sorted(parts.ready.deadlines()) == [1.0, 3.0]
    batch = parts.ready.take("audio", 4)
    assert [p.job_id for p in batch] == ["a-early", "a-early", "a-late", "a-late"]
    # Only the last audio request is left; the image queue is not touched by an audio batch.
    assert [p.job_id for p in parts.ready.take("audio", 4)] == ["a-late"]
    assert len(parts.ready) == 2 and parts.ready.deadlines() == [1.0]


def test_a_mixed_job_runs_on_each_subset_as_many_requests_as_its_strategy_says(
        parts: Parts, matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    job = live_job("m", 6, 0.9 * matrix.richest(6).latency_s)  # its richest mix would be late
    assert parts.plans.admit(job)
    assert parts.sel.selector is not None
    parts.sel.selector.replan(QueueState([parts.plans.chunks["m"]]), 0.0, admit_new=False)
    strategy = parts.sel.selector.strategy("m")
    assert strategy is not None and len(strategy.by_subset()) >= 2
    parts.ready.release(job)
    want = strategy.assign([p.request_id for p in job.items])
    for subset in matrix.subsets:
        got = {p.request_id for p in parts.ready.take(subset, 6)}
        assert got == {r for r, s in want.items() if s == subset}
    assert len(parts.ready) == 0


def test_head_is_the_subset_of_the_most_urgent_work(parts: Parts, live_job: Callable[..., MoselJob]) -> None:
    assert parts.ready.head() is None
    parts.released("a", 2, 5.0, inputs=("audio",))
    assert parts.ready.head() == "audio"
    parts.gated("later", 2, 7.0, inputs=("image",))
    shut = live_job("shut", 2, 1.0)
    parts.plans.admit(shut)  # in the selector, but no monitor pass has seen it: gate closed
    assert parts.ready.head() == "audio"
    assert {"later", "shut"} <= set(parts.plans.jobs)
    # Once its gate opens, the urgent job is more urgent than every released request: released.
    parts.plans.open_gate(shut)
    assert parts.ready.head() == "audio+image"
    assert "shut" not in parts.plans.jobs and parts.plans.finalized[-1][0] == "shut"
    assert "later" in parts.plans.jobs


def test_a_short_batch_is_topped_up_from_gated_jobs_that_use_its_subset(
        parts: Parts, live_job: Callable[..., MoselJob]) -> None:
    parts.released("r", 2, 1.0)  # at its richest: audio+image
    parts.gated("late", 3, 4.0)
    parts.gated("early", 3, 3.0)
    parts.gated("img", 2, 2.0, inputs=("image",))  # more urgent, but its strategy has no audio+image
    shut = live_job("shut", 3, 0.5)
    parts.plans.admit(shut)  # gate closed: not dispatched
    batch = parts.ready.take("audio+image", 4)
    assert [p.job_id for p in batch] == ["r", "r", "early", "early"]
    assert "early" not in parts.plans.jobs and len(parts.ready.heaps["audio+image"]) == 1
    assert {"late", "img", "shut"} <= set(parts.plans.jobs)
    batch = parts.ready.take("audio+image", 4)
    assert [p.job_id for p in batch] == ["early", "late", "late", "late"]
    assert set(parts.plans.jobs) == {"img", "shut"}
    assert parts.ready.take("audio+image", 4) == []


def test_expire_ends_released_requests_that_cannot_finish_even_alone(parts: Parts) -> None:
    costs = parts.sel.costs
    audio_s = costs.run_ms(costs.subsets.index("audio"), 1) / 1e3
    image_s = costs.run_ms(costs.subsets.index("image"), 1) / 1e3
    now, slack = 1.0, audio_s / 2  # enough for one image request, not for one audio request
    assert image_s < slack < 10 * image_s
    parts.released("a", 2, now + slack, inputs=("audio",))
    parts.released("a-ok", 1, now + 20 * audio_s, inputs=("audio",))
    parts.released("i", 2, now + slack, inputs=("image",))
    gone = parts.ready.expire(now)
    assert [p.job_id for p in gone] == ["a", "a"] and len(parts.ready) == 3
    # Ten times slower than profiled (learnt from feedback): the image requests cannot make it either.
    assert parts.sel.selector is not None
    parts.sel.selector.observe(1.0, 10.0)
    assert [p.job_id for p in parts.ready.expire(now)] == ["i", "i"] and len(parts.ready) == 1


def test_backlog_counts_released_requests_and_unreported_batches(parts: Parts) -> None:
    costs = parts.sel.costs
    audio, image = costs.subsets.index("audio"), costs.subsets.index("image")
    assert parts.ready.backlog_s(0.0) == 0.0
    parts.released("a", 5, 9.0, inputs=("audio",))
    assert parts.ready.backlog_s(0.0) == pytest.approx(costs.run_ms(audio, 5) / 1e3)
    batch = parts.ready.take("audio", 5)
    predicted = parts.ready.sent("audio", len(batch), 0.0)
    assert predicted == pytest.approx(costs.run_ms(audio, 5) / 1e3)
    assert parts.ready.backlog_s(0.0) == pytest.approx(predicted)
    # A second batch sent while the first is still predicted to run queues behind it.
    other = parts.ready.sent("image", 2, 0.0)
    assert parts.ready.backlog_s(0.0) == pytest.approx(predicted + costs.run_ms(image, 2) / 1e3)
    parts.ready.done("image", 1)  # no batch of that size was sent
    assert parts.ready.backlog_s(0.0) == pytest.approx(predicted + other)
    parts.ready.done("image", 2)
    assert parts.ready.backlog_s(0.0) == pytest.approx(predicted)
    parts.ready.done("audio", 5)
    assert parts.ready.backlog_s(0.0) == 0.0


def test_feedback_clears_one_batch_of_that_subset_and_size(parts: Parts) -> None:
    one = parts.ready.sent("audio", 2, 0.0)
    parts.ready.sent("audio", 2, 0.0)
    parts.ready.done("audio", 2)
    assert parts.ready.backlog_s(0.0) == pytest.approx(one)


def test_an_unreported_batch_counts_only_what_is_left_of_its_predicted_run(parts: Parts) -> None:
    first = parts.ready.sent("audio+image", 3, 0.0)
    assert parts.ready.backlog_s(first / 4) == pytest.approx(3 * first / 4)
    # Its feedback never comes: past its predicted finish it holds up nothing (it used to count
    # whole for 10 s, and every new job then looked hopeless).
    assert parts.ready.backlog_s(2 * first) == 0.0
    # A batch sent after that finish starts when it is sent, not behind the lost one.
    second = parts.ready.sent("audio", 2, 3 * first)
    assert parts.ready.backlog_s(3 * first) == pytest.approx(second)
    assert len(parts.ready.inflight) == 2
    assert parts.ready.backlog_s(3 * first + INFLIGHT_FORGET_S + 1.0) == 0.0
    assert not parts.ready.inflight  # dropped from the list in the end


def test_predictions_follow_the_learnt_latency_scale(parts: Parts) -> None:
    costs = parts.sel.costs
    assert parts.sel.selector is not None
    parts.sel.selector.observe(1.0, 2.0)  # learn_rate 1: the worker runs twice as slow as profiled
    assert parts.ready.sent("image", 3, 0.0) == pytest.approx(2 * costs.run_ms(costs.subsets.index("image"), 3) / 1e3)
