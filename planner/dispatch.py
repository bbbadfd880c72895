"""Turning scheduler decisions into wire messages: batches out, expired requests ended."""

from __future__ import annotations

import uuid
from collections import defaultdict

from adaserve.broker.codec import encode
from adaserve.broker.finalize import Ending
from adaserve.broker.messages import Batch, BatchItem, Plan, Request, Result, Timings
from adaserve.planner.core import Pending
from adaserve.planner.state import HeldJob


def build_batch(model: str, items: list[Pending], now_ms: float, plan: Plan) -> Batch:
    out: list[BatchItem] = []
    for p in items:
        held: HeldJob = p.payload[0]
        req: Request = p.payload[1]
        out.append(BatchItem.model_construct(
            job_id=p.job_id, request_id=p.request_id, app=p.app, reply_to=held.job.reply_to,
            run=held.job.run, inputs=req.inputs, submitted_ms=held.submitted_ms,
            deadline_ms=held.submitted_ms + held.job.slo.deadline_ms, kind=req.kind,
            generation=req.generation, job_accuracy=held.accuracy,
        ))
    return Batch.model_construct(v=1, type="batch", id=uuid.uuid4().hex, model=model, plan=plan, items=out,
                                 dispatched_ms=now_ms)


def batch_bytes(batch: Batch) -> bytes:
    return encode(batch)


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
