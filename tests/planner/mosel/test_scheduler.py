"""The live MOSEL scheduler: per-subset batches, counts as planned, final strategies, expiry, gate."""

from __future__ import annotations

import gc
import threading
import weakref
from collections import Counter

import numpy as np
import pytest

from adaserve.broker.errors import InvalidMessage
from adaserve.broker.messages import Job, Request, Slo, Tensor
from adaserve.planner.core import Decision, Feedback, Pending
from adaserve.planner.mosel import StrategyMatrix
from adaserve.planner.mosel.monitor import Monitor
from adaserve.planner.mosel.scheduler import MoselScheduler
from adaserve.planner.state import HeldJob

BOTH = ("audio", "image")


def make_job(jid: str, n: int, floor: float, modalities: tuple[str, ...] = BOTH) -> Job:
    t = Tensor.from_numpy(np.zeros(2, np.float32))
    return Job(id=jid, model="av-digits", reply_to="c", slo=Slo(deadline_ms=1000, min_accuracy=floor),
               requests=[Request(id=f"r{i}", inputs={m: t for m in modalities}) for i in range(n)])


def add(s: MoselScheduler, jid: str, n: int, floor: float, deadline: float, *, arrival: float = 0.0,
        modalities: tuple[str, ...] = BOTH) -> HeldJob:
    job = make_job(jid, n, floor, modalities)
    held = HeldJob(job, "0-1", arrival * 1000, n)
    for r in job.requests:
        s.add(Pending(jid, r.id, "app", "av-digits", arrival, deadline, payload=(held, r), floor=floor, job_size=n),
              arrival)
    return held


def drain(s: MoselScheduler, now: float = 0.0, max_size: int = 4) -> list[Decision]:
    out = []
    for _ in range(1000):
        if not len(s):
            return out
        d = s.next_batch(now, max_size)
        assert d.batch or d.expired, "pending requests but nothing came out"
        out.append(d)
    raise AssertionError("scheduler did not drain")


@pytest.fixture
def sched(matrix: StrategyMatrix) -> MoselScheduler:
    s = MoselScheduler(matrix.costs, matrix, "random", model="av-digits", learn_rate=0.0)
    yield s
    s.close()


def test_batches_share_one_subset_and_each_job_gets_its_planned_counts(sched: MoselScheduler,
                                                                        matrix: StrategyMatrix) -> None:
    rich = matrix.richest(6).latency_s
    held = {jid: add(sched, jid, 6, floor, deadline) for jid, floor, deadline in
            [("a", 0.8, 0.9 * rich), ("b", 0.62, 5.0), ("c", 0.9, 5.0)]}
    decisions = drain(sched)
    used: dict[str, Counter[str]] = {j: Counter() for j in held}
    for d in decisions:
        assert d.batch and len(d.batch) <= 4
        assert d.modalities == tuple(d.variant.split("+"))
        for p in d.batch:
            used[p.job_id][d.variant] += 1
    final = {jid: (strategies, acc) for jid, strategies, acc in sched.finalized}
    for jid, h in held.items():
        (strategy,), acc = final[jid]
        assert dict(used[jid]) == strategy.by_subset()
        assert h.accuracy == pytest.approx(acc) and acc >= h.job.slo.min_accuracy - 1e-9
    # The tight job could not run at its richest mix, and got a cheaper one that meets its floor.
    assert held["a"].accuracy < matrix.costs.max_accuracy
    assert any(e["job_id"] == "a" and e["reason"] == "cheaper" for _, e in sched.drain_events())


def test_a_released_strategy_is_final(sched: MoselScheduler, matrix: StrategyMatrix) -> None:
    add(sched, "a", 6, 0.62, 5.0)
    first = sched.next_batch(0.0, 2)  # the job's strategy is released here
    assert len(first.batch) == 2 and sched.selector is not None and sched.selector.strategy("a") is None
    (_, (strategy,), _acc), = sched.finalized
    sched.drain_events()
    # Pressure from a new, earlier job must not touch "a" any more.
    rich = matrix.richest(6).latency_s
    add(sched, "b", 6, 0.9, 0.95 * rich)
    rest = drain(sched, max_size=2)
    got = Counter({first.variant: 2})
    for d in rest:
        got.update(d.variant for p in d.batch if p.job_id == "a")
    assert dict(got) == strategy.by_subset()
    assert all(e["job_id"] != "a" for _, e in sched.drain_events())


