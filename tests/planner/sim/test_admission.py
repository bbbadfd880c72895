"""The pipeline simulator refuses the jobs the live planner refuses: the same admission control
(``overload.for_planner``), on the same queue. A real server and planner serve a burst of jobs
that outgrows the drain rate the planner remembers; the simulator, calibrated from that planner's
telemetry and remembering the same, replays the burst."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import msgpack
import numpy as np
import pytest
import redis

from adaserve.broker import (
    Batch,
    Ending,
    Finalizer,
    Job,
    Keys,
    Request,
    Result,
    Settings,
    Slo,
    Tensor,
    Timings,
    decode,
    encode,
    streams,
)
from adaserve.broker.events import BatchFinished, RequestTiming, WorkerHeartbeat
from adaserve.broker.replies import read_reply
from adaserve.planner.config import PlannerConfig, default_factory
from adaserve.planner.overload import Overload, for_planner
from adaserve.planner.service import Planner
from adaserve.planner.sim.calibrate import calibrate
from adaserve.planner.sim.pipeline import simulate_pipeline
from adaserve.telemetry import TelemetryReader

JOBS, PER_JOB, DEADLINE_MS, DRAIN_RPS, MAX_BATCH = 60, 4, 1000.0, 100, 8


class _Worker(threading.Thread):
    """Heartbeats for model ``m`` and completes every batch at once."""

    def __init__(self, settings: Settings, r: redis.Redis[bytes]) -> None:
        super().__init__(daemon=True)
        self.r, self.k, self.fin = r, Keys(settings.namespace), Finalizer(r, settings)
        self.stop = threading.Event()

    def beat(self) -> None:
        hb = WorkerHeartbeat(ts=time.time() * 1000, worker="w", pool="cpu", slots=2, models=["m"],
                             inputs={"m": {"x": {"shape": [2], "dtype": "float32"}}})
        raw = msgpack.packb(hb.model_dump())
        self.r.hset(self.k.workers, "w", raw)
        self.r.xadd(self.k.telemetry, {b"m": raw})

    def run(self) -> None:
        stream = self.k.batches("cpu")
        streams.ensure_group(self.r, stream, "cpu")
        last = 0.0
        while not self.stop.is_set():
            if time.time() - last > 0.2:
                self.beat()
                last = time.time()
            for e in streams.read_group(self.r, [stream], "cpu", "w", count=1, block_ms=20):
                b = decode(e.raw, expect=Batch)
                now = time.time() * 1000
                ends = [Ending(Result(job_id=i.job_id, request_id=i.request_id, status="completed", prediction=0,
                                      timings=Timings(submitted_ms=i.submitted_ms, finished_ms=now,
                                                      total_ms=now - i.submitted_ms)), i.reply_to) for i in b.items]
                items = [RequestTiming(job_id=i.job_id, request_id=i.request_id, app=i.app, status="completed",
                                       queue_ms=0.0, exec_ms=0.5, total_ms=now - i.submitted_ms) for i in b.items]
                ev = BatchFinished(ts=now, batch_id=b.id, pool="cpu", worker="w", model=b.model, size=len(b.items),
                                   exec_ms=0.5, items=items)
                self.fin.end(ends, ack=(stream, "cpu", e.id), event=encode(ev))


@pytest.fixture
def worker(settings: Settings, r: redis.Redis[bytes]) -> Iterator[_Worker]:
    w = _Worker(settings, r)
    w.beat()
    w.start()
    yield w
    w.stop.set()
    w.join(5)


def _remember(o: Overload, seconds: list[int]) -> None:
    for sec in seconds:
        o.finished_in_second("m", DRAIN_RPS, sec)


def test_the_simulator_refuses_the_jobs_the_live_planner_refuses(
    worker: _Worker, settings: Settings, r: redis.Redis[bytes],
) -> None:
    k = Keys(settings.namespace)
    # The burst is in the stream before the planner starts: it is read, and checked, in one go.
    for j in range(JOBS):
        reqs = [Request(id=f"r{i}", inputs={"x": Tensor.from_numpy(np.zeros(2, np.float32))}) for i in range(PER_JOB)]
        streams.publish(r, k.jobs, encode(Job(id=f"j{j:03d}", model="m", requests=reqs,
                                              slo=Slo(deadline_ms=DEADLINE_MS), reply_to="client")))
    memory = [int(time.time()) - s for s in range(5, 0, -1)]  # 100 requests finished in each of 5 seconds
    planner = Planner(settings, PlannerConfig(max_batch=MAX_BATCH))
    _remember(planner.overload, memory)
    stop = threading.Event()
    t = threading.Thread(target=planner.run, args=(stop,), daemon=True)
    t.start()
    results: list[Result] = []
    last, end = "0", time.time() + 15
    try:
        while len(results) < JOBS * PER_JOB and time.time() < end:
            for e in streams.read(r, {k.reply("client"): last}, block_ms=100):
                last = e.id
                results += read_reply(e.raw)
    finally:
        stop.set()
        t.join(5)
    assert len(results) == JOBS * PER_JOB
    live = sorted({x.job_id for x in results if x.status == "rejected" and (x.reason or "").startswith("overloaded")})
    # A queue of 32 (4 batches) drains by itself; past it, (queued + 4) / 100 per s is the wait.
    # Refused jobs leave the queue as it was, so a job that landed a few ms after the one before
    # (more time left) can still be admitted: not always a tail of the burst.
    assert 0 < len(live) < JOBS - 32 // PER_JOB

    cal = calibrate([x.event for x in TelemetryReader(r, settings).history()], "m")
    assert len(cal.ingress_ms) == len(cal.submitted_run_ms) == JOBS  # every job measured, refused ones too
    cal = cal.model_copy(update={"drained": [(s, DRAIN_RPS) for s in memory], "drained_spans": []})
    cfg = PlannerConfig(max_batch=MAX_BATCH)
    sim = simulate_pipeline(default_factory("edf", max_batch=MAX_BATCH)("m", None),
                            np.asarray(cal.submitted_run_ms) / 1e3, PER_JOB, DEADLINE_MS / 1e3, cal,
                            max_batch=MAX_BATCH, model="m",
                            overload=for_planner(max_queue=cfg.max_queue, admission=cfg.admission, max_batch=MAX_BATCH))
    refused = np.unpackbits(np.frombuffer(sim.rejected_bits, np.uint8))[:sim.requests].reshape(JOBS, PER_JOB)
    assert refused.all(axis=1).sum() == refused.any(axis=1).sum()  # whole jobs
    assert [f"j{j:03d}" for j in np.flatnonzero(refused.all(axis=1))] == live  # the very same jobs
    assert sim.rejected == len(live) * PER_JOB
    assert sim.met + sim.late + sim.expired + sim.rejected == sim.requests

    # Without the admission control the same replay refuses nothing: the check above can fail.
    bare = simulate_pipeline(default_factory("edf", max_batch=MAX_BATCH)("m", None),
                             np.asarray(cal.submitted_run_ms) / 1e3, PER_JOB, DEADLINE_MS / 1e3, cal,
                             max_batch=MAX_BATCH, model="m")
    assert bare.rejected == 0


def test_for_planner_is_what_the_planner_builds() -> None:
    o = for_planner(max_queue=7, admission=False, max_batch=16)
    assert (o.max_queue, o.deadline_aware, o.min_queue) == (7, False, 64)


def test_check_is_verdict_on_the_jobs_own_clock() -> None:
    o = for_planner(max_queue=0, admission=True, max_batch=8)
    _remember(o, [10, 11])
    # 40 queued + 4 at 100/s: 440 ms, against 1,000 - (12,600 - 12,000) = 400 ms left
    assert o.check("m", 40, 4, 12_000.0, 1000.0, 12_600.0) == o.verdict("m", 40, 4, 0.4, 12.6) is not None
    assert o.check("m", 40, 4, 12_000.0, 1000.0, 12_500.0) is None  # 500 ms left
