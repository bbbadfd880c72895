"""PlannedJobs: admission into the selector (in chunks when large), the gate, release and drops."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from adaserve.planner.mosel import QueueState, StrategyMatrix
from adaserve.planner.mosel.held import MoselJob
from adaserve.planner.mosel.planned import PlannedJobs
from adaserve.planner.mosel.selector import ModalitySelector
from adaserve.planner.mosel.shared import Selection
from adaserve.planner.mosel.store import SHIPPED_DIR


def planned(matrix: StrategyMatrix, *, built: bool = True, learn_rate: float = 0.0) -> PlannedJobs:
    """Planned jobs over the matrix's costs; ``built=False``: the matrix is still being built."""
    sel = Selection(matrix.costs, "random", learn_rate=learn_rate)
    if built:
        sel.use(matrix)
    return PlannedJobs(sel, "av-digits")


@pytest.fixture
def plans(matrix: StrategyMatrix) -> PlannedJobs:
    return planned(matrix)


def selector(plans: PlannedJobs) -> ModalitySelector:
    assert plans.sel.selector is not None
    return plans.sel.selector


def test_a_job_enters_the_selector_at_its_richest_behind_a_closed_gate(
        plans: PlannedJobs, matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    job = live_job("a", 4, 5.0)
    assert plans.admit(job)
    assert job.chunks == ["a"] and job.pinned is None and not job.planned
    assert selector(plans).strategy("a") == matrix.richest(4) == plans.top["a"]
    assert job.fastest_s == pytest.approx(matrix.candidates(4, 0.62)[0].latency_s)
    assert plans.held == 4 and plans.jobs == {"a": job}
    assert plans.peek() is None  # no monitor pass has seen it yet


def test_a_job_larger_than_the_matrix_enters_in_near_equal_chunks(
        plans: PlannedJobs, matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    n = 2 * matrix.max_size + 3
    job = live_job("big", n, 5.0, floor=0.8)
    assert plans.admit(job)
    size = n // 3
    assert job.chunks == ["big#0", "big#1", "big#2"] and all(plans.chunks[c].size == size for c in job.chunks)
    assert all(selector(plans).strategy(c) == matrix.richest(size) for c in job.chunks)
    assert job.fastest_s == pytest.approx(3 * matrix.candidates(size, 0.8)[0].latency_s)
    assert plans.job_of("big#1") is job and plans.key_of("big#1") == "big"
    plans.forget("big#1")
    assert plans.job_of("big#1") is None and plans.key_of("big#1") == "big"  # known from the name
    assert len(selector(plans)) == 2


def test_the_shipped_matrix_splits_a_large_job_and_its_release_covers_every_request(
        live_job: Callable[..., MoselJob]) -> None:
    shipped = StrategyMatrix.load(SHIPPED_DIR / "av-digits.mosel.json")  # measured on a CPU
    plans = planned(shipped)
    n = 2 * shipped.max_size + 6
    job = live_job("big", n, 60.0, floor=0.9)
    held = job.items[0].payload[0]
    assert plans.admit(job)
    sizes = [plans.chunks[c].size for c in job.chunks]
    assert len(sizes) == 3 and sum(sizes) == n and max(sizes) - min(sizes) == 1 and max(sizes) <= shipped.max_size
    pairs = plans.release(job)
    assert [p for _, p in pairs] == job.items and {s for s, _ in pairs} == {"audio+image"}
    assert held.accuracy == pytest.approx(max(shipped.accuracy)) == plans.finalized[-1][2]
    assert len(selector(plans)) == 0


def test_a_job_lacking_a_modality_is_pinned_to_its_best_subset(
        plans: PlannedJobs, matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    job = live_job("a", 3, 5.0, floor=0.8, inputs=("audio",))
    assert not plans.admit(job)
    assert job.pinned is not None and job.pinned.by_subset() == {"audio": 3} and job.chunks == []
    assert job.planned and plans.peek() is job  # a pinned job needs no monitor pass
    assert len(selector(plans)) == 0 and plans.current(job) == [job.pinned]
    assert job.fastest_s == pytest.approx(job.pinned.latency_s)


def test_a_job_is_pinned_to_the_inputs_all_its_requests_carry(
        plans: PlannedJobs, live_job: Callable[..., MoselJob]) -> None:
    job = live_job("mixed", 3, 5.0, floor=0.8)
    job.items[1].payload[1].inputs.pop("image")  # one request came without its image
    assert not plans.admit(job)
    assert job.pinned is not None and job.pinned.by_subset() == {"audio": 3}


def test_without_modality_selection_a_job_s_fastest_is_its_richest(
        matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    sel = Selection(matrix.costs, "none")
    sel.use(matrix)
    plans = PlannedJobs(sel, "av-digits")
    rich = matrix.richest(6).latency_s
    kept = live_job("kept", 6, 1.0 + 1.1 * rich)
    gone = live_job("gone", 6, 1.0 + 0.9 * rich)  # a cheaper mix would make it, but none is allowed
    for job in (kept, gone):
        assert plans.admit(job)
    assert gone.fastest_s == pytest.approx(rich)
    assert plans.hopeless(1.0) == gone.items and set(plans.jobs) == {"kept"}


def test_while_the_matrix_is_built_jobs_are_pinned_to_the_richest_subset(
        matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    plans = planned(matrix, built=False)
    job = live_job("a", 3, 5.0)
    assert not plans.admit(job)
    assert job.pinned is not None and job.pinned.by_subset() == {"audio+image": 3} and plans.peek() is job


def test_a_job_the_selector_refuses_is_pinned_and_leaves_nothing_behind(
        plans: PlannedJobs, matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    job = live_job("late", 2 * matrix.max_size + 1, 1.0, arrival=2.0)  # deadline before arrival
    assert not plans.admit(job)
    assert job.pinned is not None and job.chunks == [] and plans.chunks == {} and plans.top == {}
    assert len(selector(plans)) == 0 and plans.peek() is job


def test_a_floor_no_subset_reaches_ends_the_job_at_admission(
        plans: PlannedJobs, live_job: Callable[..., MoselJob]) -> None:
    job = live_job("x", 3, 5.0, floor=0.9, inputs=("audio",))  # audio alone reaches 0.85
    assert not plans.admit(job)
    assert plans.jobs == {} and plans.held == 0 and len(selector(plans)) == 0
    assert plans.take_dropped(set()) == job.items
    assert plans.take_dropped(set()) == []


def test_the_gate_opens_once_and_peek_follows_deadline_order(
        plans: PlannedJobs, live_job: Callable[..., MoselJob]) -> None:
    jobs = {k: live_job(k, 2, d) for k, d in [("c", 3.0), ("a", 1.0), ("b", 2.0)]}
    for job in jobs.values():
        plans.admit(job)
        plans.open_gate(job)
    plans.open_gate(jobs["a"])
    assert len(plans.order) == 3 and all(j.planned for j in jobs.values())
    assert plans.peek() is jobs["a"]
    plans.release(jobs["a"])
    plans.drop(jobs["b"])
    assert plans.peek() is jobs["c"] and len(plans.order) == 1  # the stale entries went on the way


def test_release_makes_the_strategy_final_and_records_its_accuracy(
        plans: PlannedJobs, matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    job = live_job("m", 6, 0.9 * matrix.richest(6).latency_s)
    held = job.items[0].payload[0]
    plans.admit(job)
    selector(plans).replan(QueueState([plans.chunks["m"]]), 0.0, admit_new=False)
    strategy = selector(plans).strategy("m")
    assert strategy is not None and strategy.accuracy < matrix.costs.max_accuracy
    pairs = plans.release(job)
    assert [p for _, p in pairs] == job.items
    assert {p.request_id: s for s, p in pairs} == strategy.assign([p.request_id for p in job.items])
    assert plans.finalized[-1] == ("m", (strategy,), pytest.approx(strategy.accuracy))
    assert held.accuracy == pytest.approx(strategy.accuracy)
    assert selector(plans).strategy("m") is None and plans.chunks == {} and plans.top == {}
    assert plans.jobs == {} and plans.held == 0


def test_a_chunked_job_s_accuracy_is_the_mean_over_its_requests(
        plans: PlannedJobs, matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    n = matrix.max_size + 1  # chunks of 4 and 3
    job = live_job("big", n, 5.0)
    held = job.items[0].payload[0]
    plans.admit(job)
    assert [plans.chunks[c].size for c in job.chunks] == [4, 3]
    # Make the first chunk cheaper: as if a pass had found it late at its richest.
    selector(plans).replan(QueueState([plans.chunks["big#0"]], 5.0 - 0.9 * matrix.richest(4).latency_s),
                           0.0, admit_new=False)
    first, second = (selector(plans).strategy(c) for c in job.chunks)
    assert first is not None and second is not None and first.accuracy < second.accuracy
    pairs = plans.release(job)
    want = (first.accuracy * 4 + second.accuracy * 3) / n
    assert plans.finalized[-1] == ("big", (first, second), pytest.approx(want))
    assert held.accuracy == pytest.approx(want)
    subsets = [s for s, _ in pairs]
    assert subsets == [s for st in (first, second) for s, k in zip(st.subsets, st.counts) for _ in range(k)]


def test_a_job_the_monitor_expired_in_part_before_its_release_ends_whole(
        plans: PlannedJobs, matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    job = live_job("gone", matrix.max_size + 1, 1.0)
    held = job.items[0].payload[0]
    plans.admit(job)
    changes = selector(plans).replan(QueueState([plans.chunks["gone#1"]]), 2.0, admit_new=False)
    assert [(c.job_id, c.after) for c in changes] == [("gone#1", None)]  # past its deadline: expired
    assert plans.release(job) == []
    assert plans.take_dropped(set()) == job.items
    assert held.accuracy is None and len(plans.finalized) == 0 and plans.held == 0
    assert len(selector(plans)) == 0  # the part still planned left the selector too


def test_hopeless_jobs_are_dropped_at_the_learnt_speed(
        matrix: StrategyMatrix, live_job: Callable[..., MoselJob]) -> None:
    plans = planned(matrix, learn_rate=1.0)
    fastest = matrix.candidates(6, 0.62)[0].latency_s
    assert fastest > 0
    ok = live_job("ok", 6, 100.0)
    tight = live_job("tight", 6, 10.0 + 1.5 * fastest)  # makes it alone at its fastest
    gone = live_job("gone", 6, 10.0 + 0.5 * fastest)    # cannot
    for job in (ok, tight, gone):
        plans.admit(job)
    assert plans.hopeless(10.0) == gone.items
    assert set(plans.jobs) == {"ok", "tight"} and plans.held == 12
    assert selector(plans).strategy("gone") is None and len(selector(plans)) == 2
    selector(plans).observe(1.0, 2.0)  # the worker runs twice as slow as profiled
    assert plans.hopeless(10.0) == tight.items and set(plans.jobs) == {"ok"}


def test_take_dropped_ends_the_doomed_jobs(plans: PlannedJobs, live_job: Callable[..., MoselJob]) -> None:
    a = live_job("a", 2, 5.0)
    b = live_job("b", 3, 5.0, floor=0.99)  # unreachable: dropped at admission
    plans.admit(a)
    plans.admit(b)
    out = plans.take_dropped({"a", "unknown"})
    assert out == b.items + a.items
    assert plans.jobs == {} and plans.held == 0 and len(selector(plans)) == 0
    assert plans.take_dropped({"a"}) == []
