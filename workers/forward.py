"""Split placement: after a non-last part, hand the intermediate tensors to the next part's pool.

The worker that ran part *k* builds a batch of the same requests for ``plan.placement.next_pool``
(inputs ``{"intermediate": row}``, variant = the runner's next part, ids, submission time,
deadline and reply channel kept) and, in one Lua script, XACKs its own batch entry, XADDs the new
batch and adds the ``batch.finished`` event that frees the planner's slot.

Why a script and not MULTI/EXEC: the script adds the forwarded batch only when its XACK actually
acknowledged the entry. A part-1 batch that runs twice (a reclaim racing a slow worker, or a crash
after the forward) is therefore forwarded exactly once; a transaction would forward it twice and
leave the duplicate to the finaliser. Requests that failed in part *k* end at once through the
finaliser (without the ack, which the script does), as in any batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import msgpack
import redis

from adaserve.broker.codec import encode
from adaserve.broker.finalize import Finalizer
from adaserve.broker.keys import Keys
from adaserve.broker.messages import Batch, BatchItem, Placement
from adaserve.broker.settings import Limits, Settings
from adaserve.broker.streams import Entry
from adaserve.broker.tensors import Tensor
from adaserve.workers.execute import BatchOutcome, ItemOutcome
from adaserve.workers.results import finished

log = logging.getLogger(__name__)
T = TypeVar("T")


class Retry(Protocol):
    """Runs a Redis call again through an outage (the worker's ``_retry``)."""

    def __call__(self, fn: Callable[[], T]) -> T: ...
INTERMEDIATE = "intermediate"

_FORWARD = """
-- KEYS[1] stream of the batch that ran, KEYS[2] stream of the next pool, KEYS[3] telemetry
-- ARGV[1] group, ARGV[2] entry id, ARGV[3] batches maxlen, ARGV[4] telemetry maxlen,
-- ARGV[5] batch.finished event, ARGV[6..] the forwarded batches
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return -1 end
for i = 6, #ARGV do
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'm', ARGV[i])
end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'm', ARGV[5])
return #ARGV - 5
"""


def next_batches(batch: Batch, outcome: BatchOutcome, *, now_ms: float, limits: Limits) -> tuple[list[bytes], dict[int, str]]:
    """The encoded batches that carry ``batch``'s completed requests to the next part, each within
    the message limit, and the requests that cannot go on (index -> reason)."""
    place = batch.plan.placement
    assert outcome.next_variant is not None and place.next_pool
    plan = batch.plan.model_copy(update={
        "variant": outcome.next_variant, "exit": None,
        "placement": Placement(pool=place.next_pool, part=(place.part or 1) + 1, prev_pool=place.pool)})
    moving: list[tuple[int, BatchItem]] = []
    failed: dict[int, str] = {}
    for i, (item, out) in enumerate(zip(batch.items, outcome.items)):
        if out.status != "completed":
            continue
        row = out.outputs.get(INTERMEDIATE)
        if row is None:
            failed[i] = f"runtime_error: part {place.part or 1} returned no {INTERMEDIATE!r} tensor"
            continue
        tensor = Tensor.model_construct(dtype=row.dtype, shape=tuple(row.shape), data=row.data)
        moving.append((i, item.model_copy(update={"inputs": {INTERMEDIATE: tensor},
                                                  "prior_exec_ms": item.prior_exec_ms + out.exec_ms})))
    raws: list[bytes] = []
    pieces = [moving] if moving else []
    while pieces:
        piece = pieces.pop()
        nb = Batch.model_construct(v=1, type="batch", id=f"{batch.id}.{len(raws)}", model=batch.model, plan=plan,
                                   items=[it for _, it in piece], dispatched_ms=now_ms)
        raw = encode(nb)
        if len(raw) <= limits.max_message_bytes:
            raws.append(raw)
        elif len(piece) > 1:  # too big for one message: halve it (the intermediate is per request)
            pieces += [piece[len(piece) // 2:], piece[:len(piece) // 2]]
        else:
            failed[piece[0][0]] = (f"limit: the {INTERMEDIATE} tensor of this request encodes to {len(raw)} bytes, "
                                   f"above the message limit of {limits.max_message_bytes}")
    return raws, failed


class Forwarder:
    def __init__(self, r: redis.Redis[bytes], settings: Settings, fin: Finalizer, *, limits: Limits,
                 worker: str, pool: str, device: str) -> None:
        self._r, self._s, self._fin, self._limits = r, settings, fin, limits
        self._keys = Keys(settings.namespace)
        self._worker, self._pool, self._device = worker, pool, device
        self._script = r.register_script(_FORWARD)

    def forward(self, entry: Entry, batch: Batch, outcome: BatchOutcome, *,
                retry: Retry) -> int:
        """End the failed requests, then forward the rest and ack ``entry`` in one step; returns
        how many batches were forwarded (0 when another delivery of the entry already did)."""
        raws, broken = next_batches(batch, outcome, now_ms=outcome.finished_ms, limits=self._limits)
        items = [ItemOutcome("failed", broken[i]) if i in broken else it for i, it in enumerate(outcome.items)]
        ended = [i for i, it in enumerate(items) if it.status == "failed"]
        if ended:
            gone = batch.model_copy(update={"items": [batch.items[i] for i in ended]})
            packed, _ = finished(gone, BatchOutcome(outcome.variant, [items[i] for i in ended], outcome.started_ms,
                                                    outcome.finished_ms, outcome.exec_ms),
                                 worker=self._worker, pool=self._pool, device=self._device)
            retry(lambda: self._fin.end_packed(packed))
        event = self._event(batch, outcome, items, ended, forwarded=len(batch.items) - len(ended))
        stream = self._keys.batches(batch.plan.placement.next_pool or "")
        keys = [entry.stream, stream, self._keys.telemetry]
        args: list[Any] = [self._pool, entry.id, self._s.stream_maxlen, self._s.telemetry_maxlen, event, *raws]
        n = int(retry(lambda: self._script(keys=keys, args=args)))
        if n < 0:
            log.info("batch %s (entry %s) was already forwarded by another delivery", batch.id, entry.id)
            return 0
        return n

    def _event(self, batch: Batch, outcome: BatchOutcome, items: list[ItemOutcome], ended: list[int],
               forwarded: int) -> bytes:
        """``batch.finished`` of the part that ran: its size and time for the pool's figures; as
        items only the requests that ended here (the rest end, and are counted, after the last part)."""
        fin = outcome.finished_ms
        timings = []
        for i in ended:
            it, out = batch.items[i], items[i]
            timings.append({"job_id": it.job_id, "request_id": it.request_id, "app": it.app, "run": it.run,
                            "status": "failed", "queue_ms": 0.0, "exec_ms": out.exec_ms,
                            "total_ms": max(fin - it.submitted_ms, 0.0), "exit": None, "confidence": None})
        return msgpack.packb({
            "v": 1, "type": "event", "ts": fin, "event": "batch.finished", "batch_id": batch.id, "pool": self._pool,
            "worker": self._worker, "model": batch.model, "variant": outcome.variant, "device": self._device,
            "size": len(batch.items), "exec_ms": outcome.exec_ms, "items": timings,
            "part": batch.plan.placement.part, "next_pool": batch.plan.placement.next_pool,
            "forwarded": forwarded,
        }, use_bin_type=True)
