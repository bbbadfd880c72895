"""What ``adaserve top`` shows, from the last N seconds of telemetry (pure: entries in, a model out).

Entries are ``(ms, event)`` pairs, ``ms`` being the stream entry's id time (the server's clock,
the same clock as ``now_ms``), so a window is cut consistently whoever stamped the event.

No event carries the planner's queue, so *queued* is derived from ids: the requests of jobs
accepted in the window that have not ended (no ``batch.finished`` item, not expired, job not
completed), less those running (``batch.dispatched`` in the window whose ``batch.finished`` has
not come). That is accepted − dispatched − ended without dispatch, per job and per batch rather
than as window totals, so that a queue that stays the same size does not read as empty. A
request that waits longer than the window is missed; requests forwarded between the two parts
of a split model wait in the second pool's stream and count as queued.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Iterable

from pydantic import BaseModel

from adaserve.broker.events import (
    BatchDispatched,
    BatchFinished,
    Event,
    JobAccepted,
    JobCompleted,
    JobExpired,
    WorkerHeartbeat,
    WorkerStopped,
)
from adaserve.telemetry.stats import pct

QUIET = ("worker.heartbeat", "worker.stopped")  # what a worker says while no load runs


class ModelRow(BaseModel):
    model: str
    queued: int
    running: int
    arrival_rps: float
    done_rps: float
    ended: int
    on_time: int
    slo_violations: int
    finish_rate: float | None
    p50_ms: float | None
    p99_ms: float | None
    variants: dict[str, int]
    exits: dict[str, int]
    placements: dict[str, int]


class PoolRow(BaseModel):
    pool: str
    workers: int
    slots: int
    busy: int
    batches_per_s: float
    rps: float
    mean_batch: float | None
    exec_p50_ms: float | None


class WorkerRow(BaseModel):
    worker: str
    pool: str
    device: str
    slots: int
    busy: int
    batches_per_s: float
    rps: float
    util_pct: float | None
    power_w: float | None
    seen_s: float | None  # seconds since its last heartbeat


class Dashboard(BaseModel):
    now_ms: int
    window_s: float
    span_s: float  # the part of the window rates are over: from the first load event, at most the window
    events: int
    models: list[ModelRow]
    pools: list[PoolRow]
    workers: list[WorkerRow]


class Window:
    """The last ``window_s`` seconds of entries, oldest first."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._entries: deque[tuple[int, Event]] = deque()

    def add(self, ms: int, ev: Event) -> None:
        self._entries.append((ms, ev))

    def view(self, now_ms: int) -> Dashboard:
        cut = now_ms - self.window_s * 1000
        while self._entries and self._entries[0][0] < cut:
            self._entries.popleft()
        return dashboard(self._entries, now_ms, self.window_s)


class _Model:
    def __init__(self) -> None:
        self.accepted = 0
        self.done = 0
        self.ended = self.on_time = 0
        self.latencies: list[float] = []
        self.variants, self.exits, self.placements = Counter[str](), Counter[str](), Counter[str]()


