"""MonitorPasses: when a pass is handed to the monitor, and what a finished pass changes."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator

import pytest

from adaserve.planner.mosel import QueueState, StrategyMatrix
from adaserve.planner.mosel.held import MoselJob
from adaserve.planner.mosel.monitor import Monitor
from adaserve.planner.mosel.passes import MonitorPasses
from adaserve.planner.mosel.planned import PlannedJobs
from adaserve.planner.mosel.ready import ReadyQueues
from adaserve.planner.mosel.selector import ModalitySelector
from adaserve.planner.mosel.shared import Selection
from adaserve.planner.mosel.tasks import InlineTasks, Tasks

PERIOD_S = 0.5


class Parts:
    """The live scheduler's parts around one monitor, wired as ``MoselScheduler`` wires them."""

    def __init__(self, matrix: StrategyMatrix | None, costs_of: StrategyMatrix, *, inline: bool = True) -> None:
        self.sel = Selection(costs_of.costs, "random", learn_rate=0.0)
        if matrix is not None:
            self.sel.use(matrix)
        self.plans = PlannedJobs(self.sel, "av-digits")
        self.ready = ReadyQueues(self.sel, self.plans, itertools.count(1))
        self.monitor: Tasks = InlineTasks() if inline else Monitor("test-monitor")
        self.passes = MonitorPasses(self.sel, self.plans, self.ready, self.monitor, model="av-digits",
                                    period_s=PERIOD_S)

    @property
    def selector(self) -> ModalitySelector:
        assert self.sel.selector is not None
        return self.sel.selector

    def admit(self, job: MoselJob) -> MoselJob:
        if self.plans.admit(job):
            self.passes.dirty = True
        return job


@pytest.fixture
def parts(matrix: StrategyMatrix) -> Iterator[Parts]:
    p = Parts(matrix, matrix)
    yield p
    p.monitor.close()


def test_no_pass_without_a_job_in_the_selector(parts: Parts, live_job: Callable[..., MoselJob]) -> None:
    parts.passes.dirty = True
    parts.passes.kick(0.0)
    assert parts.selector.stats.replans == 0 and parts.passes.dirty  # nothing was looked at
    pinned = parts.admit(live_job("p", 2, 5.0, inputs=("audio",)))  # no image: pinned to audio
    parts.passes.kick(0.0)
    assert parts.selector.stats.replans == 0 and parts.plans.peek() is pinned


def test_with_time_to_spare_the_gate_opens_without_a_pass(parts: Parts, live_job: Callable[..., MoselJob]) -> None:
    job = parts.admit(live_job("a", 6, 100.0))
    parts.passes.kick(0.0)
    assert job.planned and parts.plans.peek() is job
    assert parts.selector.stats.replans == 0 and not parts.passes.dirty
    assert parts.passes.drain_events() == []


