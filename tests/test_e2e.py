"""End to end on real parts: the server of the test session, a planner and a CPU worker as child
processes (``adaserve planner``, ``adaserve worker``), the real fsdd-cnn model and held-out FSDD
recordings, the SDK and a raw msgpack producer."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import msgpack
import numpy as np
import pytest
import redis

from adaserve.broker import Keys, Tensor, connect, load_settings
from adaserve.models.datasets import sample_inputs
from adaserve.producers import Client, make_job
from adaserve.stack import Stack

pytestmark = pytest.mark.slow
MODEL = "fsdd-cnn"


@pytest.fixture(scope="module")
def stack(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data = tmp_path_factory.mktemp("e2e")
    settings = load_settings(redis_url=redis_url, namespace="e2e" + uuid.uuid4().hex[:8], data_dir=data,
                             heartbeat_s=0.2, worker_ttl_s=2.0)
    s = Stack(settings, cpu_workers=1, gpu_worker=False, worker_threads=1, log_dir=Path(data) / "logs")
    with s:
        s.wait_ready(120)
        yield s
    r = connect(settings)
    keys = list(r.scan_iter(match="{" + settings.namespace + "}:*"))
    if keys:
        r.delete(*keys)


def test_held_out_jobs_come_back_with_correct_predictions(stack: Stack) -> None:
    inputs, labels = sample_inputs(MODEL, 120, seed=1)
    with Client(stack.settings) as c:
        handles = c.submit_many([make_job(MODEL, list(inputs[i:i + 8]), 10_000.0) for i in range(0, 120, 8)])
        preds = [p for h in handles for p in h.result(30).predictions]
    accuracy = float(np.mean(np.asarray(preds) == labels))
    assert accuracy >= 0.9, accuracy


def test_accounting_adds_up_over_feasible_infeasible_and_malformed_jobs(stack: Stack) -> None:
    inputs, _ = sample_inputs(MODEL, 16, seed=2)
    with Client(stack.settings) as c:
        ok = c.submit_many([make_job(MODEL, list(inputs[i:i + 4]), 10_000.0) for i in range(0, 16, 4)])
        late = c.submit_many([make_job(MODEL, list(inputs[:3]), 1.0) for _ in range(3)])
        bad_shape = c.submit(make_job(MODEL, [np.zeros((1, 8, 8), np.float32)] * 2, 10_000.0, modality="audio"))
        unknown = c.submit(make_job("no-such-model", list(inputs[:2]), 10_000.0))
        results = [h.result(30) for h in [*ok, *late, bad_shape, unknown]]
    counts = {"completed": 0, "expired": 0, "rejected": 0, "failed": 0}
    seen: set[tuple[str, str]] = set()
    for job in results:
        for res in job.results:
            counts[res.status] += 1
            assert (res.job_id, res.request_id) not in seen
            seen.add((res.job_id, res.request_id))
    submitted = 16 + 9 + 2 + 2
    assert sum(counts.values()) == submitted
    assert counts == {"completed": 16, "expired": 9, "rejected": 4, "failed": 0}


def test_bad_bytes_are_dead_lettered_while_valid_traffic_is_served(stack: Stack) -> None:
    k = Keys(stack.settings.namespace)
    r = connect(stack.settings)
    before = r.xlen(k.dead)
    r.xadd(k.jobs, {b"m": msgpack.packb([1, 2])})  # valid msgpack, but not a job map
    r.xadd(k.jobs, {b"m": b"\xc1garbage"})
    inputs, _ = sample_inputs(MODEL, 8, seed=3)
    with Client(stack.settings) as c:
        res = c.submit(make_job(MODEL, list(inputs), 10_000.0)).result(30)
    assert res.completed == 8
    deadline = time.time() + 5
    while r.xlen(k.dead) < before + 2 and time.time() < deadline:
        time.sleep(0.05)
    reasons = [f[b"reason"] for _, f in r.xrange(k.dead)][before:]
    assert sorted(reasons) == [b"schema", b"undecodable"]
    r.close()


def test_a_producer_without_the_sdk_gets_its_result(stack: Stack) -> None:
    """The README's wire format, written by hand: a plain msgpack map in field ``m``."""
    inputs, labels = sample_inputs(MODEL, 1, seed=4)
    x = np.ascontiguousarray(inputs[0]["audio"], dtype="<f4")
    job = {"v": 1, "type": "job", "id": "raw-" + uuid.uuid4().hex, "model": MODEL, "reply_to": "raw-client",
           "slo": {"deadline_ms": 10_000, "min_accuracy": 0.0, "objective": "latency"},
           "requests": [{"id": "r0", "inputs": {"audio": {"dtype": "float32", "shape": list(x.shape), "data": x.tobytes()}}}]}
    k = Keys(stack.settings.namespace)
    r: redis.Redis[bytes] = redis.Redis.from_url(stack.settings.redis_url)
    r.xadd(k.jobs, {"m": msgpack.packb(job, use_bin_type=True)})
    reply = r.xread({k.reply("raw-client"): "0"}, block=30_000, count=1)
    (_, [(_, fields)]), = reply
    body = msgpack.unpackb(fields[b"m"], raw=False)
    assert body["status"] == "completed" and body["request_id"] == "r0"
    assert body["prediction"] == int(labels[0])
    r.close()


