"""The end of a batch on Redis: one finaliser call that publishes, acks and emits the event.

Results reach reply streams only through the finaliser script, so a batch that is finished twice (a
reclaim racing a slow worker) still yields one result per request. A batch with failed requests is
dead-lettered *before* the finaliser acks it: a crash in between redelivers it, which at worst
repeats the dead letter, while the results stay exactly once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import redis

from adaserve.broker.clock import ServerClock
from adaserve.broker.codec import encode, unpack
from adaserve.broker.direct import Direct
from adaserve.broker.errors import InvalidMessage
from adaserve.broker.events import BatchFinished, RequestTiming
from adaserve.broker.finalize import Ending, Finalizer, Packed
from adaserve.broker.keys import Keys
from adaserve.broker.messages import Result
from adaserve.broker.outage import Outage, ride_out
from adaserve.broker.settings import Limits, Settings, default_limits
from adaserve.broker.streams import Entry, ack, dead_letter
from adaserve.workers.execute import BatchOutcome
from adaserve.workers.forward import Forwarder
from adaserve.workers.results import all_failed, deadlettered, failed_from_raw, finished, finished_columns
from adaserve.workers.wire import AnyBatch, WireBatch

log = logging.getLogger(__name__)
T = TypeVar("T")


class Keep:
    """Which finished batches keep their stream entry after the ack: one every ``every_s``.

    ORLOJ's online profiler re-runs a finished request alone and reads its inputs from its batch,
    still in the stream (``workers/rerun.py``); it picks among the batches whose
    ``batch.finished`` does not say ``kept: false``. Every other batch is deleted by the
    finaliser as it is acked: a stream holding each batch until the planner's trim
    (``ADASERVE_CONSUMED_KEEP_S``) made the server hold seconds of tensors and spend about a
    third of its CPU on that memory (docs/overhead.md, eighteenth round). 20 a second per worker
    give the profiler, which takes at most 16 requests every 5 s, more than it asks for."""

    def __init__(self, every_s: float = 0.05, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s, self._clock = every_s, clock
        self._next = float("-inf")

    def take(self) -> bool:
        """Whether the batch finishing now keeps its entry."""
        now = self._clock()
        if now < self._next:
            return False
        self._next = now + self.every_s
        return True


class Publisher:
    def __init__(self, r: redis.Redis[bytes], settings: Settings, *, worker: str, pool: str,
                 device: str, clock: ServerClock, limits: Limits | None = None, outage: Outage | None = None,
                 stop: threading.Event | None = None) -> None:
        self._r = r
        self._outage = outage or Outage(f"worker {worker}", max_s=settings.max_outage_s, logger=log)
        self._stop = stop
        self._s = settings
        self._keys = Keys(settings.namespace)
        self._fin = Finalizer(r, settings, direct=Direct(r))  # called from the publisher's thread only
        self._worker, self._pool, self._device = worker, pool, device
        self._clock = clock
        self.group = pool
        self._keep = Keep()
        self._forwarder = Forwarder(r, settings, self._fin, limits=limits or default_limits(), worker=worker, pool=pool,
                                    device=device)

    def finish(self, entry: Entry, batch: AnyBatch, outcome: BatchOutcome, deliveries: int = 1) -> int:
        """Publish the batch's results; returns how many were new (0 for a duplicate). After a
        non-last part of a split model the requests go on to the next pool instead (``forward``)."""
        if outcome.next_variant is not None and len(outcome.failed) < len(outcome.items):
            if outcome.failed:
                code, detail = outcome.failure_summary()
                self._dead(entry, code, detail, batch.id, deliveries)
            full = batch.full() if isinstance(batch, WireBatch) else batch  # the forward copies pydantic items
            self._forwarder.forward(entry, full, outcome, retry=self._retry)
            return 0
        cols = outcome.columns
        kept = self._keep.take()
        if cols is not None and "confidence" not in cols.outputs:  # (a language model's tokens take the maps)
            packed, entries, event = finished_columns(batch, outcome, cols, worker=self._worker, pool=self._pool,
                                                      device=self._device, kept=kept)
            return self._retry(lambda: self._fin.end_packed(packed, ack=(entry.stream, self.group, entry.id),
                                                            event=event, entries=entries, delete=not kept))
        packed, event = finished(batch, outcome, worker=self._worker, pool=self._pool, device=self._device, kept=kept)
        if outcome.failed:
            code, detail = outcome.failure_summary()
            self._dead(entry, code, detail, batch.id, deliveries)
        return self._retry(lambda: self._fin.end_packed(packed, ack=(entry.stream, self.group, entry.id), event=event,
                                                        delete=not kept))

    def reject(self, entry: Entry, *, reason: str, detail: str, batch: AnyBatch | None, deliveries: int) -> int:
        """Dead-letter a batch that cannot be served and end each of its requests as ``failed``."""
        now = self._clock.now_ms()
        text = f"{reason}: {detail}"
        if batch is not None:
            packed, event = finished(batch, all_failed(batch, text, now), worker=self._worker,
                                     pool=self._pool, device=self._device)
            batch_id = batch.id
        else:
            body = _body(entry.raw)
            results = failed_from_raw(body, text, worker=self._worker, now_ms=now)
            raw_id = body.get("id")
            batch_id = raw_id if isinstance(raw_id, str) and len(raw_id) <= 256 else entry.id
            event = self._event(batch_id, body.get("model"), [res for res, _ in results], now)
            packed = [Packed.of(Ending(res, reply)) for res, reply in results]
        self._dead(entry, reason, detail, batch_id, deliveries)
        return self._retry(lambda: self._fin.end_packed(packed, ack=(entry.stream, self.group, entry.id), event=event))

    def drop(self, entry: Entry) -> None:
        """Ack an entry that no longer has a body (trimmed or deleted while pending)."""
        self._retry(lambda: ack(self._r, entry.stream, self.group, entry.id))

    def _dead(self, entry: Entry, reason: str, detail: str, batch_id: str, deliveries: int) -> None:
        log.warning("dead-lettering batch %s (entry %s): %s: %s", batch_id, entry.id, reason, detail)
        ev = deadlettered(batch_id, self._pool, deliveries, reason, self._clock.now_ms())

        def send() -> None:
            dead_letter(self._r, self._keys.dead, reason=reason, detail=detail, source=entry.stream,
                        entry_id=entry.id, raw=entry.raw, maxlen=self._s.stream_maxlen)
            self._r.xadd(self._keys.telemetry, {b"m": ev}, maxlen=self._s.telemetry_maxlen, approximate=True)

        self._retry(send)

    def _event(self, batch_id: str, model: object, results: list[Result], now: float) -> bytes:
        items = [RequestTiming(job_id=r.job_id, request_id=r.request_id, app=r.app, status="failed",
                               queue_ms=0.0, exec_ms=0.0, total_ms=r.timings.total_ms) for r in results]
        return encode(BatchFinished(ts=now, batch_id=batch_id, pool=self._pool, worker=self._worker,
                                    model=model if isinstance(model, str) else "", device=self._device,
                                    size=len(items), exec_ms=0.0, items=items))

    def _retry(self, fn: Callable[[], T]) -> T:
        """Ride out a broker outage; every call made through here is idempotent or harmless twice.
        Once the worker is stopping, an outage ends the wait (``BrokerUnavailable``): the batch
        stays pending and is reclaimed, rather than holding up the shutdown."""
        return ride_out(fn, self._outage, stop=self._stop)


def _body(raw: bytes | None) -> dict[str, object]:
    try:
        return unpack(raw) if raw is not None else {}
    except InvalidMessage:
        return {}
