"""Faults under load, with every request counted: the machinery of ``adaserve bench chaos`` and of
the chaos tests.

A scenario is a real stack (embedded server, planner(s), CPU worker(s) as child processes), a
steady load of held-out fsdd-cnn jobs through the SDK, and one fault injected in the middle of
it. The outcome counts what the producer saw: every request submitted either got exactly one
result (completed, expired, rejected or failed) or none within the grace period after the load
stopped (``unfinished``: lost; a job counts whole until its last request ended, so
``submitted = completed + expired + rejected + failed + unfinished`` holds exactly). ``duplicated``
counts second results for a request. Two recovery
figures: ``first_result_s``, from the fault's end to the first job that ended after it, and
``backlog_s``, from the fault's end until every job submitted before it had ended; and
``worst_job_s``, the longest a job took (for a killed planner: the takeover of the jobs it held).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import redis
from pydantic import BaseModel

from adaserve.bench.cpu import memory_mb
from adaserve.broker import Keys, Settings, connect
from adaserve.models.datasets import sample_inputs
from adaserve.producers import Client, JobHandle, make_job
from adaserve.stack import Stack

MODEL = "fsdd-cnn"
# Injects the fault into a stack, may note figures of its own, and returns when it ended (time.time()).
Fault = Callable[[Stack, dict[str, float]], float]


class Outcome(BaseModel):
    scenario: str
    submitted: int
    completed: int
    expired: int
    rejected: int
    failed: int
    unfinished: int
    duplicated: int
    first_result_s: float | None
    backlog_s: float | None
    worst_job_s: float | None  # the longest any job took from submission to its last result
    # on time (every request completed within the deadline) / submitted, of the jobs submitted
    # before, during and after the fault, and how long after it the rate was back (within 0.05)
    finish_before: float | None
    finish_during: float | None
    finish_after: float | None
    recover_s: float | None
    extra: dict[str, float]  # the fault's own figures
    alive: bool
    peak_redis_mb: float
    peak_rss_mb: dict[str, float]
    seconds: float



class _Sampler(threading.Thread):
    """Peak Redis ``used_memory`` and the children's resident memory, twice a second."""

    def __init__(self, stack: Stack) -> None:
        super().__init__(daemon=True, name="chaos-sampler")
        self.stack, self.stop = stack, threading.Event()
        self.redis_mb = 0.0
        self.rss_mb: dict[str, float] = {}

    def run(self) -> None:
        r = connect(self.stack.settings)
        try:
            while not self.stop.wait(0.5):
                try:
                    self.redis_mb = max(self.redis_mb, int(r.info("memory")["used_memory"]) / 2**20)
                except redis.RedisError:
                    pass  # the fault may be the server itself
                for name, proc in list(self.stack.children):
                    rss = (memory_mb(proc.pid) or (0.0, 0.0))[0]
                    self.rss_mb[name] = max(self.rss_mb.get(name, 0.0), rss)
        finally:
            r.close()


def _stream_sizes(stack: Stack) -> dict[str, float]:
    """Entries and MB of the streams that could grow, as the run left them."""
    keys = Keys(stack.settings.namespace)
    r = connect(stack.settings)
    out: dict[str, float] = {}
    try:
        for name, key in (("jobs", keys.jobs), ("telemetry", keys.telemetry), ("dead", keys.dead),
                          ("batches", keys.batches("cpu"))):
            out[f"{name}_entries"] = float(r.xlen(key))
            out[f"{name}_mb"] = round((r.memory_usage(key) or 0) / 2**20, 2)
    finally:
        r.close()
    return out


