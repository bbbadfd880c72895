"""The worker against the real server: results, idempotence, failures, heartbeats, shutdown."""

from __future__ import annotations

import threading

import msgpack
import numpy as np
import pytest

from adaserve.broker import Keys, Settings
from adaserve.broker.codec import decode, encode
from adaserve.broker.events import BatchDeadLettered, BatchFinished, WorkerHeartbeat, WorkerStopped
from adaserve.workers import Worker, WorkerConfig
from adaserve.workers.runtime import available_models


def test_batch_in_results_out_with_right_predictions(feeder, serve) -> None:
    batch, labels = feeder.batch(8)
    with serve() as worker:
        feeder.send(batch)
        results = feeder.results(8)
    assert sorted(r.request_id for r in results) == [f"r{i}" for i in range(8)]
    by_id = {r.request_id: r for r in results}
    for i, label in enumerate(labels):
        res = by_id[f"r{i}"]
        assert res.status == "completed" and res.prediction == label
        assert 0.0 < res.confidence <= 1.0
        assert res.worker == worker.id and res.model == "tiny" and res.plan == batch.plan
        assert res.outputs["logits"].shape == (3,)
        assert int(np.argmax(res.outputs["logits"].to_numpy())) == label
        t = res.timings
        assert t.started_ms is not None and t.submitted_ms <= t.started_ms <= t.finished_ms
        assert t.total_ms >= t.queue_ms >= 0 and t.exec_ms >= 0
    assert feeder.pending() == 0
    (ev,) = feeder.events("batch.finished")
    assert isinstance(ev, BatchFinished)
    assert ev.batch_id == batch.id and ev.size == 8 and ev.worker == worker.id and ev.pool == "cpu"
    assert {i.request_id: i.confidence for i in ev.items} == {r.request_id: r.confidence for r in results}
    assert all(i.status == "completed" for i in ev.items)
    done = feeder.events("job.completed")
    assert len(done) == 1 and done[0].completed == 8


def test_requests_whose_deadline_passed_before_the_run_end_expired_once(feeder, serve) -> None:
    batch, labels = feeder.batch(4)
    gone = batch.items[0].submitted_ms  # a deadline that has passed: two requests waited it out
    batch = batch.model_copy(update={"items": [it.model_copy(update={"deadline_ms": gone}) if i < 2 else it
                                               for i, it in enumerate(batch.items)]})
    with serve():
        feeder.send(batch)
        feeder.send(batch)  # a redelivery ends nothing twice
        assert feeder.wait_for(lambda: len(feeder.events("batch.finished")) == 2)
        results = feeder.results(4)
    assert len(results) == 4
    by_id = {r.request_id: r for r in results}
    assert [by_id[f"r{i}"].status for i in range(4)] == ["expired", "expired", "completed", "completed"]
    assert by_id["r0"].reason.startswith("deadline") and by_id["r0"].outputs == {}
    assert [by_id[f"r{i}"].prediction for i in (2, 3)] == labels[2:]
    ev = feeder.events("batch.finished")[0]
    assert isinstance(ev, BatchFinished) and ev.size == 4 and ev.expired == 2
    (done,) = feeder.events("job.completed")
    assert (done.completed, done.expired) == (2, 2)
    assert feeder.pending() == 0


def test_redelivered_batch_yields_no_second_result(feeder, serve) -> None:
    batch, _ = feeder.batch(5)
    with serve():
        feeder.send(batch)
        feeder.send(batch)  # the same batch again, as a reclaim or a replayed dispatch would
        assert feeder.wait_for(lambda: len(feeder.events("batch.finished")) == 2)
        second, _ = feeder.batch(2)
        feeder.send(second)
        results = feeder.results(7)
    assert len(results) == 7
    assert len({(r.job_id, r.request_id) for r in results}) == 7
    assert feeder.pending() == 0


def test_unknown_model_fails_its_requests_and_the_worker_keeps_serving(feeder, serve) -> None:
    bad, _ = feeder.batch(3, model="nosuch")
    good, labels = feeder.batch(2)
    with serve():
        feeder.send(bad)
        feeder.send(good)
        results = feeder.results(5)
    by_job = {}
    for r in results:
        by_job.setdefault(r.job_id, []).append(r)
    assert len(results) == 5
    assert all(r.status == "failed" and r.reason.startswith("unknown_model") for r in by_job[bad.items[0].job_id])
    assert [r.prediction for r in sorted(by_job[good.items[0].job_id], key=lambda r: r.request_id)] == labels
    (dead,) = feeder.dead()
    assert dead[b"reason"] == b"unknown_model" and decode(dead[b"raw"]).id == bad.id
    (ev,) = feeder.events("batch.deadlettered")
    assert isinstance(ev, BatchDeadLettered) and ev.batch_id == bad.id
    assert feeder.pending() == 0