def test_float16_inputs_are_admitted_and_answered_as_float32(stack: Stack) -> None:
    inputs, _ = sample_inputs(MODEL, 16, seed=5)
    half = [{k: v.astype(np.float16) for k, v in x.items()} for x in inputs]
    with Client(stack.settings) as c:
        full_res, half_res = (c.submit(make_job(MODEL, list(x), 10_000.0)).result(30) for x in (inputs, half))
    assert half_res.completed == 16
    agree = np.mean(np.asarray(full_res.predictions) == np.asarray(half_res.predictions))
    assert agree >= 15 / 16, agree


def test_top_shows_what_the_pipeline_served(stack: Stack) -> None:
    """One frame of ``adaserve top`` over a real planner and worker: the requests just served,
    none left queued or running, the worker with its slots."""
    import io
    import json

    from rich.console import Console

    from adaserve.telemetry.live import run_top

    r = connect(stack.settings)
    time.sleep(1.0)  # the other tests' events end a second before this one's window begins
    sec, usec = r.time()
    started = sec + usec / 1e6
    inputs, _ = sample_inputs(MODEL, 40, seed=4)
    with Client(stack.settings) as c:
        handles = c.submit_many([make_job(MODEL, list(inputs[i:i + 4]), 10_000.0) for i in range(0, 40, 4)])
        assert sum(h.result(30).completed for h in handles) == 40
    time.sleep(0.5)  # the last job.completed and a heartbeat after it
    sec, usec = r.time()
    out = io.StringIO()
    run_top(stack.settings, window_s=sec + usec / 1e6 - started + 0.5, once=True, json_out=True,
            console=Console(file=out))
    d = json.loads(out.getvalue())
    (m,) = [row for row in d["models"] if row["model"] == MODEL]
    assert (m["queued"], m["running"], m["ended"], m["on_time"], m["slo_violations"]) == (0, 0, 40, 40, 0)
    assert m["finish_rate"] == 1.0 and m["placements"] == {"cpu": 40} and m["p50_ms"] > 0
    assert m["done_rps"] == m["arrival_rps"] == 40 / d["span_s"]
    (w,) = d["workers"]
    assert w["pool"] == "cpu" and w["slots"] > 0 and w["rps"] > 0


def test_nan_input_is_rejected_and_an_allowed_model_answering_nan_fails_the_request(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The preamble's all-NaN recording: rejected at admission by default; let through for a model
    that is allowed NaN, the worker still refuses to call fsdd-cnn's NaN logits an answer."""
    inputs, labels = sample_inputs(MODEL, 2, seed=6)
    nan = {"audio": np.full_like(inputs[0]["audio"], np.nan)}
    k = Keys("nan" + uuid.uuid4().hex[:8])
    for allowed in (False, True):
        if allowed:
            monkeypatch.setenv("ADASERVE_LIMIT_ALLOW_NON_FINITE", MODEL)  # the planner's and this SDK's
        settings = load_settings(redis_url=redis_url, namespace=k.namespace, data_dir=tmp_path)
        with Stack(settings, cpu_workers=1, gpu_worker=False, worker_threads=1, log_dir=tmp_path / "logs") as s:
            s.wait_ready(120)
            r = connect(settings)
            job = {"v": 1, "type": "job", "id": f"nan-{allowed}", "model": MODEL, "reply_to": "nan-client",
                   "slo": {"deadline_ms": 10_000},
                   "requests": [{"id": "r0", "inputs": {"audio": Tensor.from_numpy(nan["audio"]).wire()}}]}
            r.xadd(k.jobs, {"m": msgpack.packb(job, use_bin_type=True)})
            with Client(settings) as c:
                ok = c.submit(make_job(MODEL, [inputs[1]], 10_000.0)).result(30)
            reply = r.xread({k.reply("nan-client"): "0"}, block=30_000, count=1)
            body = msgpack.unpackb(reply[0][1][-1][1][b"m"], raw=False)
            r.delete(*r.scan_iter(match="{" + k.namespace + "}:*"))
            r.close()
        assert ok.completed == 1 and ok.predictions == [int(labels[1])]
        assert (body["status"], body["reason"].split(":")[0]) == ("failed" if allowed else "rejected", "non_finite")
        assert body["prediction"] is None
