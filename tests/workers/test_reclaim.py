"""Batches held by a dead consumer are taken over; too many deliveries end in the dead letters."""

from __future__ import annotations

import time

import msgpack

from adaserve.broker import Keys, Settings
from adaserve.broker.streams import deliveries, read_group
from adaserve.workers import Reclaimer


def _ghost_reads(feeder, n: int = 1) -> list[str]:
    """A consumer that reads and then dies holding what it read."""
    entries = read_group(feeder.r, [feeder.keys.batches("cpu")], "cpu", "ghost", count=n)
    assert len(entries) == n
    return [e.id for e in entries]


def test_batch_of_a_dead_consumer_is_reclaimed_once(settings: Settings, feeder, serve) -> None:
    fast = settings.model_copy(update={"reclaim_idle_ms": 200})
    batch, labels = feeder.batch(3)
    feeder.send(batch)
    (_entry,) = _ghost_reads(feeder)
    with serve(fast):
        results = feeder.results(3)
        assert feeder.wait_for(lambda: feeder.pending() == 0)
    assert sorted(r.prediction for r in results) == sorted(labels)
    assert all(r.status == "completed" for r in results)
    assert len(feeder.dead()) == 0


def test_delivered_too_often_is_dead_lettered_with_failed_results(settings: Settings, feeder, serve) -> None:
    strict = settings.model_copy(update={"reclaim_idle_ms": 200, "max_deliveries": 1})
    batch, _ = feeder.batch(2)
    feeder.send(batch)
    _ghost_reads(feeder)
    with serve(strict):
        results = feeder.results(2)
        assert feeder.wait_for(lambda: feeder.pending() == 0)
        good, labels = feeder.batch(1)
        feeder.send(good)
        results = feeder.results(3)
    failed = [r for r in results if r.job_id == batch.items[0].job_id]
    assert len(failed) == 2 and all(r.status == "failed" and r.reason.startswith("max_deliveries") for r in failed)
    assert [r.prediction for r in results if r.job_id == good.items[0].job_id] == labels
    (dead,) = feeder.dead()
    assert dead[b"reason"] == b"max_deliveries"
    (ev,) = feeder.events("batch.deadlettered")
    assert ev.batch_id == batch.id and ev.deliveries == 2 and ev.reason == "max_deliveries"
    assert [e.batch_id for e in feeder.events("batch.finished")].count(batch.id) == 1  # planners count it as finished


def test_live_worker_keeps_its_lease_on_a_long_batch(settings: Settings, feeder, serve) -> None:
    fast = settings.model_copy(update={"reclaim_idle_ms": 100})
    with serve(fast, slots=1) as worker:
        batch, _ = feeder.batch(1, variant="slow")  # runs 0.3 s, three times the idle limit
        entry = feeder.send(batch)
        assert feeder.wait_for(lambda: worker.slots.busy() == 1)
        claimer = Reclaimer(feeder.r, fast, pool="cpu", worker="thief")
        stolen = []
        for _ in range(5):
            stolen += claimer.claim(10)
            time.sleep(0.06)
        results = feeder.results(1)
    assert [c.entry.id for c in stolen] == [] and results[0].status == "completed"
    assert deliveries(feeder.r, feeder.keys.batches("cpu"), "cpu", entry) == 0  # acked


def test_claim_respects_the_limit_and_counts_deliveries(settings: Settings, feeder) -> None:
    fast = settings.model_copy(update={"reclaim_idle_ms": 100})
    for _ in range(3):
        feeder.send(feeder.batch(1)[0])
    ids = _ghost_reads(feeder, 3)
    time.sleep(0.15)
    claimer = Reclaimer(feeder.r, fast, pool="cpu", worker="heir")
    got = claimer.claim(2)
    assert [c.entry.id for c in got] == ids[:2] and [c.deliveries for c in got] == [2, 2]
    assert claimer.claim(0) == []


def test_prune_forgets_stale_heartbeats_and_idle_empty_consumers(settings: Settings, feeder) -> None:
    keys = Keys(settings.namespace)
    old = msgpack.packb({"v": 1, "type": "event", "event": "worker.heartbeat", "ts": 1.0, "worker": "old"})
    feeder.r.hset(keys.workers, "old", old)
    # consumers: "idle" holds nothing, "holder" holds a batch, "fresh" is still beating
    for name in ("idle", "fresh"):
        read_group(feeder.r, [keys.batches("cpu")], "cpu", name, count=1)
    feeder.send(feeder.batch(1)[0])
    read_group(feeder.r, [keys.batches("cpu")], "cpu", "holder", count=1)
    fast = settings.model_copy(update={"reclaim_idle_ms": 100, "heartbeat_s": 0.01, "worker_ttl_s": 0.02})
    time.sleep(0.12)
    feeder.r.hset(keys.workers, "fresh", msgpack.packb({"ts": time.time() * 1000}))
    removed = Reclaimer(feeder.r, fast, pool="cpu", worker="me").prune(time.time() * 1000)
    assert removed == (1, 1)
    assert sorted(feeder.r.hkeys(keys.workers)) == [b"fresh"]
    names = sorted(c["name"] for c in feeder.r.xinfo_consumers(keys.batches("cpu"), "cpu"))
    assert names == [b"fresh", b"holder"]


def test_restart_under_the_same_name_serves_its_own_pending_batches(settings: Settings, feeder, serve) -> None:
    slow_reclaim = settings.model_copy(update={"reclaim_idle_ms": 600_000})  # so only the own-PEL read can serve it
    batch, labels = feeder.batch(2)
    feeder.send(batch)
    entries = read_group(feeder.r, [feeder.keys.batches("cpu")], "cpu", "w-same", count=1)
    assert len(entries) == 1  # the previous life of w-same read it and died
    with serve(slow_reclaim, name="w-same"):
        results = feeder.results(2)
        assert feeder.wait_for(lambda: feeder.pending() == 0)
    assert sorted(r.prediction for r in results) == sorted(labels)
