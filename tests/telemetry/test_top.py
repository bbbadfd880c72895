"""The dashboard's model from constructed events (pure): queued, rates, SLO, plan mix, pools, workers."""

from __future__ import annotations

import pytest

from adaserve.broker.events import (
    BatchDispatched,
    BatchFinished,
    JobAccepted,
    JobCompleted,
    JobExpired,
    RequestTiming,
    WorkerHeartbeat,
    WorkerStopped,
)
from adaserve.telemetry.top import Window, dashboard

NOW = 1_000_000


def item(job: str, rid: str, total: float, *, exit_: int | None = None, status: str = "completed") -> RequestTiming:
    return RequestTiming(job_id=job, request_id=rid, app="a", status=status, queue_ms=1.0, exec_ms=2.0,
                         total_ms=total, exit=exit_)


def accepted(job: str, n: int, model: str = "m", deadline: float = 50) -> JobAccepted:
    return JobAccepted(ts=0, job_id=job, app="a", model=model, requests=n, deadline_ms=deadline)


def finished(batch: str, items: list[RequestTiming], *, worker: str = "w1", pool: str = "cpu", model: str = "m",
             variant: str = "default", **kw: object) -> BatchFinished:
    return BatchFinished(ts=0, batch_id=batch, pool=pool, worker=worker, model=model, variant=variant,
                         size=len(items) + int(kw.get("forwarded", 0)), exec_ms=4.0, items=items, **kw)


def scenario() -> list[tuple[int, object]]:
    """Load from NOW-4 s: 3 jobs of model m (2+3+4 requests) and one of model x."""
    return [
        (NOW - 20_000, accepted("old", 5)),  # before the window: not counted anywhere
        (NOW - 4000, accepted("j1", 2)),
        (NOW - 3900, accepted("j2", 3)),
        (NOW - 3800, accepted("j3", 4)),
        (NOW - 3700, accepted("k1", 1, model="x")),
        (NOW - 3500, BatchDispatched(ts=0, batch_id="b1", pool="cpu", model="m", size=3)),
        (NOW - 3000, finished("b1", [item("j1", "0", 20, exit_=1), item("j1", "1", 70, exit_=3),
                                     item("j2", "0", 30, exit_=1)], variant="small")),
        (NOW - 2900, JobCompleted(ts=0, job_id="j1", app="a", model="m", requests=2, completed=2,
                                  latency_ms=70, deadline_met=False)),
        (NOW - 2500, BatchDispatched(ts=0, batch_id="b2", pool="gpu", model="m", size=2)),  # still running
        (NOW - 2000, JobExpired(ts=0, job_id="j3", app="a", request_ids=["0"])),
        (NOW - 1000, WorkerHeartbeat(ts=0, worker="w1", pool="cpu", slots=2, busy=1)),
        (NOW - 500, WorkerHeartbeat(ts=0, worker="g1", pool="gpu", slots=4, busy=2, device="gpu",
                                    gpu={"util_pct": 81.0, "power_w": 250.5})),
        (NOW - 400, WorkerHeartbeat(ts=0, worker="gone", pool="cpu", slots=2)),
        (NOW - 300, WorkerStopped(ts=0, worker="gone", pool="cpu")),
    ]


def test_queued_is_accepted_less_ended_less_running() -> None:
    d = dashboard(scenario(), NOW, 10.0)
    m = next(r for r in d.models if r.model == "m")
    # open: j2 has 2 left, j3 has 3 left (one expired); b2's 2 requests are running
    assert (m.running, m.queued) == (2, 5 - 2)
    assert next(r for r in d.models if r.model == "x").queued == 1


def test_a_steady_queue_does_not_read_as_empty() -> None:
    """Requests accepted and dispatched at the same rate, 5 always waiting: queued stays 5,
    whereas window totals (accepted − dispatched in the window) would say 0."""
    evs: list[tuple[int, object]] = []
    for s in range(30):
        ms = NOW - 30_000 + s * 1000
        evs.append((ms, accepted(f"j{s}", 1)))
        if s >= 5:
            done = f"j{s - 5}"
            evs.append((ms + 1, BatchDispatched(ts=0, batch_id=f"b{s}", pool="cpu", model="m", size=1)))
            evs.append((ms + 2, finished(f"b{s}", [item(done, "0", 10)])))
            evs.append((ms + 3, JobCompleted(ts=0, job_id=done, app="a", model="m", requests=1, completed=1,
                                             latency_ms=10, deadline_met=True)))
    (m,) = dashboard(evs, NOW, 10.0).models
    assert m.queued == 5 and m.running == 0


def test_rates_are_over_the_time_load_ran() -> None:
    d = dashboard(scenario(), NOW, 10.0)
    assert d.span_s == pytest.approx(4.0)  # from the first load event in the window, not 10 s
    m = next(r for r in d.models if r.model == "m")
    assert m.arrival_rps == pytest.approx(9 / 4.0) and m.done_rps == pytest.approx(3 / 4.0)
    idle = dashboard([(NOW - 500, WorkerHeartbeat(ts=0, worker="w1", pool="cpu", slots=2))], NOW, 10.0)
    assert idle.span_s == 10.0 and idle.models == []


def test_finish_rate_slo_violations_and_percentiles() -> None:
    m = next(r for r in dashboard(scenario(), NOW, 10.0).models if r.model == "m")
    # j1 ended late: one request within 50 ms (20), one not (70)
    assert (m.ended, m.on_time, m.slo_violations, m.finish_rate) == (2, 1, 1, 0.5)
    assert m.p50_ms == pytest.approx(30.0) and m.p99_ms == pytest.approx(69.2)


def test_plan_mix() -> None:
    m = next(r for r in dashboard(scenario(), NOW, 10.0).models if r.model == "m")
    assert m.variants == {"small": 3} and m.exits == {"1": 2, "3": 1} and m.placements == {"cpu": 3}
    split = finished("b9", [item("s", "0", 5)], pool="gpu", part=1, next_pool="cpu", forwarded=2)
    (row,) = dashboard([(NOW - 10, split)], NOW, 10.0).models
    assert row.placements == {"gpu (part 1)": 1, "gpu>cpu": 2}


def test_pools_and_workers() -> None:
    d = dashboard(scenario(), NOW, 10.0)
    assert [w.worker for w in d.workers] == ["g1", "w1"]  # "gone" said it stopped
    g1 = d.workers[0]
    assert (g1.pool, g1.device, g1.slots, g1.busy, g1.util_pct, g1.power_w) == ("gpu", "gpu", 4, 2, 81.0, 250.5)
    assert g1.seen_s == pytest.approx(0.5) and g1.batches_per_s == 0.0
    w1 = d.workers[1]
    assert w1.batches_per_s == pytest.approx(1 / 4.0) and w1.rps == pytest.approx(3 / 4.0)
    cpu, gpu = d.pools
    assert (cpu.pool, cpu.workers, cpu.slots, cpu.busy, cpu.mean_batch, cpu.exec_p50_ms) == ("cpu", 1, 2, 1, 3.0, 4.0)
    assert (gpu.pool, gpu.slots, gpu.busy, gpu.mean_batch) == ("gpu", 4, 2, None)


def test_window_forgets_what_is_older_than_it() -> None:
    w = Window(5.0)
    for ms, ev in scenario():
        w.add(ms, ev)  # type: ignore[arg-type]
    d = w.view(NOW + 3000)  # the window is now NOW-2 s .. NOW+3 s
    assert d.events == 5 and all(r.model != "x" for r in d.models)
    assert w.view(NOW + 60_000).events == 0
