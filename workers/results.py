"""Outcomes -> the wire: one encoded result per request and the batch's ``batch.finished`` event.

The hot path builds the msgpack maps of ``Result`` and ``BatchFinished`` directly (see
``finish`` for why); the tests check that every map validates as its pydantic model. Rare paths
(failures) build pydantic models, which validate as they are made.
"""

from __future__ import annotations

import re
from typing import Any

import msgpack

from adaserve.broker.codec import encode
from adaserve.broker.events import BatchDeadLettered
from adaserve.broker.finalize import Packed
from adaserve.broker.messages import SCHEMA_VERSION, Result, Timings
from adaserve.workers.execute import BatchOutcome, ItemOutcome
from adaserve.workers.lmstats import lm_stats
from adaserve.workers.wire import AnyBatch, items_of

_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")
_MAP16 = b"\xde\x00\x10"  # msgpack map16 header: 16 entries


def finished(
    batch: AnyBatch, outcome: BatchOutcome, *, worker: str, pool: str, device: str,
) -> tuple[list[Packed], bytes]:
    """The encoded result of every request of ``batch`` and the ``batch.finished`` event bytes."""
    packb = msgpack.Packer(use_bin_type=True).pack
    plan = batch.plan.model_dump(mode="python")
    # The fields every result of the batch shares are packed once and spliced in front of each
    # result's own: packing the plan again per request was a third of this function.
    shared = b"".join(packb(x) for x in ("v", SCHEMA_VERSION, "type", "result", "model", batch.model,
                                          "plan", plan, "worker", worker))
    fin = outcome.finished_ms
    packed: list[Packed] = []
    timings: list[dict[str, Any]] = []
    for item, out in zip(items_of(batch), outcome.items):
        ok = out.status == "completed"
        started = outcome.started_ms if ok else fin
        sub = item.submitted_ms
        # A request forwarded from an earlier part of a split model already ran for prior_ms:
        # its exec time is the whole model's, and that time is not queueing.
        prior = item.prior_exec_ms
        queue_ms = started - sub - prior if started > sub + prior else 0.0
        exec_ms = out.exec_ms + prior
        total_ms = fin - sub if fin > sub else 0.0
        exit_ = out.exit if out.exit is not None or not ok else batch.plan.exit
        own = {
            "job_id": item.job_id, "request_id": item.request_id, "app": item.app, "status": out.status,
            "reason": out.reason,
            "outputs": {k: {"dtype": v.dtype, "shape": v.shape, "data": v.data} for k, v in out.outputs.items()},
            "prediction": out.prediction, "confidence": out.confidence, "exit": exit_,
            "job_accuracy": item.job_accuracy,
            "timings": {"submitted_ms": item.submitted_ms, "dispatched_ms": batch.dispatched_ms,
                        "started_ms": started, "finished_ms": fin, "queue_ms": queue_ms,
                        "exec_ms": exec_ms, "total_ms": total_ms},
        }
        # 11 fields of its own (a fixmap, one header byte) and 5 shared: one map of 16
        result = _MAP16 + shared + packb(own)[1:]
        packed.append(Packed(item.job_id, item.request_id, out.status, item.reply_to, result))
        timing = {"job_id": item.job_id, "request_id": item.request_id, "app": item.app, "run": item.run,
                  "status": out.status, "queue_ms": queue_ms, "exec_ms": exec_ms,
                  "total_ms": total_ms, "exit": exit_, "confidence": out.confidence}
        if ok and "confidence" in out.outputs:  # a language model's tokens, for HELIOS's PHT
            timing["lm"] = lm_stats(out.outputs, exit_)
        timings.append(timing)
    event = {"v": 1, "type": "event", "ts": fin, "event": "batch.finished", "batch_id": batch.id, "pool": pool,
             "worker": worker, "model": batch.model, "variant": outcome.variant, "device": device,
             "size": len(batch.items), "exec_ms": outcome.exec_ms, "items": timings,
             "part": batch.plan.placement.part}
    if outcome.load_s is not None:
        event["load_s"] = outcome.load_s
    return packed, packb(event)


def all_failed(batch: AnyBatch, reason: str, now_ms: float) -> BatchOutcome:
    """An outcome that fails every request of ``batch`` (dead-lettered before it could run)."""
    items = [ItemOutcome("failed", reason) for _ in batch.items]
    return BatchOutcome(batch.plan.variant, items, now_ms, now_ms, 0.0)


def failed_from_raw(body: dict[str, Any], reason: str, *, worker: str, now_ms: float) -> list[tuple[Result, str]]:
    """Best-effort ``failed`` results for a batch that does not decode.

    Items whose ids and reply stream can still be read get a result, so their producers learn
    the fate of their requests instead of waiting for a timeout; the rest is only dead-lettered.
    """
    out: list[tuple[Result, str]] = []
    items = body.get("items")
    raw_model = body.get("model")
    model = raw_model if isinstance(raw_model, str) else ""
    seen: set[tuple[str, str]] = set()
    for it in items if isinstance(items, list) else []:
        if not isinstance(it, dict):
            continue
        job, rid, reply = it.get("job_id"), it.get("request_id"), it.get("reply_to")
        if not (isinstance(job, str) and isinstance(rid, str) and isinstance(reply, str)):
            continue
        if not all(_ID.match(x) for x in (job, rid, reply)) or (job, rid) in seen:
            continue
        seen.add((job, rid))
        app = it.get("app")
        app = app if isinstance(app, str) and _ID.match(app) else "default"
        sub = it.get("submitted_ms")
        sub = float(sub) if isinstance(sub, (int, float)) and not isinstance(sub, bool) else now_ms
        result = Result(
            job_id=job, request_id=rid, app=app, model=model[:64], status="failed", reason=reason,
            worker=worker, timings=Timings(submitted_ms=sub, finished_ms=now_ms, total_ms=max(0.0, now_ms - sub)),
        )
        out.append((result, reply))
    return out


def deadlettered(batch_id: str, pool: str, deliveries: int, reason: str, now_ms: float) -> bytes:
    return encode(BatchDeadLettered(ts=now_ms, batch_id=batch_id, pool=pool, deliveries=deliveries, reason=reason))
