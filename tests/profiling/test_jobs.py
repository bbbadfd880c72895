"""The profiler as rq jobs: JSON-serialised, run by a real (in-process) worker against the test server."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import redis
from rq import SimpleWorker
from rq.serializers import JSONSerializer

from adaserve.broker import Keys, Settings, load_settings
from adaserve.profiling.jobs import enqueue, job_progress, queue
from adaserve.profiling.measure import MeasureConfig
from adaserve.profiling.store import load, load_file

TINY = replace(MeasureConfig.tiny(), batch_sizes=(1, 2), repeats=2, quality_samples=4)


@pytest.fixture
def lm_settings(settings: Settings, lm_data_dir: Path, r: redis.Redis[bytes],
                monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    # The job reads the worker's environment, as `adaserve profiler` would.
    monkeypatch.setenv("ADASERVE_REDIS_URL", settings.redis_url)
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(lm_data_dir))
    s = load_settings(redis_url=settings.redis_url, namespace=settings.namespace, data_dir=lm_data_dir)
    yield s
    # rq's own keys are not under the namespace's prefix: remove this test's jobs and queue.
    q = queue(s, r)
    for registry in (q.finished_job_registry, q.failed_job_registry):
        for job_id in registry.get_job_ids():
            r.delete(f"rq:job:{job_id}", f"rq:results:{job_id}")
        r.delete(registry.key)
    q.delete(delete_jobs=True)


def test_jobs_are_plain_json(r: redis.Redis[bytes], lm_settings: Settings) -> None:
    (job,) = enqueue(lm_settings, [("ee-lm-xs", "depth1")], "cpu", TINY, connection=r)
    raw = r.hget(job.key, "data")
    assert raw is not None
    func, _instance, args, kwargs = json.loads(zlib.decompress(raw))  # JSON, not a pickle
    assert func == "adaserve.profiling.jobs.profile_job" and args == []
    assert kwargs["config"]["batch_sizes"] == [1, 2] and kwargs["namespace"] == lm_settings.namespace
    assert job_progress(job)["stage"] == "queued"
    assert job.origin == Keys(lm_settings.namespace).rq_queue
    queue(lm_settings, r).empty()


def test_worker_runs_jobs_and_merges_profiles(r: redis.Redis[bytes], lm_settings: Settings) -> None:
    jobs = enqueue(lm_settings, [("ee-lm-xs", "depth1"), ("ee-lm-xs", "depth2")], "cpu", TINY, connection=r)
    worker = SimpleWorker([queue(lm_settings, r)], connection=r, serializer=JSONSerializer)
    assert worker.work(burst=True)
    for job in jobs:
        job.refresh()
        assert job.get_status().value == "finished", job.latest_result()
        summary = job.return_value()
        assert summary["latency_points"] == 2 and summary["quality"][0]["metric"] == "perplexity"
        assert job_progress(job)["stage"] == "done"
    stored = load(r, Keys(lm_settings.namespace), "ee-lm-xs")
    assert stored is not None
    assert {q.variant for q in stored.quality} == {"depth1", "depth2"}
    assert sorted((p.variant, p.batch_size) for p in stored.latency) == [
        ("depth1", 1), ("depth1", 2), ("depth2", 1), ("depth2", 2)]
    assert load_file(lm_settings.data_dir, "ee-lm-xs") == stored


def test_a_failing_job_is_reported_not_lost(r: redis.Redis[bytes], lm_settings: Settings) -> None:
    (job,) = enqueue(lm_settings, [("ee-lm-xs", "depth9")], "cpu", TINY, connection=r)
    SimpleWorker([queue(lm_settings, r)], connection=r, serializer=JSONSerializer).work(burst=True)
    job.refresh()
    assert job.get_status().value == "failed"
    assert "depth9" in (job.latest_result().exc_string or "")
    assert load(r, Keys(lm_settings.namespace), "ee-lm-xs") is None


def test_a_worker_that_raises_on_a_lost_broker_is_replaced_not_fatal(
        settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    # rq's teardown writes the worker's death to the server; with the server gone it raises out of
    # ``work``, which once ended `adaserve profiler` (exit code 2) on a broker restart.
    from adaserve.profiling import jobs

    calls = []

    def work(self: jobs._Told, **kwargs: object) -> bool:
        calls.append(kwargs)
        if len(calls) == 1:
            raise redis.ConnectionError("Error 111 connecting: Connection refused.")
        self.told_to_stop = True
        return False

    monkeypatch.setattr(jobs._Told, "work", work)
    assert jobs.run_worker(settings, fork=False) is False
    assert len(calls) == 2


def test_the_profiler_outlives_a_broker_restart(tmp_path: Path) -> None:
    """`adaserve profiler` as a real process: its server SIGKILLed and restarted from its AOF, it is
    still up afterwards and registered as an rq worker again, and SIGTERM ends it cleanly."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from rq import Worker

    from adaserve.embedded import EmbeddedServer

    server = EmbeddedServer(tmp_path / "server", fsync="always").start()
    env = {**os.environ, "ADASERVE_REDIS_URL": server.url, "ADASERVE_NAMESPACE": "prof",
           "ADASERVE_DATA_DIR": str(tmp_path)}
    log = open(tmp_path / "profiler.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "adaserve", "profiler"], env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    r = redis.Redis.from_url(server.url)

    def registered(timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if Worker.all(connection=r):
                    return True
            except redis.ConnectionError:
                pass
            time.sleep(0.2)
        return False

    try:
        assert registered(60), (tmp_path / "profiler.log").read_text()
        server.kill()
        time.sleep(2.0)
        server.start()
        time.sleep(3.0)
        assert proc.poll() is None, (tmp_path / "profiler.log").read_text()
        assert registered(30), (tmp_path / "profiler.log").read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        r.close()
        server.stop()
        log.close()