def test_expiry_of_late_and_hopeless_jobs(sched: MoselScheduler, matrix: StrategyMatrix) -> None:
    add(sched, "past", 3, 0.62, 1.0)
    add(sched, "ok", 3, 0.62, 50.0)
    gone = sched.expire(2.0)  # 'past' cannot finish even alone at its fastest
    assert {p.job_id for p in gone} == {"past"} and len(gone) == 3 and len(sched) == 3
    # A job only its fastest mix would save, behind one that takes the time: the monitor expires it.
    fast = matrix.candidates(6, 0.62)[0].latency_s
    add(sched, "first", 6, 0.62, 10.0 + fast * 1.01, arrival=10.0)
    add(sched, "doomed", 6, 0.96, 10.0 + fast * 1.5, arrival=10.0)
    out = [p for d in drain(sched, now=10.0) for p in d.expired]
    assert {p.job_id for p in out} == {"doomed"}
    assert any(e["job_id"] == "doomed" and e["after"] == "expired" for _, e in sched.drain_events())


def test_released_requests_that_cannot_finish_are_expired(sched: MoselScheduler) -> None:
    add(sched, "a", 6, 0.62, 1.0)
    d = sched.next_batch(0.0, 2)
    assert len(d.batch) == 2
    assert len(sched.expire(5.0)) == 4 and len(sched) == 0


def test_unreachable_floor_and_missing_modalities(sched: MoselScheduler, matrix: StrategyMatrix) -> None:
    with pytest.raises(InvalidMessage, match=r"accuracy_floor|above the best"):
        sched.check_job(make_job("x", 2, 0.99))
    sched.check_job(make_job("x", 2, 0.8, ("audio",)))  # audio alone reaches 0.85
    with pytest.raises(InvalidMessage) as exc:
        sched.check_job(make_job("x", 2, 0.9, ("audio",)))
    assert exc.value.reason == "accuracy_floor" and "inputs its requests carry" in exc.value.detail
    # A job with audio only is pinned to the audio subset and never enters the selector.
    held = add(sched, "audio-only", 5, 0.8, 5.0, modalities=("audio",))
    decisions = drain(sched)
    assert {d.variant for d in decisions} == {"audio"} and sum(len(d.batch) for d in decisions) == 5
    assert held.accuracy == pytest.approx(dict(zip(matrix.subsets, matrix.accuracy))["audio"])


def test_a_job_larger_than_the_matrix_is_planned_in_parts(sched: MoselScheduler, matrix: StrategyMatrix) -> None:
    n = matrix.max_size * 2 + 3
    rich = matrix.richest(matrix.max_size).latency_s
    held = add(sched, "big", n, 0.8, 2.2 * rich)
    decisions = drain(sched)
    assert sum(len(d.batch) for d in decisions) == n
    (_, strategies, acc), = sched.finalized
    assert len(strategies) == 3 and sum(s.size for s in strategies) == n
    assert all(s.meets(0.8) for s in strategies) and held.accuracy == pytest.approx(acc) and acc >= 0.8
    parts = {e["part"] for _, e in sched.drain_events() if e["job_id"] == "big"}
    assert parts and parts <= {0, 1, 2}


def test_under_pressure_no_dispatch_before_the_monitor_has_seen_the_job(matrix: StrategyMatrix) -> None:
    s = MoselScheduler(matrix.costs, matrix, "random", model="av-digits", period_s=0.0, tasks=Monitor("t"))
    try:
        hold = threading.Event()
        assert s.monitor.submit(hold.wait)  # the monitor is busy with something else
        add(s, "a", 6, 0.62, 0.9 * matrix.richest(6).latency_s)  # its richest mix would be late
        assert not s.next_batch(0.0, 4).batch and s.earliest_deadline() == float("inf")
        hold.set()
        assert s.monitor.wait_idle()
        s.next_batch(0.0, 4)  # hands the monitor its pass over "a"
        assert s.monitor.wait_idle()
        d = s.next_batch(0.0, 4)
        assert d.batch and s.finalized[0][2] < matrix.costs.max_accuracy
    finally:
        s.close()


