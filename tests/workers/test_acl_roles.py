"""The ACL roles are sufficient, not only restrictive: a real planner and a real worker, each
connected as its own role's user, serve jobs that a producer's user submits, through every path a
request can end by (completed, expired, rejected, dead-lettered), and a worker's housekeeping:
reclaiming a dead worker's batches, dead-lettering one delivered too often, pruning.

Here rather than under tests/broker for the tiny ONNX model of this folder's conftest. Several
paths swallow a Redis error on purpose (a prune, ORLOJ's feedback round), so the server's ACL log
is what proves that no command was refused.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np
import redis

from adaserve.broker import Keys, Settings, connect
from adaserve.planner.config import PlannerConfig
from adaserve.planner.service import Planner
from adaserve.producers import Client, make_job
from adaserve.telemetry.health import check
from adaserve.workers import Worker, WorkerConfig


def sample(label: int, rng: np.random.Generator) -> np.ndarray:
    """An input of the tiny model (this folder's conftest) whose right answer is ``label``."""
    x = rng.uniform(0.0, 0.5, 4).astype(np.float32)
    x[label] = 1.0
    return x


def _consumers(r: redis.Redis[bytes], k: Keys) -> list[bytes]:
    return [c["name"] for c in r.xinfo_consumers(k.batches("cpu"), "cpu")]


def _refusals(r: redis.Redis[bytes], users: list[str]) -> list[dict[bytes, object]]:
    return [e for e in r.acl_log() if str(e.get("username")) in users]


def test_planner_and_worker_serve_a_producer_each_under_its_own_role(
    settings: Settings, r: redis.Redis[bytes], acl_user: Callable[..., Settings], zoo: object, feeder: Any,
) -> None:
    roles = {name: acl_user(name) for name in ("producer", "planner", "worker")}
    users = [s.redis_url.split("//")[1].split(":")[0] for s in roles.values()]
    k = Keys(settings.namespace)
    # the workers' housekeeping has work to do: a heartbeat long stale, and a consumer that died
    # holding two batches, one of them delivered too often already (the feeder made the group)
    r.hset(k.workers, "ghost", msgpack.packb({"ts": 1.0}))
    orphan, orphan_labels = feeder.batch(3)
    first = feeder.send(orphan)
    r.xreadgroup("cpu", "ghost", {k.batches("cpu"): ">"}, count=1)
    worn, _ = feeder.batch(2)
    feeder.send(worn)
    for cursor in (">", first, first):  # reading its own pending entries after ``first`` again
        r.xreadgroup("cpu", "ghost", {k.batches("cpu"): cursor}, count=1)
    r.acl_log_reset()
    stop = threading.Event()
    worker = Worker(roles["worker"], WorkerConfig(name="w-" + uuid.uuid4().hex[:6]), load=zoo,
                    available=zoo.available)
    planner = Planner(roles["planner"], PlannerConfig(max_batch=8))
    threads = [threading.Thread(target=worker.run, args=(stop,), daemon=True),
               threading.Thread(target=planner.run, args=(stop,), daemon=True)]
    threads[0].start()
    try:
        assert worker.ready.wait(10), "worker did not start"
        threads[1].start()
        rng = np.random.default_rng(0)
        labels = [int(x) for x in rng.integers(0, 3, 8)]
        with Client(roles["producer"]) as c:
            served = c.submit_many([make_job("tiny", [sample(y, rng) for y in labels[i:i + 4]], 10_000.0, modality="x")
                                    for i in (0, 4)])
            late = c.submit(make_job("tiny", [sample(0, rng)], 1.0, modality="x"))
            unknown = c.submit(make_job("no-such-model", [sample(0, rng)], 10_000.0, modality="x"))
            c._r.xadd(k.jobs, {b"m": b"\xc1 not msgpack"})  # a producer's garbage: dead-lettered
            assert [p for h in served for p in h.result(20).predictions] == labels
            assert [x.status for x in late.result(20).results] == ["expired"]
            assert [x.status for x in unknown.result(20).results] == ["rejected"]
        end = time.monotonic() + 15
        while time.monotonic() < end and (r.hexists(k.workers, "ghost") or b"ghost" in _consumers(r, k)):
            time.sleep(0.1)
        assert not r.hexists(k.workers, "ghost"), "the worker did not prune a stale heartbeat"
        assert b"ghost" not in _consumers(r, k), "the worker did not drop an idle consumer"
        ended = {(x.status, x.prediction) for x in feeder.results(5)}
        assert ended == {("completed", y) for y in orphan_labels} | {("failed", None)}, ended
        assert sorted(f[b"reason"] for _, f in r.xrange(k.dead)) == [b"max_deliveries", b"undecodable", b"unknown_model"]
        # the containers' health checks run with the process's own user
        for kind, name in (("planner", planner.consumer), ("worker", worker.id)):
            ok, line = check(connect(roles[kind]), roles[kind], kind, name)
            assert ok, line
    finally:
        stop.set()
        for t in threads:
            t.join(15)
    assert not any(t.is_alive() for t in threads)
    assert _refusals(r, users) == []
