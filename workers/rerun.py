"""The rq job of ORLOJ's online profiler: run one finished request alone and record its time.

The planner enqueues it by name (``planner.orloj.online.RERUN_FUNC``) and reads the times back;
it lives on the worker side because it loads a model runtime, which the planner never does. Runs
on a profiling worker (``rq worker`` on the profile queue, JSON serializer). The request's
inputs come from its batch, still in the pool's batch stream (the planner samples only batches
whose worker kept them: ``workers/publish.py: Keep``): stream ids are arrival times, so
only the minute before the batch finished is scanned. The model runtime is imported inside the
job, never at import time of this module.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import cast

import numpy as np
import redis

from adaserve.broker.codec import decode
from adaserve.broker.errors import InvalidMessage
from adaserve.broker.keys import ORLOJ_SAMPLES_CAP, Keys
from adaserve.broker.messages import Batch, BatchItem
from adaserve.workers.generate import pack, prompt_of
from adaserve.workers.runtime.base import GenerativeRunner, Runner
from adaserve.workers.wire import AnyItem

__all__ = ["find_item", "inputs_alone", "record", "rerun", "time_alone"]

WINDOW_MS = 60_000
SKEW_MS = 5_000  # the event's clock (the worker's) may run behind the server's


def find_item(r: redis.Redis[bytes], namespace: str, pool: str, batch_id: str, request_id: str,
              finished_ms: float) -> BatchItem | None:
    """The batch item of ``request_id`` in ``batch_id``, if the batch is still in its stream."""
    stream = Keys(namespace).batches(pool)
    lo = max(int(finished_ms) - WINDOW_MS, 0)
    for _, fields in r.xrange(stream, min=str(lo), max=str(int(finished_ms) + SKEW_MS)):
        raw = fields.get(b"m")
        if raw is None:
            continue
        try:
            batch = decode(raw, expect=Batch)
        except InvalidMessage:
            continue
        if batch.id == batch_id:
            return next((it for it in batch.items if it.request_id == request_id), None)
    return None


def time_alone(runner: Runner, item: AnyItem) -> float:
    """Seconds ``item`` takes run alone on ``runner`` (an early-exit runner's own per-request time
    when it reports one). ``InputError`` when a prompt cannot run."""
    inputs = inputs_alone(item, runner)
    start = time.perf_counter()
    out = runner.run(inputs)
    seconds = time.perf_counter() - start
    if out.request_exec_s is not None and len(out.request_exec_s) == 1:
        seconds = float(out.request_exec_s[0])
    return seconds


def inputs_alone(item: AnyItem, runner: Runner) -> dict[str, np.ndarray]:
    """The runner's inputs for ``item`` as a batch of one. A generation request runs with its own
    settings: its time is its ``max_new_tokens`` steps, and the runner's default length would
    give every application of a language model the same time."""
    if isinstance(runner, GenerativeRunner):
        return pack([prompt_of(cast(BatchItem, item), runner)], runner.pad_id)
    return {name: t.to_numpy()[None, ...] for name, t in item.inputs.items()}


def record(r: redis.Redis[bytes], namespace: str, model: str, app: str, seconds: float) -> None:
    key = Keys(namespace).orloj_samples(model)
    with r.pipeline(transaction=False) as p:
        p.rpush(key, json.dumps({"app": app, "exec_s": seconds, "at": time.time()}))
        p.ltrim(key, -ORLOJ_SAMPLES_CAP, -1)
        p.execute()


def rerun(*, namespace: str, data_dir: str, model: str, variant: str, device: str, pool: str, batch_id: str,
          request_id: str, job_id: str, app: str, finished_ms: float) -> float | None:
    """Time the request alone on this worker's device; ``None`` when its batch is gone."""
    from rq import get_current_job

    from adaserve.workers.runtime import load_runner

    job = get_current_job()
    if job is None:
        raise RuntimeError("rerun runs inside an rq job")
    r = job.connection
    item = find_item(r, namespace, pool, batch_id, request_id, finished_ms)
    if item is None:
        return None
    runner = load_runner(model, variant, device, Path(data_dir))
    time_alone(runner, item)  # warm: the first call may compile or allocate
    seconds = time_alone(runner, item)
    record(r, namespace, model, app, seconds)
    return seconds
