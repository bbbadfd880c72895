"""Aggregating telemetry events into serving figures (pure: a list of events in, a model out).

Request accounting comes from the two events that end jobs: ``job.completed`` (per-status counts
of an accepted job) and ``job.rejected`` (a job refused as a whole). Per-request latency and
per-pool figures come from ``batch.finished`` items; deadlines from ``job.accepted``.

A request is *on time* when it completed within its job's deadline. A job whose last request
ended by the deadline had all its completed requests on time; for other jobs, the requests whose
``batch.finished`` timing is within the deadline count. ``finish_rate`` = on time / submitted;
``slo_violations`` = requests of accepted jobs that were not on time (rejected jobs are input
errors, counted under ``rejected`` and ``reasons``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

import numpy as np
from pydantic import BaseModel

from adaserve.broker.events import BatchFinished, Event, JobAccepted, JobCompleted, JobRejected, WorkerHeartbeat


class Counts(BaseModel):
    jobs: int = 0
    submitted: int = 0
    completed: int = 0
    expired: int = 0
    rejected: int = 0
    failed: int = 0
    on_time: int = 0
    slo_violations: int = 0
    finish_rate: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    job_p50_ms: float | None = None
    job_p99_ms: float | None = None
    throughput_rps: float = 0.0


class PoolStats(BaseModel):
    pool: str
    model: str
    variant: str
    batches: int
    requests: int
    mean_batch: float
    exec_p50_ms: float | None
    exec_p99_ms: float | None
    p50_ms: float | None
    p99_ms: float | None
    throughput_rps: float
    workers: int
    devices: list[str]


class WorkerStats(BaseModel):
    worker: str
    pool: str
    device: str
    batches: int
    requests: int
    throughput_rps: float
    exec_p50_ms: float | None
    slots: int | None  # from its last heartbeat in the window
    busy: int | None
    util_pct: float | None
    power_w: float | None


class Stats(BaseModel):
    span_s: float  # what rates are over: first to last load event (heartbeats are not load)
    window_s: float | None = None  # the window asked for, when there was one
    run: str | None = None
    events: int
    total: Counts
    apps: dict[str, Counts]
    pools: list[PoolStats]
    workers: list[WorkerStats] = []
    reasons: dict[str, int]


def pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else None


class _Acc:
    """Running sums for one app (or the total)."""

    def __init__(self) -> None:
        self.c = Counter[str]()
        self.latencies: list[float] = []
        self.job_latencies: list[float] = []

    def counts(self, span_s: float) -> Counts:
        c = self.c
        done = c["completed"]
        sub = c["submitted"]
        return Counts(
            jobs=c["jobs"], submitted=sub, completed=done, expired=c["expired"], rejected=c["rejected"],
            failed=c["failed"], on_time=c["on_time"], slo_violations=c["accepted_requests"] - c["on_time"],
            finish_rate=c["on_time"] / sub if sub else 0.0,
            p50_ms=pct(self.latencies, 50), p99_ms=pct(self.latencies, 99),
            job_p50_ms=pct(self.job_latencies, 50), job_p99_ms=pct(self.job_latencies, 99),
            throughput_rps=done / span_s if span_s > 0 else 0.0,
        )


def aggregate(events: Iterable[Event], *, span_s: float | None = None, window_s: float | None = None,
              run: str | None = None) -> Stats:
    """``span_s``: what rates are over (default: first to last load event, so that 7 s of load
    in a 60 s window reads as its real rate); ``window_s``: the window the events were read
    from, reported as is; ``run``: keep only what concerns that run (a batch's requests of other
    runs are left out)."""
    every = list(events)
    beats = [e for e in every if isinstance(e, WorkerHeartbeat)]
    evs = [e for e in every if run is None or _concerns(e, run)]
    deadlines = {e.job_id: e.deadline_ms for e in evs if isinstance(e, JobAccepted)}
    items: dict[tuple[str, str], tuple[str, str, float]] = {}  # (job, request) -> (app, status, total)
    for e in evs:
        if isinstance(e, BatchFinished):
            for it in e.items:
                if run is None or it.run == run:
                    items.setdefault((it.job_id, it.request_id), (it.app, it.status, it.total_ms))
    on_time_by_job: Counter[str] = Counter()
    total = _Acc()
    apps: defaultdict[str, _Acc] = defaultdict(_Acc)
    for (job_id, _), (app, status, ms) in items.items():
        if status == "completed":
            for acc in (total, apps[app]):
                acc.latencies.append(ms)
            if job_id in deadlines and ms <= deadlines[job_id]:
                on_time_by_job[job_id] += 1
    reasons: Counter[str] = Counter()
    for e in evs:
        if isinstance(e, JobCompleted):
            on_time = e.completed if e.deadline_met else min(e.completed, on_time_by_job[e.job_id])
            for acc in (total, apps[e.app]):
                acc.c.update(jobs=1, submitted=e.requests, accepted_requests=e.requests, completed=e.completed,
                             expired=e.expired, rejected=e.rejected, failed=e.failed, on_time=on_time)
                acc.job_latencies.append(e.latency_ms)
            for status in ("expired", "rejected", "failed"):
                if getattr(e, status):
                    reasons[status] += getattr(e, status)
        elif isinstance(e, JobRejected):
            for acc in (total, apps[e.app or "-"]):
                acc.c.update(jobs=1, submitted=e.requests, rejected=e.requests)
            reasons[e.reason] += e.requests
    span = span_s if span_s is not None else _span(evs)
    batches = [e for e in evs if isinstance(e, BatchFinished)]
    return Stats(
        span_s=span, window_s=window_s, run=run, events=len(evs), total=total.counts(span),
        apps={a: acc.counts(span) for a, acc in sorted(apps.items())},
        pools=_pools(batches, span, run), workers=_workers(batches, beats, span, run), reasons=dict(reasons),
    )


def _concerns(e: Event, run: str) -> bool:
    if isinstance(e, BatchFinished):
        return any(it.run == run for it in e.items)
    return getattr(e, "run", None) == run


def _span(evs: list[Event]) -> float:
    ts = [e.ts for e in evs if e.event not in ("worker.heartbeat", "worker.stopped")]
    if not ts:
        return 0.0
    # Under a second of load is reported as one: a rate over a few milliseconds is noise.
    return max(max(ts) - min(ts), 1000.0) / 1000.0


def _pools(batches: list[BatchFinished], span_s: float, run: str | None) -> list[PoolStats]:
    groups: dict[tuple[str, str, str], list[BatchFinished]] = defaultdict(list)
    for b in batches:
        groups[(b.pool, b.model, b.variant)].append(b)
    out = []
    for (pool, model, variant), bs in sorted(groups.items()):
        lat = [it.total_ms for b in bs for it in b.items if it.status == "completed" and (run is None or it.run == run)]
        # what the pool ran: requests a worker ended unrun past their deadlines are not its work
        n = sum(b.ran if run is None else sum(it.run == run for it in b.ran_items()) for b in bs)
        out.append(PoolStats(
            pool=pool, model=model, variant=variant, batches=len(bs), requests=n, mean_batch=n / len(bs),
            exec_p50_ms=pct([b.exec_ms for b in bs], 50), exec_p99_ms=pct([b.exec_ms for b in bs], 99),
            p50_ms=pct(lat, 50), p99_ms=pct(lat, 99),
            throughput_rps=n / span_s if span_s > 0 else 0.0,
            workers=len({b.worker for b in bs}), devices=sorted({b.device for b in bs}),
        ))
    return out


def _workers(batches: list[BatchFinished], beats: list[WorkerHeartbeat], span_s: float,
             run: str | None) -> list[WorkerStats]:
    """One row per worker that finished a batch; its slots and GPU figures from its last heartbeat."""
    last = {b.worker: b for b in beats}
    groups: dict[str, list[BatchFinished]] = defaultdict(list)
    for b in batches:
        groups[b.worker].append(b)
    out = []
    for worker, bs in sorted(groups.items()):
        # what the worker ran
        n = sum(b.ran if run is None else sum(it.run == run for it in b.ran_items()) for b in bs)
        beat = last.get(worker)
        gpu = (beat.gpu if beat is not None else None) or {}
        out.append(WorkerStats(
            worker=worker, pool=bs[0].pool, device=bs[0].device, batches=len(bs), requests=n,
            throughput_rps=n / span_s if span_s > 0 else 0.0, exec_p50_ms=pct([b.exec_ms for b in bs], 50),
            slots=beat.slots if beat else None, busy=beat.busy if beat else None,
            util_pct=gpu.get("util_pct"), power_w=gpu.get("power_w"),
        ))
    return out
