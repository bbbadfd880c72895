"""Turning scheduler decisions into wire messages: batches out, expired requests ended."""

from __future__ import annotations

import uuid
from collections import defaultdict

from adaserve.broker.codec import encode_map
from adaserve.broker.finalize import Ending
from adaserve.broker.messages import Plan, Request, Result, Timings
from adaserve.planner.core import Pending
from adaserve.planner.state import HeldJob


def build_batch(model: str, items: list[Pending], now_ms: float, plan: Plan) -> tuple[str, bytes]:
    """A batch's id and wire bytes, the map built directly: the requests' tensors were validated
    at admission, and building a ``BatchItem`` per request and dumping it again cost more of the
    planner than the decision itself. ``tests/planner/test_dispatch.py`` holds the map to the
    ``Batch`` schema."""
    out: list[dict[str, object]] = []
    for p in items:
        held: HeldJob = p.payload[0]
        req: Request = p.payload[1]
        job = held.job
        out.append({
            "job_id": p.job_id, "request_id": p.request_id, "app": p.app, "reply_to": job.reply_to,
            "run": job.run, "inputs": {k: {"dtype": t.dtype, "shape": t.shape, "data": t.data}
                                       for k, t in req.inputs.items()},
            "submitted_ms": held.submitted_ms, "deadline_ms": held.submitted_ms + job.slo.deadline_ms,
            "kind": req.kind, "generation": None if req.generation is None else req.generation.model_dump(),
            "job_accuracy": held.accuracy, "prior_exec_ms": 0.0,
        })
    bid = uuid.uuid4().hex
    return bid, encode_map({"v": 1, "type": "batch", "id": bid, "model": model, "plan": plan.model_dump(mode="python"),
                            "items": out, "dispatched_ms": now_ms})


def build_batches(model: str, items: list[Pending], now_ms: float, plan: Plan,
                  max_bytes: int) -> list[tuple[str, bytes, list[Pending]]]:
    """``build_batch``, halved until every message fits ``max_bytes`` (what a worker decodes):
    a batch of 14 float32 photos is already past 8 MiB, and a worker refuses it whole. Only an
    oversized batch pays for the halving; a lone request travels as it is (admission bounded it)."""
    bid, raw = build_batch(model, items, now_ms, plan)
    if len(raw) <= max_bytes or len(items) == 1:
        return [(bid, raw, items)]
    half = len(items) // 2
    return (build_batches(model, items[:half], now_ms, plan, max_bytes)
            + build_batches(model, items[half:], now_ms, plan, max_bytes))


def expiries(items: list[Pending], now_ms: float, why: str) -> tuple[list[Ending], dict[str, list[Pending]]]:
    """``expired`` results for ``items`` and the same items grouped by job (for events)."""
    endings: list[Ending] = []
    by_job: dict[str, list[Pending]] = defaultdict(list)
    for p in items:
        held: HeldJob = p.payload[0]
        timings = Timings(submitted_ms=held.submitted_ms, finished_ms=now_ms, total_ms=max(now_ms - held.submitted_ms, 0.0))
        res = Result(job_id=p.job_id, request_id=p.request_id, app=p.app, model=p.model, status="expired",
                     reason=why, timings=timings)
        endings.append(Ending(res, held.job.reply_to))
        by_job[p.job_id].append(p)
    return endings, by_job