def test_without_pressure_a_job_needs_no_monitor_pass(matrix: StrategyMatrix) -> None:
    s = MoselScheduler(matrix.costs, matrix, "random", model="av-digits", tasks=Monitor("t"))
    try:
        hold = threading.Event()
        assert s.monitor.submit(hold.wait)  # a busy monitor does not hold back a job it cannot change
        add(s, "a", 3, 0.62, 100.0)
        d = s.next_batch(0.0, 4)
        assert len(d.batch) == 3 and d.variant == matrix.subsets[matrix.costs.richest]
        hold.set()
    finally:
        s.close()


def test_jobs_run_at_their_richest_subset_while_the_matrix_is_built(matrix: StrategyMatrix) -> None:
    release = threading.Event()

    def build() -> StrategyMatrix:
        release.wait(5)
        return matrix

    s = MoselScheduler(matrix.costs, None, "random", model="av-digits", build=build, tasks=Monitor("t"))
    try:
        held = add(s, "early", 4, 0.62, 100.0)
        d = s.next_batch(0.0, 4)
        assert d.variant == matrix.subsets[matrix.costs.richest] and len(d.batch) == 4
        assert held.accuracy == pytest.approx(matrix.costs.max_accuracy)
        release.set()
        assert s.monitor.wait_idle()
        s.next_batch(0.0, 4)
        assert s.selector is not None
    finally:
        s.close()


def test_feedback_corrects_the_profile_and_clears_the_backlog(matrix: StrategyMatrix) -> None:
    s = MoselScheduler(matrix.costs, matrix, "random", model="av-digits", learn_rate=0.5)
    add(s, "a", 4, 0.62, 100.0)
    d = s.next_batch(0.0, 4)
    assert s.ready.backlog_s(0.0) == pytest.approx(d.predicted_s)
    s.observe(Feedback("av-digits", len(d.batch), 2 * d.predicted_s, variant=d.variant))
    sel = s.selector
    assert sel is not None and sel.correction is not None
    # The first batch of a subset sets its scale outright; the other subsets keep the profile's.
    assert sel.correction.as_dict()[d.variant] == pytest.approx(2.0)
    assert all(v == 1.0 for k, v in sel.correction.as_dict().items() if k != d.variant)
    assert s.ready.backlog_s(0.0) == 0.0
    s.close()


def test_the_shared_correction_moves_one_scale_for_every_subset(matrix: StrategyMatrix) -> None:
    s = MoselScheduler(matrix.costs, matrix, "random", model="av-digits", learn_rate=0.5, per_subset=False)
    add(s, "a", 4, 0.62, 100.0)
    d = s.next_batch(0.0, 4)
    s.observe(Feedback("av-digits", len(d.batch), 2 * d.predicted_s, variant=d.variant))
    assert s.selector is not None and s.selector.latency_scale == pytest.approx(1.5)
    assert s.selector.correction is None
    s.close()


def test_the_scheduler_keeps_no_job_it_has_let_go(sched: MoselScheduler) -> None:
    # Live, a held job carries its tensors: one kept after its requests left is memory held for
    # the planner's life (the contract test for the other policies: tests/planner/test_core.py).
    watched = []
    for j in range(40):
        watched.append(weakref.ref(add(sched, f"j{j}", 3, 0.5, deadline=60.0, arrival=0.001 * j)))
        drain(sched, now=0.001 * j)
    for j in range(40, 50):  # and some that expire
        watched.append(weakref.ref(add(sched, f"j{j}", 3, 0.5, deadline=0.01, arrival=0.001 * j)))
    drain(sched, now=1.0)
    gc.collect()
    assert [ref() for ref in watched] == [None] * 50