def dashboard(entries: Iterable[tuple[int, Event]], now_ms: int, window_s: float) -> Dashboard:
    """Per model, per pool and per worker rows of the entries with ``ms`` in the window."""
    cut = now_ms - window_s * 1000
    evs = [(ms, ev) for ms, ev in entries if cut <= ms <= now_ms]
    load = [ms for ms, ev in evs if ev.event not in QUIET]
    span_s = max((now_ms - min(load)) / 1000.0, 1.0) if load else window_s
    span_s = min(span_s, window_s)

    models: defaultdict[str, _Model] = defaultdict(_Model)
    job_model: dict[str, str] = {}
    open_requests: dict[str, int] = {}  # accepted in the window, not ended yet
    deadlines: dict[str, float] = {}
    dispatched: dict[str, tuple[str, int]] = {}  # batch -> (model, size), until it finishes
    finished_ms: defaultdict[str, list[float]] = defaultdict(list)  # job -> completed requests' total_ms
    beats: dict[str, WorkerHeartbeat] = {}
    beat_ms: dict[str, int] = {}
    stopped: set[str] = set()
    by_worker: defaultdict[str, list[BatchFinished]] = defaultdict(list)
    by_pool: defaultdict[str, list[BatchFinished]] = defaultdict(list)

    for ms, ev in evs:
        if isinstance(ev, JobAccepted):
            job_model[ev.job_id] = ev.model
            open_requests[ev.job_id] = ev.requests
            deadlines[ev.job_id] = ev.deadline_ms
            models[ev.model].accepted += ev.requests
        elif isinstance(ev, BatchDispatched):
            dispatched[ev.batch_id] = (ev.model, ev.size)
        elif isinstance(ev, BatchFinished):
            _finished(ev, models[ev.model], open_requests, finished_ms)
            dispatched.pop(ev.batch_id, None)
            by_worker[ev.worker].append(ev)
            by_pool[ev.pool].append(ev)
        elif isinstance(ev, JobExpired):
            if ev.job_id in open_requests:
                open_requests[ev.job_id] = max(0, open_requests[ev.job_id] - len(ev.request_ids))
        elif isinstance(ev, JobCompleted):
            model = ev.model or job_model.get(ev.job_id, "")
            open_requests.pop(ev.job_id, None)
            on_time = ev.completed if ev.deadline_met else sum(
                ms_ <= deadlines.get(ev.job_id, float("inf")) for ms_ in finished_ms.get(ev.job_id, ()))
            m = models[model]
            m.ended += ev.requests
            m.on_time += min(on_time, ev.completed)
        elif isinstance(ev, WorkerHeartbeat):
            beats[ev.worker], beat_ms[ev.worker] = ev, ms
            stopped.discard(ev.worker)
        elif isinstance(ev, WorkerStopped):
            stopped.add(ev.worker)

    outstanding: Counter[str] = Counter()
    for job, n in open_requests.items():
        outstanding[job_model[job]] += n
    running: Counter[str] = Counter()
    for model, size in dispatched.values():
        running[model] += size

    rows = []
    for name in sorted(models):
        m = models[name]
        rows.append(ModelRow(
            model=name or "-", queued=max(0, outstanding[name] - running[name]), running=running[name],
            arrival_rps=m.accepted / span_s, done_rps=m.done / span_s, ended=m.ended, on_time=m.on_time,
            slo_violations=m.ended - m.on_time, finish_rate=m.on_time / m.ended if m.ended else None,
            p50_ms=pct(m.latencies, 50), p99_ms=pct(m.latencies, 99),
            variants=dict(m.variants.most_common()), exits=dict(m.exits.most_common()),
            placements=dict(m.placements.most_common()),
        ))
    live = {w: b for w, b in beats.items() if w not in stopped}
    workers = [_worker(w, live.get(w), beat_ms.get(w), by_worker.get(w, []), now_ms, span_s)
               for w in sorted(set(live) | set(by_worker))]
    pools = [_pool(p, [w for w in workers if w.pool == p], by_pool.get(p, []), span_s)
             for p in sorted({w.pool for w in workers} | set(by_pool))]
    return Dashboard(now_ms=now_ms, window_s=window_s, span_s=span_s, events=len(evs),
                     models=rows, pools=pools, workers=workers)


def _finished(ev: BatchFinished, m: _Model, open_requests: dict[str, int],
              finished_ms: defaultdict[str, list[float]]) -> None:
    for it in ev.items:
        if it.job_id in open_requests:
            open_requests[it.job_id] = max(0, open_requests[it.job_id] - 1)
        if it.status != "completed":
            continue
        m.done += 1
        m.latencies.append(it.total_ms)
        finished_ms[it.job_id].append(it.total_ms)
        m.variants[ev.variant] += 1
        m.placements[ev.pool if ev.part is None else f"{ev.pool} (part {ev.part})"] += 1
        if it.exit is not None:
            m.exits[str(it.exit)] += 1
    if ev.forwarded and ev.next_pool:
        m.placements[f"{ev.pool}>{ev.next_pool}"] += ev.forwarded


def _worker(name: str, beat: WorkerHeartbeat | None, ms: int | None, batches: list[BatchFinished],
            now_ms: int, span_s: float) -> WorkerRow:
    first = batches[0] if batches else None
    gpu = (beat.gpu if beat is not None else None) or {}
    return WorkerRow(
        worker=name, pool=beat.pool if beat else first.pool if first else "-",
        device=beat.device if beat else first.device if first else "-",
        slots=beat.slots if beat else 0, busy=beat.busy if beat else 0,
        batches_per_s=len(batches) / span_s, rps=sum(b.size for b in batches) / span_s,
        util_pct=gpu.get("util_pct"), power_w=gpu.get("power_w"),
        seen_s=(now_ms - ms) / 1000.0 if ms is not None else None,
    )


def _pool(name: str, workers: list[WorkerRow], batches: list[BatchFinished], span_s: float) -> PoolRow:
    n = sum(b.size for b in batches)
    return PoolRow(
        pool=name, workers=sum(w.seen_s is not None for w in workers), slots=sum(w.slots for w in workers),
        busy=sum(w.busy for w in workers), batches_per_s=len(batches) / span_s, rps=n / span_s,
        mean_batch=n / len(batches) if batches else None, exec_p50_ms=pct([b.exec_ms for b in batches], 50),
    )