def run(stack: Stack, name: str, fault: Fault, *, rate: float = 40.0, k: int = 4, before_s: float = 2.0,
        after_s: float = 4.0, deadline_ms: float = 10_000.0, grace_s: float = 15.0,
        tick: Callable[[float], None] | None = None) -> Outcome:
    """Load ``stack`` at ``rate`` jobs/s of ``k`` requests, call ``fault`` after ``before_s``,
    keep the load on ``after_s`` more, then wait up to ``grace_s`` for every result."""
    inputs, _ = sample_inputs(MODEL, 64, seed=7)
    handles: list[tuple[float, JobHandle]] = []
    ended: dict[str, tuple[float, bool]] = {}  # job id -> (when it ended, on time) as the producer saw it
    extra: dict[str, float] = {}
    counts = {"completed": 0, "expired": 0, "rejected": 0, "failed": 0}
    stop_load, quit_collect = threading.Event(), threading.Event()
    sampler = _Sampler(stack)
    sampler.start()
    t0 = time.time()
    with Client(stack.settings) as client:
        def load() -> None:
            i, start = 0, time.monotonic()
            while not stop_load.is_set():
                batch = [inputs[(i * k + j) % len(inputs)] for j in range(k)]
                handles.append((time.time(), client.submit(make_job(MODEL, batch, deadline_ms, app="chaos"))))
                i += 1
                wait = start + i / rate - time.monotonic()
                if wait > 0:
                    stop_load.wait(wait)
                elif wait < -1.0:  # an outage held the submission up: skip the slots it missed
                    start, i = time.monotonic(), 0

        def collect() -> None:
            while not quit_collect.is_set():
                for job in client.poll(0.2):
                    now = time.time()
                    for res in job.results:
                        counts[res.status] += 1
                    ok = all(r.status == "completed" for r in job.results)
                    ended[job.job_id] = (now, ok and now - job.submitted_ms / 1000.0 <= deadline_ms / 1000.0)

        loader = threading.Thread(target=load, daemon=True, name="chaos-load")
        collector = threading.Thread(target=collect, daemon=True, name="chaos-collect")
        loader.start()
        collector.start()
        time.sleep(before_s)
        fault_at = time.time()
        fault_end = fault(stack, extra)
        _sleep_ticking(after_s, tick)
        stop_load.set()
        loader.join()
        grace_end = time.monotonic() + grace_s
        while client.outstanding and time.monotonic() < grace_end:
            time.sleep(0.1)
        time.sleep(0.5)  # what the collector already read, filed
        quit_collect.set()
        collector.join()
        unfinished = k * sum(1 for _, h in handles if h.job_id not in ended)
        duplicated = client.duplicates + client.orphans
    sampler.stop.set()
    sampler.join(2.0)
    extra.update(_stream_sizes(stack))
    alive = all(proc.poll() is None for _, proc in stack.children)
    after = sorted(t for t, _ in ended.values() if t >= fault_end)
    before = [ended.get(h.job_id) for t, h in handles if t < fault_at]
    took = [ended[h.job_id][0] - t for t, h in handles if h.job_id in ended]
    backlog = None if not before or any(b is None for b in before) else max(b[0] for b in before if b) - fault_end
    rates = _FinishRates([(t, ended.get(h.job_id)) for t, h in handles], fault_at, fault_end)
    return Outcome(
        scenario=name, submitted=len(handles) * k, **counts, unfinished=unfinished, duplicated=duplicated,
        first_result_s=round(after[0] - fault_end, 3) if after else None,
        backlog_s=None if backlog is None else round(max(backlog, 0.0), 3),
        worst_job_s=round(max(took), 3) if took else None, **rates.figures(), extra=extra, alive=alive,
        peak_redis_mb=round(sampler.redis_mb, 1), peak_rss_mb={n: round(v, 1) for n, v in sampler.rss_mb.items()},
        seconds=round(time.time() - t0, 1))


class _FinishRates:
    def __init__(self, jobs: list[tuple[float, tuple[float, bool] | None]], fault_at: float, fault_end: float) -> None:
        self.jobs, self.fault_at, self.fault_end = jobs, fault_at, fault_end

    def rate(self, lo: float, hi: float) -> float | None:
        got = [e is not None and e[1] for t, e in self.jobs if lo <= t < hi]
        return round(sum(got) / len(got), 4) if got else None

    def figures(self) -> dict[str, float | None]:
        inf = float("inf")
        before = self.rate(-inf, self.fault_at)
        recover = None
        if before is not None:
            end = max((t for t, _ in self.jobs), default=self.fault_end)
            x = 0.0
            while self.fault_end + x < end:
                after = self.rate(self.fault_end + x, inf)
                if after is not None and after >= before - 0.05:
                    recover = x
                    break
                x += 0.5
        return {"finish_before": before, "finish_during": self.rate(self.fault_at, self.fault_end),
                "finish_after": self.rate(self.fault_end, inf), "recover_s": recover}


def _sleep_ticking(seconds: float, tick: Callable[[float], None] | None) -> None:
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(0.25, left))
        if tick is not None:
            tick(min(0.25, left))


def chaos_stack(data_dir: Path, *, fsync: str = "always", persist: bool = True, planners: int = 1,
                workers: int = 1, settings: Settings | None = None) -> Stack:
    """A stack of its own (a private embedded server), with the settings a user gets (the
    environment's, or ``settings``): the figures are those of a default deployment."""
    from adaserve.broker import load_settings

    base = settings or load_settings()
    s = load_settings(**{**base.model_dump(), "redis_url": "", "data_dir": data_dir, "namespace": "chaos"})
    os.makedirs(data_dir, exist_ok=True)
    return Stack(s, cpu_workers=workers, gpu_worker=False, worker_threads=1, planners=planners,
                 persist=persist, fsync=fsync, server_dir=data_dir / "server", log_dir=data_dir / "logs")
