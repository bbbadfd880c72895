"""Profiling as background rq jobs: one job per (model, variant, device), JSON-serialised (no pickle).

``enqueue`` puts jobs on the namespace's rq queue (``Keys.rq_queue``); ``adaserve profiler`` runs
``run_worker``; each job calls ``profile_job``, which measures, merges the result into the model's
profile in Redis and writes the JSON file in the worker's data directory. Progress is kept in the
job's ``meta["progress"]`` as ``{"done", "total", "stage"}`` for ``adaserve profile --wait``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from typing import Any

import redis
from rq import Queue, SimpleWorker, Worker
from rq.job import Job
from rq.serializers import JSONSerializer

from adaserve.broker.connection import connect
from adaserve.broker.keys import Keys
from adaserve.broker.outage import Outage, ride_out
from adaserve.broker.settings import Settings
from adaserve.profiling.measure import MeasureConfig
from adaserve.profiling.store import merge_into_redis, save_file

log = logging.getLogger(__name__)
JOB_FUNC = "adaserve.profiling.jobs.profile_job"
JOB_TIMEOUT_S = 1800
# rq blocks on the queue for up to its worker TTL: the socket must outlive that wait.
WORKER_TTL_S = 420
_BLOCKING_MS = (WORKER_TTL_S + 60) * 1000


def rq_connection(settings: Settings) -> redis.Redis[bytes]:
    return connect(settings, block_ms=_BLOCKING_MS)


def queue(settings: Settings, connection: redis.Redis[bytes] | None = None) -> Queue:
    conn = connection or rq_connection(settings)
    return Queue(Keys(settings.namespace).rq_queue, connection=conn, serializer=JSONSerializer)


def enqueue(settings: Settings, targets: list[tuple[str, str]], device: str, cfg: MeasureConfig,
            connection: redis.Redis[bytes] | None = None) -> list[Job]:
    """One job per (model, variant) on ``device``; arguments are plain JSON values."""
    q = queue(settings, connection)
    jobs = []
    for model, variant in targets:
        kwargs = {"model": model, "variant": variant, "device": device,
                  "namespace": settings.namespace, "config": _config_json(cfg)}
        jobs.append(q.enqueue(JOB_FUNC, kwargs=kwargs, job_timeout=JOB_TIMEOUT_S, result_ttl=86400,
                              description=f"profile {model}/{variant} on {device}",
                              meta={"progress": {"done": 0, "total": 1, "stage": "queued"}}))
    return jobs


def _config_json(cfg: MeasureConfig) -> dict[str, Any]:
    d = asdict(cfg)
    d["batch_sizes"] = list(cfg.batch_sizes)
    return d


def _config_from(d: dict[str, Any]) -> MeasureConfig:
    return MeasureConfig(**{**d, "batch_sizes": tuple(int(b) for b in d["batch_sizes"])})


def profile_job(model: str, variant: str, device: str, namespace: str,
                config: dict[str, Any]) -> dict[str, Any]:
    """The rq job: measure, merge into Redis, write the file; returns a JSON summary."""
    from rq import get_current_job

    from adaserve.broker.settings import load_settings
    from adaserve.profiling.run import measure_model_variant

    job = get_current_job()
    settings = load_settings(namespace=namespace)

    def progress(done: int, total: int, stage: str) -> None:
        if job is not None:
            job.meta["progress"] = {"done": done, "total": total, "stage": stage}
            job.save_meta()

    new = measure_model_variant(model, variant, device, settings.data_dir, _config_from(config), progress)
    conn = job.connection if job is not None else rq_connection(settings)
    merged = merge_into_redis(conn, Keys(namespace), new)
    path = save_file(settings.data_dir, merged)
    return {"model": model, "variant": variant, "device": device, "file": str(path),
            "latency_points": len(new.latency), "quality": [q.model_dump() for q in new.quality]}


class _Told(Worker):
    """rq's worker, remembering whether a signal asked it to stop (rq's own flag is set only when
    the signal came during a job)."""

    told_to_stop = False

    def request_stop(self, signum: int, frame: Any) -> None:
        self.told_to_stop = True
        super().request_stop(signum, frame)


class _ToldSimple(SimpleWorker, _Told):
    pass


def run_worker(settings: Settings, *, burst: bool = False, fork: bool = True) -> bool:
    """Serve profiling jobs until stopped (or, with ``burst``, until the queue is empty).

    rq's worker waits out a broker that is down while it blocks on its queue, but quits on an
    error anywhere else in its loop (its heartbeat, its maintenance), and raises one met in its
    registration or its teardown (which writes its death to the server it just lost); such a quit
    that no signal asked for is an outage to wait out here, after which a new rq worker takes over."""
    conn = rq_connection(settings)
    outage = Outage("profiler", max_s=settings.max_outage_s, logger=log)
    cls = _Told if fork else _ToldSimple
    served = False
    while True:
        worker = cls([queue(settings, conn)], connection=conn, serializer=JSONSerializer,
                     worker_ttl=WORKER_TTL_S)
        try:
            served = bool(worker.work(burst=burst, logging_level="INFO")) or served
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            log.warning("the rq worker lost the broker (%s)", exc)
        if burst or worker.told_to_stop:  # asked to stop (SIGINT/SIGTERM), or the queue is done
            return served
        log.warning("the rq worker quit without being asked to; waiting for the broker, then serving again")
        time.sleep(1.0)  # an rq worker that quits at once for another reason is not restarted in a spin
        ride_out(conn.ping, outage)


def job_progress(job: Job) -> dict[str, Any]:
    meta = job.get_meta(refresh=True)
    return dict(meta.get("progress") or {"done": 0, "total": 1, "stage": "queued"})
