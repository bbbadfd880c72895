"""ORLOJ's long-term feedback (Sec. 3.2): sample finished requests, re-run them alone on rq.

A request's time inside a batch is not its time alone, which is what the distributions need, so
a sample of finished requests is re-run one at a time off the critical path: ``sample_finished``
follows ``batch.finished`` events and picks requests at random, ``enqueue_reruns`` turns each
into an rq job (JSON serializer) that the profiling worker runs (``adaserve.workers.rerun``), and the
job appends the measured time to a per-model list that the planner drains (``drain_samples``)
into ``OrlojScheduler.add_sample``.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass

import redis

from adaserve.broker.events import BatchFinished
from adaserve.broker.keys import Keys
from adaserve.broker.settings import Settings
from adaserve.broker.streams import Entry, events, last_id, read

__all__ = ["Rerun", "enqueue_reruns", "latest_id", "read_samples", "sample_entries", "sample_finished", "samples_key"]

# By name: the job loads a model runtime, so it lives on the worker side (workers/rerun.py).
RERUN_FUNC = "adaserve.workers.rerun.rerun"


def samples_key(namespace: str, model: str) -> str:
    """Redis list of measured times alone for ``model`` (JSON ``{"app", "exec_s", "at"}`` items,
    ``at`` the wall-clock seconds of the measurement)."""
    return Keys(namespace).orloj_samples(model)


@dataclass(frozen=True)
class Rerun:
    """One finished request to run again alone: where its batch is and what served it."""

    model: str
    variant: str
    device: str
    pool: str
    batch_id: str
    request_id: str
    job_id: str
    app: str
    finished_ms: float


def sample_entries(entries: list[Entry], rate: float, rng: random.Random) -> list[Rerun]:
    """The completed requests of the ``batch.finished`` events in ``entries``, each kept with
    ``rate``; only of batches still in their stream (``kept``), since a re-run reads its inputs there."""
    picked: list[Rerun] = []
    for _, ev in events(entries):
        if isinstance(ev, BatchFinished) and ev.kept:
            for item in ev.items:
                if item.status == "completed" and rng.random() < rate:
                    picked.append(Rerun(ev.model, ev.variant, ev.device, ev.pool, ev.batch_id, item.request_id,
                                        item.job_id, item.app, ev.ts))
    return picked


def latest_id(r: redis.Redis[bytes], settings: Settings) -> str:
    """The id of the newest telemetry entry (``0-0`` for an empty stream): a cursor meaning "from now"."""
    return last_id(r, Keys(settings.namespace).telemetry)


def sample_finished(r: redis.Redis[bytes], settings: Settings, *, cursor: str = "$", rate: float = 0.05,
                    count: int = 512, block_ms: int | None = None,
                    rng: random.Random | None = None) -> tuple[str, list[Rerun]]:
    """Read telemetry after ``cursor``; return the new cursor and the sampled requests."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError("rate must be in [0, 1]")
    if cursor == "$":  # start from now: later calls pass the id returned here
        cursor = latest_id(r, settings)
    entries = read(r, {Keys(settings.namespace).telemetry: cursor}, count=count, block_ms=block_ms)
    if entries:
        cursor = entries[-1].id
    return cursor, sample_entries(entries, rate, rng or random.Random())


def enqueue_reruns(r: redis.Redis[bytes], settings: Settings, reruns: list[Rerun]) -> list[str]:
    """One rq job per sampled request on the profiling queue; returns the job ids."""
    from rq import Queue
    from rq.serializers import JSONSerializer

    if not reruns:
        return []
    queue = Queue(Keys(settings.namespace).rq_queue, connection=r, serializer=JSONSerializer)
    datas = [Queue.prepare_data(RERUN_FUNC, kwargs={"namespace": settings.namespace, "data_dir": str(settings.data_dir),
                                                    **asdict(rr)}, result_ttl=600, failure_ttl=3600) for rr in reruns]
    # One round trip for all of them: this runs on the planner's loop.
    return [job.id for job in queue.enqueue_many(datas)]


def read_samples(r: redis.Redis[bytes], settings: Settings, model: str, *, after: bytes | None = None,
                 limit: int = 1000) -> tuple[list[tuple[str, float]], bytes | None]:
    """The measured ``(app, seconds)`` pairs for ``model`` appended after the entry ``after`` (the
    newest one a previous read returned; None, or gone from the newest ``limit``: all of those),
    oldest first; and the newest entry now, to pass as ``after`` next time. The list is left as it
    is: a restarted planner starts from the newest samples instead of an empty list, and several
    planners each learn from all of them. Writers append and trim it (``ORLOJ_SAMPLES_CAP``), so
    an entry is found by its bytes, which carry the time it was measured: workers' clocks need not
    agree."""
    raw = r.lrange(samples_key(settings.namespace, model), -limit, -1)
    start = 0
    if after is not None:
        for i in range(len(raw) - 1, -1, -1):
            if raw[i] == after:
                start = i + 1
                break
    out: list[tuple[str, float]] = []
    for item in raw[start:]:
        try:
            d = json.loads(item)
            out.append((str(d["app"]), float(d["exec_s"])))
        except (ValueError, KeyError, TypeError):
            continue
    return out, (raw[-1] if raw else after)
