"""The exporter against the real server: a real planner and worker serve traffic, and the metrics
are read by an HTTP scrape parsed with prometheus-client's own parser."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from adaserve.broker import Job, Keys, Request, Result, Settings, Slo, Tensor, encode, streams
from adaserve.broker.events import JobCompleted, PlannerState, WorkerHeartbeat
from adaserve.broker.replies import read_reply
from adaserve.planner.config import PlannerConfig
from adaserve.planner.service import Planner
from adaserve.telemetry.exporter import Exporter
from adaserve.telemetry.metrics import OTHER, Labels
from adaserve.workers import Worker, WorkerConfig
from adaserve.workers.config import DEFAULT_SLOTS
from adaserve.workers.runtime.base import Runner, RunOutput

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class Argmax(Runner):
    """A linear classifier, ``argmax(x @ I)``: the class of a request is its largest feature."""

    def __init__(self) -> None:
        self.model, self.variant, self.device, self.inputs = "lin", "default", "cpu", ("x",)

    def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
        logits = inputs["x"] @ np.eye(3, dtype=np.float32)
        return RunOutput({"logits": logits}, predictions=logits.argmax(1), confidences=logits.max(1))


def _load(model: str, variant: str, device: str, data_dir: Path) -> Runner:
    return Argmax()


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def total(samples: Samples, name: str, **labels: str) -> float:
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def wait_for(pred: Callable[[], bool], timeout: float = 20.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def exporter(settings: Settings, r: redis.Redis[bytes]) -> Iterator[Exporter]:
    exp = Exporter(settings, port=0, addr="127.0.0.1")
    exp.serve()
    stop = threading.Event()
    t = threading.Thread(target=exp.run, args=(stop,), daemon=True)
    t.start()
    yield exp
    stop.set()
    t.join(5)
    exp.close()
    assert not t.is_alive(), "the exporter's follower did not stop"
    with pytest.raises(OSError):  # the port is closed
        socket.create_connection(("127.0.0.1", exp.port), timeout=1).close()


@pytest.fixture
def pipeline(settings: Settings, r: redis.Redis[bytes]) -> Iterator[Worker]:
    stop = threading.Event()
    worker = Worker(settings, WorkerConfig(pool="cpu", name="w-" + uuid.uuid4().hex[:6], threads=1),
                    load=_load, available=lambda _: ["lin"])
    threads = [threading.Thread(target=worker.run, args=(stop,), daemon=True)]
    threads[0].start()
    assert worker.ready.wait(30), "worker did not start"
    planner = Planner(settings, PlannerConfig(max_batch=8))
    threads.append(threading.Thread(target=planner.run, args=(stop,), daemon=True))
    threads[1].start()
    yield worker
    stop.set()
    for t in threads:
        t.join(15)
    assert not any(t.is_alive() for t in threads)


def _job(i: int, n: int, app: str) -> Job:
    x = np.eye(3, dtype=np.float32)
    reqs = [Request(id=f"r{k}", inputs={"x": Tensor.from_numpy(x[k % 3])}) for k in range(n)]
    return Job(id=f"j{i}-{uuid.uuid4().hex[:6]}", app=app, model="lin", requests=reqs,
               slo=Slo(deadline_ms=30_000), reply_to="client")


def test_real_traffic_is_counted_timed_and_queued(exporter: Exporter, pipeline: Worker, r: redis.Redis[bytes],
                                                  settings: Settings) -> None:
    k = Keys(settings.namespace)
    jobs = [_job(i, n=3, app="shop" if i % 2 else "feed") for i in range(6)]
    for job in jobs:
        streams.publish(r, k.jobs, encode(job))
    r.xadd(k.jobs, {b"m": b"\xc1 not msgpack"})  # a malformed job: rejected and dead-lettered
    sent = sum(len(j.requests) for j in jobs)

    def results() -> list[Result]:
        return [x for _, f in r.xrange(k.reply("client")) for x in read_reply(f[b"m"])]

    assert wait_for(lambda: len(results()) == sent)
    assert {x.status for x in results()} == {"completed"}
    assert wait_for(lambda: total(scrape(exporter.port), "adaserve_requests_total", status="completed") == sent)
    # planner.state comes once per heartbeat: wait for one taken after the last dispatch (an empty queue)
    depth = ("adaserve_queue_depth", frozenset({("model", "lin")}))
    assert wait_for(lambda: scrape(exporter.port).get(depth) == 0)
    got = scrape(exporter.port)

    assert got[("adaserve_broker_up", frozenset())] == 1
    assert total(got, "adaserve_requests_total", app="shop", model="lin", status="completed") == 9
    assert total(got, "adaserve_requests_total", status="rejected") == 1
    assert total(got, "adaserve_request_reasons_total", status="rejected") == 1
    assert total(got, "adaserve_jobs_total", model="lin", deadline_met="true") == len(jobs)
    assert got[("adaserve_dead_letters", frozenset())] == 1
    assert total(got, "adaserve_planners") == 1
    # every completed request was timed once in each histogram, its buckets cumulative up to +Inf
    for name in ("adaserve_request_queue_seconds", "adaserve_request_execution_seconds",
                 "adaserve_request_latency_seconds"):
        assert total(got, f"{name}_count", model="lin") == sent
        for app in ("shop", "feed"):
            buckets = sorted((float(dict(ls)["le"]), v) for (n, ls), v in got.items()
                             if n == f"{name}_bucket" and dict(ls)["app"] == app)
            counts = [v for _, v in buckets]
            assert counts == sorted(counts) and buckets[-1] == (float("inf"), 9)
            assert total(got, f"{name}_count", app=app) == 9
    assert total(got, "adaserve_request_latency_seconds_sum") > 0
    finished = total(got, "adaserve_batches_finished_total", pool="cpu", model="lin")
    assert finished >= 1 and total(got, "adaserve_batches_dispatched_total", pool="cpu", model="lin") == finished
    assert total(got, "adaserve_batch_size_sum", pool="cpu") == sent
    assert got[("adaserve_worker_slots", frozenset({("worker", pipeline.id), ("pool", "cpu")}))] == DEFAULT_SLOTS
    assert got[("adaserve_pool_slots", frozenset({("pool", "cpu")}))] == DEFAULT_SLOTS
    assert got[("adaserve_pool_inflight_batches", frozenset({("pool", "cpu")}))] == 0
    # decisions are counted from the periodic planner.state: the one after the last batch may be on its way
    assert wait_for(lambda: total(scrape(exporter.port), "adaserve_planner_decisions_total") >= finished)
    assert total(got, "adaserve_planner_decision_seconds", quantile="1") > 0


def test_gpu_figures_of_a_heartbeat_are_exported_in_base_units(exporter: Exporter, r: redis.Redis[bytes],
                                                               settings: Settings) -> None:
    sec, usec = r.time()
    hb = WorkerHeartbeat(ts=sec * 1000 + usec / 1000, worker="gpu-a", pool="gpu", slots=4, busy=1, device="gpu",
                         gpu={"memory_used_mb": 512.0, "util_pct": 40.0, "power_w": 120.5, "energy_j": 9000.0})
    r.hset(Keys(settings.namespace).workers, "gpu-a", encode(hb))
    got = scrape(exporter.port)
    who = frozenset({("worker", "gpu-a"), ("pool", "gpu")})
    assert got[("adaserve_worker_gpu_memory_used_bytes", who)] == 512 * 2**20
    assert got[("adaserve_worker_gpu_utilization_ratio", who)] == pytest.approx(0.4)
    assert got[("adaserve_worker_gpu_power_watts", who)] == 120.5
    assert got[("adaserve_worker_gpu_energy_joules_total", who)] == 9000.0
    assert got[("adaserve_worker_busy_slots", who)] == 1
    assert got[("adaserve_pool_workers", frozenset({("pool", "gpu")}))] == 1


def test_a_stale_heartbeat_is_not_a_live_worker(exporter: Exporter, r: redis.Redis[bytes], settings: Settings) -> None:
    sec, _ = r.time()
    old = WorkerHeartbeat(ts=(sec - 60) * 1000, worker="gone", pool="cpu", slots=2)
    r.hset(Keys(settings.namespace).workers, "gone", encode(old))
    got = scrape(exporter.port)
    assert not any(n == "adaserve_worker_slots" for n, _ in got)


def test_label_values_are_bounded_and_cleaned() -> None:
    lab = Labels(limit=2)
    assert lab("app", "a b") == "a_b" and lab("app", "c") == "c"
    assert lab("app", "d") == OTHER and lab("app", "c") == "c"  # known values stay
    assert lab("model", "d") == "d"  # each label has its own budget
    assert lab("reason", "x" * 200) == "x" * 64


def test_queue_depth_sums_the_live_planners_per_model(exporter: Exporter, r: redis.Redis[bytes],
                                                      settings: Settings) -> None:
    sec, usec = r.time()
    now = sec * 1000 + usec / 1000
    k = Keys(settings.namespace)
    for name, pending, ts in (("p1", {"a": 3, "b": 1}, now), ("p2", {"a": 4}, now), ("old", {"a": 100}, now - 60_000)):
        state = PlannerState(ts=ts, planner=name, pending=pending, held_jobs=2, decisions=5,
                             decision_p50_ms=0.2, decision_p99_ms=1.5, decision_max_ms=2.0)
        r.hset(k.planners, name, encode(state))
    got = scrape(exporter.port)
    assert got[("adaserve_queue_depth", frozenset({("model", "a")}))] == 7
    assert got[("adaserve_queue_depth", frozenset({("model", "b")}))] == 1
    assert got[("adaserve_planners", frozenset())] == 2
    assert got[("adaserve_planner_decision_seconds", frozenset({("planner", "p1"), ("quantile", "0.99")}))] == 0.0015
    assert total(got, "adaserve_planner_held_jobs") == 4


def test_a_scrape_during_an_outage_says_the_broker_is_down_and_counting_resumes_after_it(tmp_path: Path,
                                                                                    settings: Settings) -> None:
    from adaserve.broker import load_settings
    from adaserve.embedded import EmbeddedServer

    server = EmbeddedServer(tmp_path / "own", persist=False).start()
    own = load_settings(**{**settings.model_dump(), "redis_url": server.url})
    exp = Exporter(own, port=0, addr="127.0.0.1")
    stop = threading.Event()
    t = threading.Thread(target=exp.run, args=(stop,), daemon=True)
    try:
        exp.serve()
        t.start()
        assert scrape(exp.port)[("adaserve_broker_up", frozenset())] == 1
        server.stop()
        got = scrape(exp.port)
        assert got[("adaserve_broker_up", frozenset())] == 0
        assert not any(n == "adaserve_dead_letters" for n, _ in got)
        assert t.is_alive()  # the follower waits the outage out
        server = EmbeddedServer(tmp_path / "again", port=server.port, persist=False).start()
        done = JobCompleted(ts=time.time() * 1000, job_id="j", app="a", model="m", requests=3, completed=3,
                            latency_ms=5.0, deadline_met=True)
        with redis.Redis.from_url(server.url) as client:
            client.xadd(Keys(own.namespace).telemetry, {b"m": encode(done)})
        assert wait_for(lambda: total(scrape(exp.port), "adaserve_requests_total", status="completed") == 3)
        assert scrape(exp.port)[("adaserve_broker_up", frozenset())] == 1
    finally:
        stop.set()
        t.join(10)
        exp.close()
        server.stop()
    assert not t.is_alive()


def test_the_exporter_command_serves_until_sigterm_then_exits_cleanly(settings: Settings, r: redis.Redis[bytes]) -> None:
    import os
    import signal
    import subprocess
    import sys

    from adaserve.embedded import free_port

    port = free_port()
    env = {**os.environ, "ADASERVE_REDIS_URL": settings.redis_url, "ADASERVE_NAMESPACE": settings.namespace}
    proc = subprocess.Popen([sys.executable, "-m", "adaserve", "exporter", "--port", str(port), "--addr", "127.0.0.1"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def up() -> bool:
            try:
                return scrape(port)[("adaserve_broker_up", frozenset())] == 1
            except OSError:
                return False

        assert wait_for(up, timeout=30), proc.stdout.read() if proc.poll() is not None and proc.stdout else "no scrape"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
        assert proc.returncode == 0, out
        assert f"listening on http://127.0.0.1:{port}/metrics" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
