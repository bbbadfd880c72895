"""How many jobs per second one producer gets into the ingress stream (``adaserve bench broker``).

What is timed is ``Client.submit_many``: the SDK's validation against the limits, encoding, and
pipelined XADDs, one round trip per chunk. Building the jobs from numpy arrays is timed apart.
"""

from __future__ import annotations

import time

import numpy as np
from pydantic import BaseModel

from adaserve.broker.codec import encode
from adaserve.broker.connection import connect
from adaserve.broker.keys import Keys
from adaserve.broker.settings import Settings
from adaserve.producers.client import Client
from adaserve.producers.jobs import make_job


class IngestFigures(BaseModel):
    jobs: int
    chunk: int
    tensor_shape: tuple[int, ...]
    message_bytes: int
    jobs_per_s: float
    build_jobs_per_s: float
    seconds: float


def measure_ingest(
    settings: Settings, *, jobs: int = 5000, chunk: int = 256, shape: tuple[int, ...] = (40, 32),
    model: str = "bench", cleanup: bool = True,
) -> IngestFigures:
    """XADD ``jobs`` one-request jobs (float32 tensor of ``shape``) into the namespace's ingress
    stream. Use a scratch namespace: with ``cleanup`` the ingress stream is deleted afterwards."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    t0 = time.perf_counter()
    batch = [make_job(model, [x], 1000.0) for _ in range(jobs)]
    built = time.perf_counter() - t0
    with Client(settings, chunk=chunk) as client:
        t1 = time.perf_counter()
        client.submit_many(batch)
        took = time.perf_counter() - t1
    if cleanup:
        r = connect(settings)
        r.delete(Keys(settings.namespace).jobs)
        r.close()
    return IngestFigures(
        jobs=jobs, chunk=chunk, tensor_shape=shape, message_bytes=len(encode(batch[0])),
        jobs_per_s=jobs / took if took > 0 else 0.0,
        build_jobs_per_s=jobs / built if built > 0 else 0.0, seconds=took,
    )
