"""Aggregation of synthetic events (pure)."""

from __future__ import annotations

import pytest

from adaserve.broker.events import (
    BatchFinished,
    JobAccepted,
    JobCompleted,
    JobRejected,
    RequestTiming,
    WorkerHeartbeat,
)
from adaserve.telemetry.stats import aggregate


def item(job: str, rid: str, total: float, *, app: str = "a", run: str = "r1", status: str = "completed") -> RequestTiming:
    return RequestTiming(job_id=job, request_id=rid, app=app, run=run, status=status,
                         queue_ms=1.0, exec_ms=2.0, total_ms=total)


def scenario() -> list:
    return [
        JobAccepted(ts=1000, job_id="j1", app="a", model="m", run="r1", requests=2, deadline_ms=100),
        JobAccepted(ts=1000, job_id="j2", app="a", model="m", run="r1", requests=3, deadline_ms=50),
        JobAccepted(ts=1100, job_id="j3", app="b", model="m", run="r2", requests=1, deadline_ms=100),
        BatchFinished(ts=1050, batch_id="b1", pool="cpu", worker="w1", model="m", size=3, exec_ms=10,
                      items=[item("j1", "0", 20), item("j1", "1", 30), item("j2", "0", 40)]),
        BatchFinished(ts=1090, batch_id="b2", pool="cpu", worker="w2", model="m", size=2, exec_ms=30,
                      items=[item("j2", "1", 80), item("j3", "0", 60, app="b", run="r2")]),
        # a redelivered batch reports j1/0 again: counted once
        BatchFinished(ts=1095, batch_id="b1", pool="cpu", worker="w2", model="m", size=1, exec_ms=10,
                      items=[item("j1", "0", 95)]),
        JobCompleted(ts=1030, job_id="j1", app="a", run="r1", requests=2, completed=2, latency_ms=30, deadline_met=True),
        # j2: one on time (40 <= 50), one late (80), one expired
        JobCompleted(ts=1090, job_id="j2", app="a", run="r1", requests=3, completed=2, expired=1,
                     latency_ms=80, deadline_met=False),
        JobCompleted(ts=1160, job_id="j3", app="b", run="r2", requests=1, completed=1, latency_ms=60, deadline_met=True),
        JobRejected(ts=1200, job_id="j4", app="a", run="r1", requests=4, reason="schema"),
        WorkerHeartbeat(ts=1200, worker="w1", pool="cpu", slots=2),
    ]


def test_totals_and_finish_rate() -> None:
    s = aggregate(scenario(), span_s=2.0)
    t = s.total
    assert (t.jobs, t.submitted, t.completed, t.expired, t.rejected, t.failed) == (4, 10, 5, 1, 4, 0)
    assert t.on_time == 2 + 1 + 1
    assert t.finish_rate == pytest.approx(4 / 10)
    assert t.slo_violations == 6 - 4
    assert t.throughput_rps == pytest.approx(5 / 2.0)
    assert t.p50_ms == pytest.approx(40) and t.p99_ms == pytest.approx(79.2)
    assert s.reasons == {"expired": 1, "schema": 4}


def test_per_app() -> None:
    s = aggregate(scenario(), span_s=1.0)
    assert set(s.apps) == {"a", "b"}
    assert s.apps["a"].submitted == 9 and s.apps["a"].on_time == 3
    assert s.apps["b"].finish_rate == 1.0 and s.apps["b"].p50_ms == 60


def test_per_pool() -> None:
    s = aggregate(scenario(), span_s=1.0)
    (p,) = s.pools
    assert (p.pool, p.model, p.batches, p.requests, p.workers) == ("cpu", "m", 3, 6, 2)
    assert p.mean_batch == 2.0 and p.exec_p50_ms == 10.0


def test_requests_a_worker_ended_unrun_are_not_its_work() -> None:
    """A batch whose requests partly waited out their deadlines at the worker: the pool and the
    worker ran the others."""
    late = BatchFinished(ts=1098, batch_id="b3", pool="cpu", worker="w1", model="m", size=3, exec_ms=5, expired=2,
                         items=[item("j5", "0", 120, status="expired"), item("j5", "1", 120, status="expired"),
                                item("j5", "2", 30)])
    s = aggregate([*scenario(), late], span_s=1.0)
    assert (s.pools[0].batches, s.pools[0].requests) == (4, 7)
    assert [w.requests for w in s.workers] == [4, 3]
    assert aggregate([*scenario(), late], run="r1", span_s=1.0).pools[0].requests == 6


def test_run_filter_keeps_only_that_runs_requests() -> None:
    s = aggregate(scenario(), run="r2")
    assert s.total.submitted == 1 and s.total.completed == 1 and s.total.p50_ms == 60
    assert s.pools[0].requests == 1 and s.pools[0].p50_ms == 60
    assert s.span_s == 1.0  # 70 ms of load: under a second is reported as one


def test_rates_are_over_the_time_load_ran_not_the_window() -> None:
    """155 requests/s for 2 s inside a 60 s window read as 155/s, not 5.2/s; heartbeats, which
    go on while nothing runs, do not stretch the span."""
    evs: list = [WorkerHeartbeat(ts=ms, worker="w1", pool="cpu", slots=2) for ms in range(0, 60_000, 1000)]
    for k in range(311):
        ts = 10_000 + k * 2000 / 310
        evs.append(JobCompleted(ts=ts, job_id=f"j{k}", app="a", requests=1, completed=1, latency_ms=5,
                                deadline_met=True))
    s = aggregate(evs, window_s=60.0)
    assert s.window_s == 60.0 and s.span_s == pytest.approx(2.0)
    assert s.total.throughput_rps == pytest.approx(155.5)


def test_per_worker_rows() -> None:
    evs = [*scenario(), WorkerHeartbeat(ts=1300, worker="w2", pool="cpu", slots=4, busy=3, device="gpu",
                                        gpu={"util_pct": 55.0, "power_w": 120.0})]
    s = aggregate(evs, span_s=2.0)
    w1, w2 = s.workers
    assert (w1.worker, w1.batches, w1.requests, w1.slots, w1.busy, w1.util_pct) == ("w1", 1, 3, 2, 0, None)
    assert w1.throughput_rps == pytest.approx(1.5) and w1.exec_p50_ms == 10.0
    assert (w2.worker, w2.batches, w2.requests, w2.slots, w2.busy) == ("w2", 2, 3, 4, 3)
    assert (w2.util_pct, w2.power_w, w2.exec_p50_ms) == (55.0, 120.0, 20.0)
    assert aggregate(evs, run="r2").workers[0].requests == 1


def test_no_events() -> None:
    s = aggregate([])
    assert s.total.submitted == 0 and s.total.finish_rate == 0.0 and s.total.p50_ms is None
    assert s.pools == [] and s.span_s == 0.0
