"""Turning scheduler decisions into wire messages: batches out, expired requests ended."""

from __future__ import annotations

import uuid
from collections import defaultdict

import numpy as np

from adaserve.broker.codec import encode_map, encode_per_request
from adaserve.broker.finalize import Packed
from adaserve.broker.messages import Plan, Request, Result, Timings
from adaserve.planner.core import Pending
from adaserve.planner.state import HeldJob

_LARGE_ROW = 1 << 16


def build_batch(model: str, items: list[Pending], now_ms: float, plan: Plan, *,
                columnar: bool = True) -> tuple[str, bytes]:
    """A batch's id and wire bytes, the map built directly: the requests' tensors were validated
    at admission, and building a ``BatchItem`` per request and dumping it again cost more of the
    planner than the decision itself. The columnar form (``broker/batchform.py``) when every
    request is a forward request with the same inputs, dtypes and shapes, as a model's requests
    almost always are; the per-request form otherwise. ``tests/planner/test_dispatch.py`` holds
    both maps to the ``Batch`` schema; ``columnar=False`` forces the per-request form (benches)."""
    bid = uuid.uuid4().hex
    head = {"v": 1, "type": "batch", "id": bid, "model": model, "plan": plan.model_dump(mode="python")}
    cols = _columns(items) if columnar else None
    body = {**head, **cols} if cols is not None else {**head, "items": [_item(p) for p in items]}
    body["dispatched_ms"] = now_ms
    return bid, encode_map(body)


def _item(p: Pending) -> dict[str, object]:
    held: HeldJob = p.payload[0]
    req: Request = p.payload[1]
    job = held.job
    return {
        "job_id": p.job_id, "request_id": p.request_id, "app": p.app, "reply_to": job.reply_to,
        "run": job.run, "inputs": {k: {"dtype": t.dtype, "shape": t.shape, "data": t.data}
                                   for k, t in req.inputs.items()},
        "submitted_ms": held.submitted_ms, "deadline_ms": held.submitted_ms + job.slo.deadline_ms,
        "kind": req.kind, "generation": None if req.generation is None else req.generation.model_dump(),
        "job_accuracy": held.accuracy, "prior_exec_ms": 0.0,
    }


def _columns(items: list[Pending]) -> dict[str, object] | None:
    """``jobs`` and ``inputs`` of the columnar form, rows grouped by job in the order the jobs
    first appear; None when the requests differ in kind, inputs, dtype or shape. The requests'
    bytes are joined as they came: the planner never decodes what it only forwards."""
    if not items:
        return None
    by_job: dict[int, tuple[HeldJob, list[Request]]] = {}
    first: Request = items[0].payload[1]
    sig = [(k, t.dtype, t.shape) for k, t in first.inputs.items()]
    width = len(sig)
    # one input (a model's usual case) is checked without the inner loop: this pass runs once per
    # request dispatched, and it was most of what building a batch cost the planner
    one = sig[0] if width == 1 else None
    last: HeldJob | None = None
    reqs: list[Request] = []
    for p in items:
        held, req = p.payload
        if req.kind != "forward" or req.generation is not None:
            return None
        inputs = req.inputs
        if len(inputs) != width:
            return None
        if one is not None:
            t = inputs.get(one[0])
            if t is None or t.dtype != one[1] or t.shape != one[2]:
                return None
        else:
            for k, dtype, shape in sig:
                t = inputs.get(k)
                if t is None or t.dtype != dtype or t.shape != shape:
                    return None
        if held is not last:  # a job's requests mostly come one after another
            got = by_job.get(id(held))
            if got is None:
                got = by_job[id(held)] = (held, [])
            last, reqs = held, got[1]
        reqs.append(req)
    jobs: list[dict[str, object]] = []
    order: list[Request] = []
    for held, reqs in by_job.values():
        job = held.job
        jobs.append({"job_id": job.id, "app": job.app, "reply_to": job.reply_to, "run": job.run,
                     "submitted_ms": held.submitted_ms, "deadline_ms": held.submitted_ms + job.slo.deadline_ms,
                     "job_accuracy": held.accuracy, "request_ids": [r.id for r in reqs]})
        order.extend(reqs)
    n = len(order)
    inputs = {k: {"dtype": dtype, "shape": [n, *shape], "data": _joined([r.inputs[k].data for r in order])}
              for k, dtype, shape in sig}
    return {"jobs": jobs, "inputs": inputs}


def _joined(parts: list[bytes | memoryview]) -> bytes | memoryview:
    """The rows' bytes as one buffer. Rows of 64 kB and more that lie one after another in one
    job's column (a batch that takes a job of photos whole, in order) are that stretch of the
    column, not a copy: a copy of 4.8 MB a job of eight photos. Smaller rows are joined: finding
    where each lies costs more than copying them."""
    first = parts[0]
    if not isinstance(first, memoryview) or len(parts) < 2 or first.nbytes < _LARGE_ROW:
        return b"".join(parts)
    column = first.obj
    views = [p for p in parts if isinstance(p, memoryview) and p.obj is column]
    if len(views) != len(parts):
        return b"".join(parts)
    start = at = _address(first)
    for v in views:
        if _address(v) != at:
            return b"".join(parts)
        at += v.nbytes
    offset = start - _address(memoryview(column))
    return memoryview(column)[offset:offset + (at - start)]


def _address(view: memoryview) -> int:
    return int(np.frombuffer(view, np.uint8).ctypes.data) if view.nbytes else -1


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


def expiries(items: list[Pending], now_ms: float, why: str) -> tuple[list[Packed], dict[str, list[Pending]]]:
    """``expired`` results for ``items``, packed, and the same items grouped by job (for events).
    One ``Result`` is built and validated per job and its map packed again per request: a planner
    expires most when it has fallen behind, and a pydantic result per request was much of what
    each expiry cost it then."""
    by_job: dict[str, list[Pending]] = defaultdict(list)
    for p in items:
        by_job[p.job_id].append(p)
    out: list[Packed] = []
    for job_id, ps in by_job.items():
        first = ps[0]
        held: HeldJob = first.payload[0]
        timings = Timings(submitted_ms=held.submitted_ms, finished_ms=now_ms, total_ms=max(now_ms - held.submitted_ms, 0.0))
        res = Result(job_id=job_id, request_id=first.request_id, app=first.app, model=first.model, status="expired",
                     reason=why, timings=timings)
        raws = encode_per_request(res, [p.request_id for p in ps])
        out += [Packed(job_id, p.request_id, "expired", held.job.reply_to, raw) for p, raw in zip(ps, raws)]
    return out, by_job