def test_backlog_ahead_of_the_queue_calls_for_a_pass(
        parts: Parts, matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    rich = matrix.richest(6).latency_s
    job = parts.admit(live_job("a", 6, 1.5 * rich))  # alone at its richest it is on time
    parts.ready.sent("audio+image", 6, 0.0)  # but a batch as long as the job is still running
    parts.passes.kick(0.0)
    assert parts.selector.stats.replans == 1 and job.planned
    (name, ev), = parts.passes.drain_events()
    assert name == "planner.replanned" and ev["reason"] == "cheaper"


def test_a_pass_makes_a_late_job_cheaper_and_says_so(
        parts: Parts, matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    rich = matrix.richest(6)
    job = parts.admit(live_job("a/7", 6, 0.9 * rich.latency_s, floor=0.8))  # a repeated job id
    parts.passes.kick(0.0)
    assert parts.selector.stats.replans == 1 and job.planned and not parts.passes.dirty
    after = parts.selector.strategy("a/7")
    assert after is not None and after.accuracy < rich.accuracy and after.meets(0.8)
    assert parts.passes.drain_events() == [("planner.replanned", {
        "job_id": "a", "model": "av-digits", "part": None, "reason": "cheaper",
        "before": rich.label(), "after": after.label(),
        "before_accuracy": rich.accuracy, "after_accuracy": after.accuracy,
    })]
    assert parts.passes.drain_events() == [] and parts.passes.take_doomed() == set()


def test_the_parts_of_a_large_job_are_numbered_in_its_events(
        parts: Parts, matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    n = 2 * matrix.max_size + 3
    size = n // 3
    job = parts.admit(live_job("big", n, 2.5 * matrix.richest(size).latency_s, floor=0.8))
    parts.passes.kick(0.0)
    assert job.planned
    events = [ev for _, ev in parts.passes.drain_events()]
    assert events and {ev["job_id"] for ev in events} == {"big"}
    assert {ev["part"] for ev in events} <= {0, 1, 2}
    for ev in events:
        now = parts.selector.strategy(f"big#{ev['part']}")
        assert now is not None and (ev["after"], ev["after_accuracy"]) == (now.label(), now.accuracy)
        assert ev["before"] == matrix.richest(size).label()


def test_a_pass_that_expires_a_job_dooms_it(
        parts: Parts, matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    fast = matrix.candidates(6, 0.62)[0].latency_s
    first = parts.admit(live_job("first", 6, fast * 1.01, floor=0.62))
    doomed = parts.admit(live_job("doomed/3", 6, fast * 1.5, floor=0.96))  # only its richest is allowed
    parts.passes.kick(0.0)
    assert first.planned and doomed.planned
    (_, ev), = [e for e in parts.passes.drain_events() if e[1]["job_id"] == "doomed"]
    rich = matrix.richest(6)
    assert ev == {"job_id": "doomed", "model": "av-digits", "part": None, "reason": "expire",
                  "before": rich.label(), "after": "expired", "before_accuracy": rich.accuracy,
                  "after_accuracy": None}
    keys = parts.passes.take_doomed()
    assert keys == {"doomed/3"} and parts.passes.take_doomed() == set()
    assert parts.plans.take_dropped(keys) == doomed.items and set(parts.plans.jobs) == {"first"}


def test_spare_time_is_given_back_as_accuracy(
        parts: Parts, matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    rich = matrix.richest(6)
    job = parts.admit(live_job("a", 6, 10.0))
    # An earlier pass, with the worker busy until just before the deadline, made it cheaper.
    parts.selector.replan(QueueState([parts.plans.chunks["a"]], 10.0 - 0.5 * rich.latency_s), 0.0,
                          admit_new=False)
    cheap = parts.selector.strategy("a")
    assert cheap is not None and cheap != rich
    parts.passes.kick(0.0)  # the worker is free now: there is time for the richest mix again
    (_, ev), = parts.passes.drain_events()
    assert (ev["reason"], ev["before"], ev["after"]) == ("richer", cheap.label(), rich.label())
    assert (ev["before_accuracy"], ev["after_accuracy"]) == (cheap.accuracy, rich.accuracy)
    assert parts.selector.strategy("a") == rich and job.planned


def test_passes_wait_for_the_period_unless_the_queue_moved(
        parts: Parts, matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    parts.admit(live_job("a", 6, 0.9 * matrix.richest(6).latency_s))
    parts.passes.kick(0.0)
    assert parts.selector.stats.replans == 1
    parts.passes.kick(PERIOD_S / 2)
    assert parts.selector.stats.replans == 1
    parts.passes.dirty = True  # a batch left, say
    parts.passes.kick(PERIOD_S / 2)
    assert parts.selector.stats.replans == 2
    parts.passes.kick(PERIOD_S / 2 + PERIOD_S)
    assert parts.selector.stats.replans == 3


def test_a_busy_monitor_keeps_the_queue_dirty_and_the_gate_closed(
        matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    p = Parts(matrix, matrix, inline=False)
    hold = threading.Event()
    try:
        assert p.monitor.submit(hold.wait)
        job = p.admit(live_job("a", 6, 0.9 * matrix.richest(6).latency_s))
        p.passes.kick(0.0)
        assert p.passes.dirty and not job.planned
        hold.set()
        assert p.monitor.wait_idle()
        p.passes.kick(0.0)  # hands the pass over; its result comes on a later call
        assert not p.passes.dirty and p.monitor.wait_idle()
        late = p.admit(live_job("late", 2, 100.0))  # not in the pass's snapshot
        assert not job.planned
        p.passes.collect(0.0)
        assert job.planned and not late.planned
        assert [e["reason"] for _, e in p.passes.drain_events()] == ["cheaper"]
    finally:
        hold.set()
        p.monitor.close()


def test_a_slow_pass_makes_the_next_one_plan_further_ahead(
        matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    p = Parts(matrix, matrix, inline=False)
    try:
        rich = matrix.richest(6).latency_s
        p.admit(live_job("a", 6, 1.5 * rich))
        p.ready.sent("audio+image", 6, 0.0)  # so that "a" needs a pass
        p.passes.kick(0.0)
        assert p.monitor.wait_idle()
        p.passes.collect(1.0)  # its result reached the batch former a second after its snapshot
        p.passes.drain_events()
        # A job with 0.1 s to spare would be fine if the pass were instant, but the next pass is
        # expected to land later than that (the lag is learnt from the passes so far).
        soon = p.admit(live_job("soon", 2, 1.1))
        p.passes.kick(1.0)
        assert p.monitor.wait_idle()
        p.passes.collect(1.0)
        assert "soon" in p.passes.take_doomed()
        assert any(e["job_id"] == "soon" and e["after"] == "expired" for _, e in p.passes.drain_events())
        assert soon.planned
    finally:
        p.monitor.close()


def test_a_late_pass_whose_jobs_no_longer_wait_does_not_count_as_lag(
        matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    """The loop collects a pass when it next runs; when no job of the pass still waits at the gate
    (the loop was idle, blocked on its read), that delay held nobody up and is not planned for."""
    p = Parts(matrix, matrix, inline=False)
    try:
        rich = matrix.richest(6).latency_s
        a = p.admit(live_job("a", 6, 1.5 * rich))
        p.ready.sent("audio+image", 6, 0.0)
        p.passes.kick(0.0)
        assert p.monitor.wait_idle()
        p.plans.open_gate(a)  # the job left the gate before the pass came back
        p.passes.collect(1.0)
        p.passes.drain_events()
        soon = p.admit(live_job("soon", 2, 1.1))
        p.passes.kick(1.0)
        assert p.monitor.wait_idle()
        p.passes.collect(1.0)
        assert "soon" not in p.passes.take_doomed() and soon.planned
    finally:
        p.monitor.close()


def test_a_matrix_built_on_the_monitor_turns_selection_on(
        matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    p = Parts(None, matrix)
    assert p.sel.selector is None
    p.passes.kick(0.0)  # no selector: nothing to pass over
    assert p.monitor.submit(lambda: matrix)
    p.passes.collect(0.0)
    assert p.sel.matrix is matrix and p.selector.policy == "random"
    job = p.admit(live_job("a", 3, 100.0))
    assert job.chunks == ["a"]  # it entered the selector rather than being pinned
