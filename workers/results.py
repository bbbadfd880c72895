"""Outcomes -> the wire: one encoded result per request and the batch's ``batch.finished`` event,
or, for a batch whose every request completed (``BatchOutcome.columns``), one ``columns`` entry per
job of the batch (``finished_columns``).

The hot path builds the msgpack maps of ``Result`` and ``BatchFinished`` directly (see
``finish`` for why); the tests check that every map validates as its pydantic model. Rare paths
(failures) build pydantic models, which validate as they are made.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

import msgpack
import numpy as np

from adaserve.broker.batchform import heads
from adaserve.broker.codec import encode
from adaserve.broker.events import BatchDeadLettered
from adaserve.broker.finalize import Packed
from adaserve.broker.messages import SCHEMA_VERSION, Result, Timings
from adaserve.workers.execute import BatchOutcome, Columns, ItemOutcome
from adaserve.workers.lmstats import lm_stats
from adaserve.workers.wire import AnyBatch, items_of

_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")
_MAP16 = b"\xde\x00\x10"  # msgpack map16 header: 16 entries


def finished(
    batch: AnyBatch, outcome: BatchOutcome, *, worker: str, pool: str, device: str, kept: bool = True,
) -> tuple[list[Packed], bytes]:
    """The encoded result of every request of ``batch`` and the ``batch.finished`` event bytes;
    ``kept``: whether the batch's entry stays in its stream after the ack (the event says so)."""
    packb = msgpack.Packer(use_bin_type=True).pack
    shared = _shared(batch, worker, packb)
    fin = outcome.finished_ms
    packed: list[Packed] = []
    timings: list[dict[str, Any]] = []
    for item, out in zip(items_of(batch), outcome.items):
        result, timing = _result(batch, item, out, outcome.started_ms, fin, shared, packb)
        packed.append(Packed(item.job_id, item.request_id, out.status, item.reply_to, result))
        timings.append(timing)
    event = _finished_event(batch, outcome, pool, worker, device, timings, kept)
    return packed, packb(event)


def _finished_event(batch: AnyBatch, outcome: BatchOutcome, pool: str, worker: str, device: str,
                    timings: list[dict[str, Any]], kept: bool) -> dict[str, Any]:
    """The batch's ``batch.finished`` event, whichever form its results take."""
    event = {"v": 1, "type": "event", "ts": outcome.finished_ms, "event": "batch.finished", "batch_id": batch.id,
             "pool": pool, "worker": worker, "model": batch.model, "variant": outcome.variant, "device": device,
             "size": len(batch.items), "exec_ms": outcome.exec_ms, "items": timings,
             "part": batch.plan.placement.part}
    if not kept:  # absent means kept: what workers before the field wrote
        event["kept"] = False
    if outcome.load_s is not None:
        event["load_s"] = outcome.load_s
    expired = outcome.expired
    if expired:
        event["expired"] = expired
    return event


def _shared(batch: AnyBatch, worker: str, packb: Callable[[Any], bytes]) -> bytes:
    """The fields every result of the batch shares, packed once and spliced in front of each
    result's own: packing the plan again per request was a third of ``finished``."""
    plan = batch.plan.model_dump(mode="python")
    return b"".join(packb(x) for x in ("v", SCHEMA_VERSION, "type", "result", "model", batch.model,
                                        "plan", plan, "worker", worker))


def _result(batch: AnyBatch, item: Any, out: ItemOutcome, started_ms: float, fin: float, shared: bytes,
            packb: Callable[[Any], bytes]) -> tuple[bytes, dict[str, Any]]:
    """One request's ``result`` entry and its timing for the batch event."""
    ok = out.status == "completed"
    started = started_ms if ok else fin
    queue_ms, exec_ms, total_ms = _times(item, started, fin, out.exec_ms)
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
    timing = {"job_id": item.job_id, "request_id": item.request_id, "app": item.app, "run": item.run,
              "status": out.status, "queue_ms": queue_ms, "exec_ms": exec_ms,
              "total_ms": total_ms, "exit": exit_, "confidence": out.confidence}
    if ok and "confidence" in out.outputs:  # a language model's tokens, for HELIOS's PHT
        timing["lm"] = lm_stats(out.outputs, exit_)
        if out.scored and timing["lm"] is not None:
            timing["lm"]["scored"] = [{"model": m, "depth": d, "prompt_ppl": p} for m, d, p in out.scored]
    # 11 fields of its own (a fixmap, one header byte) and 5 shared: one map of 16
    return _MAP16 + shared + packb(own)[1:], timing


def _times(item: Any, started: float, fin: float, exec_ms: float) -> tuple[float, float, float]:
    """A request's queueing, execution and total ms. A request forwarded from an earlier part of
    a split model already ran for ``prior_exec_ms``: its exec time is the whole model's, and that
    time is not queueing."""
    sub, prior = item.submitted_ms, item.prior_exec_ms
    return (started - sub - prior if started > sub + prior else 0.0, exec_ms + prior,
            fin - sub if fin > sub else 0.0)