def test_wrong_shape_fails_only_that_request(feeder, serve) -> None:
    rng = np.random.default_rng(1)
    arrays = [rng.random(4, dtype=np.float32), rng.random(7, dtype=np.float32), rng.random(4, dtype=np.float32)]
    batch, _ = feeder.batch(3, inputs=arrays)
    with serve():
        feeder.send(batch)
        results = {r.request_id: r for r in feeder.results(3)}
    assert results["r1"].status == "failed" and "shape" in results["r1"].reason
    assert results["r0"].status == results["r2"].status == "completed"
    (dead,) = feeder.dead()
    assert dead[b"reason"] == b"bad_input"


def test_wrong_shape_without_specs_fails_only_its_group(feeder, serve) -> None:
    rng = np.random.default_rng(2)
    arrays = [rng.random(4, dtype=np.float32), rng.random(7, dtype=np.float32)]
    batch, _ = feeder.batch(2, variant="nospec", inputs=arrays)
    with serve():
        feeder.send(batch)
        results = {r.request_id: r for r in feeder.results(2)}
    assert results["r0"].status == "completed"
    assert results["r1"].status == "failed" and results["r1"].reason.startswith("bad_input")


def test_undecodable_batch_is_dead_lettered_and_addressable_requests_fail(feeder, serve) -> None:
    batch, _ = feeder.batch(2)
    body = msgpack.unpackb(encode(batch))
    body["plan"] = "not a plan"
    mangled = msgpack.packb(body)
    with serve():
        feeder.send(b"\x00garbage")
        feeder.send(mangled)
        good, _labels = feeder.batch(1)
        feeder.send(good)
        results = feeder.results(3)
    assert sorted((r.job_id == batch.items[0].job_id, r.status) for r in results) == [
        (False, "completed"), (True, "failed"), (True, "failed")]
    reasons = sorted(d[b"reason"] for d in feeder.dead())
    assert reasons == [b"schema", b"undecodable"]
    assert feeder.pending() == 0


def test_heartbeat_then_goodbye(settings: Settings, feeder, serve, r) -> None:
    keys = Keys(settings.namespace)
    with serve(slots=3) as worker:
        raw = r.hget(keys.workers, worker.id)
        hb = decode(raw)
        assert isinstance(hb, WorkerHeartbeat)
        assert (hb.worker, hb.pool, hb.slots, hb.busy, hb.models, hb.device, hb.gpu) == (
            worker.id, "cpu", 3, 0, ["tiny"], "cpu", None)
        assert hb.inputs == {"tiny": {"x": {"shape": [4], "dtype": "float32"}}}
        assert feeder.wait_for(lambda: len(feeder.events("worker.heartbeat")) >= 3)
    assert r.hget(keys.workers, worker.id) is None
    (bye,) = feeder.events("worker.stopped")
    assert isinstance(bye, WorkerStopped) and bye.worker == worker.id
    beats = feeder.events("worker.heartbeat")
    assert beats[-1].slots == 0  # draining: planners stop sending before the worker leaves


def test_busy_counts_held_batches(settings: Settings, feeder, serve, r) -> None:
    keys = Keys(settings.namespace)
    with serve(slots=2) as worker:
        for _ in range(3):
            feeder.send(feeder.batch(1, variant="slow")[0])
        assert feeder.wait_for(lambda: decode(r.hget(keys.workers, worker.id)).busy == 2)
        assert len(feeder.results(3)) == 3
    assert feeder.pending() == 0


def test_stop_finishes_batches_in_hand(feeder, serve) -> None:
    with serve(slots=2) as worker:
        for _ in range(2):
            feeder.send(feeder.batch(2, variant="slow")[0])
        assert feeder.wait_for(lambda: worker.slots.busy() == 2)
    results = feeder.results(4, timeout=0.1)  # the stop returned only after both batches ended
    assert len(results) == 4 and all(r.status == "completed" for r in results)
    assert feeder.pending() == 0


def test_real_model_round_trip(settings: Settings, feeder) -> None:
    """fsdd-cnn through the real runtime: held-out recordings come back correctly classified."""
    if "fsdd-cnn" not in available_models(settings.data_dir):
        pytest.skip("fsdd-cnn is not built")
    from adaserve.models.datasets import sample_inputs

    rows, labels = sample_inputs("fsdd-cnn", 48, seed=0)
    worker = Worker(settings, WorkerConfig(name="w-real", models=("fsdd-cnn",), threads=1))
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert worker.ready.wait(30)
        batches = [feeder.batch(model="fsdd-cnn", rows=rows[k:k + 16])[0] for k in range(0, 48, 16)]
        for b in batches:
            feeder.send(b)
        results = feeder.results(48)
    finally:
        stop.set()
        thread.join(15)
    truth = {(b.items[i].job_id, f"r{i}"): int(labels[k * 16 + i]) for k, b in enumerate(batches) for i in range(16)}
    assert len(results) == 48 and all(r.status == "completed" for r in results)
    accuracy = np.mean([r.prediction == truth[(r.job_id, r.request_id)] for r in results])
    assert accuracy >= 0.9  # the manifest reports 0.997 on the whole held-out split
    assert set(results[0].outputs) == {"logits", "probs"}