def finished_columns(
    batch: AnyBatch, outcome: BatchOutcome, cols: Columns, *, worker: str, pool: str, device: str,
    kept: bool = True,
) -> tuple[list[Packed], dict[tuple[str, str], bytes], bytes]:
    """``finished`` for a batch whose every request completed: each job's requests of the batch
    (two or more) as one ``columns`` entry (docs/wire.md), keyed by ``(job id, reply_to)``, built
    from the batch arrays without a map per request. The requests' own ``result`` entries (a lone
    request's; what a redelivery needs, when some of a job's requests had already ended) are
    built only when asked for, each alone, and are the maps ``finished`` makes: equal to what
    the expanded ``columns`` entry holds (``tests/workers/test_results.py``)."""
    packb = msgpack.Packer(use_bin_type=True).pack
    items = items_of(batch)
    fin, started = outcome.finished_ms, outcome.started_ms
    shared: list[bytes] = []

    def result_of(i: int) -> bytes:
        if not shared:
            shared.append(_shared(batch, worker, packb))
        return _result(batch, items[i], outcome.items[i], started, fin, shared[0], packb)[0]

    plan = batch.plan.model_dump(mode="python")
    default_exit = batch.plan.exit
    exits = [default_exit if e is None else e for e in cols.exits]
    groups: dict[tuple[str, str], list[int]] = {}
    packed: list[Packed] = []
    n = len(items)
    # the event's per-request fields as columns (``events.TIMING_COLUMNS``), not a map each
    timing: dict[str, list[Any]] = {"job_id": [], "request_id": [], "app": [], "run": [], "status": ["completed"] * n,
                                    "queue_ms": [], "exec_ms": [], "total_ms": [], "exit": exits,
                                    "confidence": list(cols.confidences)}
    job_ids, request_ids, apps, runs = timing["job_id"], timing["request_id"], timing["app"], timing["run"]
    queues, execs, totals = timing["queue_ms"], timing["exec_ms"], timing["total_ms"]
    for i, item in enumerate(items):
        groups.setdefault((item.job_id, item.reply_to), []).append(i)
        packed.append(Packed(item.job_id, item.request_id, "completed", item.reply_to,
                             build=partial(result_of, i)))
        queue_ms, exec_ms, total_ms = _times(item, started, fin, cols.exec_ms[i])
        job_ids.append(item.job_id)
        request_ids.append(item.request_id)
        apps.append(item.app)
        runs.append(item.run)
        queues.append(queue_ms)
        execs.append(exec_ms)
        totals.append(total_ms)
    entries: dict[tuple[str, str], bytes] = {}
    for key, idx in groups.items():
        if len(idx) == 1:  # a lone request goes as its own `result` entry, as before: columns save nothing
            continue
        first = items[idx[0]]
        # one job's requests share its submission time, app and accuracy floor; a group that
        # does not (no planner builds one) goes as the requests' own maps instead
        if any(items[i].submitted_ms != first.submitted_ms or items[i].app != first.app
               or items[i].job_accuracy != first.job_accuracy for i in idx):
            continue
        whole = len(idx) == len(items)
        sub = first.submitted_ms
        entries[key] = packb({
            "v": SCHEMA_VERSION, "type": "columns", "job_id": key[0], "app": first.app, "model": batch.model,
            "plan": plan, "worker": worker, "job_accuracy": first.job_accuracy, "status": "completed",
            "request_ids": [items[i].request_id for i in idx],
            "prediction": cols.predictions if whole else [cols.predictions[i] for i in idx],
            "confidence": cols.confidences if whole else [cols.confidences[i] for i in idx],
            "exit": exits if whole else [exits[i] for i in idx],
            "outputs": {k: _stacked(v if whole else v[idx]) for k, v in cols.outputs.items()},
            "timings": {"submitted_ms": sub, "dispatched_ms": batch.dispatched_ms, "started_ms": started,
                        "finished_ms": fin, "total_ms": totals[idx[0]],
                        "queue_ms": queues if whole else [queues[i] for i in idx],
                        "exec_ms": execs if whole else [execs[i] for i in idx]},
        })
    event = _finished_event(batch, outcome, pool, worker, device, [], kept)
    del event["items"]
    event["columns"] = timing
    return packed, entries, packb(event)


def _stacked(a: np.ndarray) -> dict[str, Any]:
    """A batch output as one wire tensor, its first dimension the requests."""
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.tobytes()}


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
    items = heads(body)  # either form: a columnar map's jobs name their requests
    raw_model = body.get("model")
    model = raw_model if isinstance(raw_model, str) else ""
    seen: set[tuple[str, str]] = set()
    for it in items:
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
