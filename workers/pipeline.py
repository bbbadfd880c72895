"""The reader and publisher stages of the worker pipeline, and the work item they pass on."""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass

import redis

from adaserve.broker.clock import ServerClock
from adaserve.broker.direct import Direct
from adaserve.broker.errors import BrokerUnavailable, InvalidMessage
from adaserve.broker.outage import Outage, is_transient
from adaserve.broker.settings import Limits, Settings
from adaserve.broker.streams import Entry, deliveries, ensure_group, read_group
from adaserve.workers.execute import BatchOutcome
from adaserve.workers.publish import Publisher
from adaserve.workers.reclaim import Reclaimer
from adaserve.workers.slots import Slots
from adaserve.workers.wire import WireBatch, read_batch

log = logging.getLogger(__name__)


@dataclass
class Work:
    entry: Entry
    deliveries: int = 1
    batch: WireBatch | None = None
    outcome: BatchOutcome | None = None
    reject: tuple[str, str] | None = None  # (reason code, detail): dead-letter instead of running


class Reader:
    """Reads (and reclaims) no more batches than there are free slots, decodes them, queues them."""

    def __init__(
        self, r: redis.Redis[bytes], settings: Settings, *, pool: str, worker: str, slots: Slots,
        limits: Limits, reclaimer: Reclaimer, clock: ServerClock,
        todo: queue.SimpleQueue[Work | None], done: queue.SimpleQueue[Work | None], outage: Outage | None = None,
    ) -> None:
        self._r = r
        self._direct = Direct(r)  # its read of batches, once per batch: this thread's alone
        self._s = settings
        self.stream = reclaimer.stream
        self.pool, self.worker = pool, worker
        self._slots = slots
        self._limits = limits
        self._reclaimer = reclaimer
        self._clock = clock
        self._todo, self._done = todo, done
        self.outage = outage or Outage(f"worker {worker}", max_s=settings.max_outage_s, logger=log)
        self.gave_up: BrokerUnavailable | None = None
        # A worker restarted under the same name first serves what its previous life left pending.
        self._own_cursor: str | None = "0"

    def loop(self, stop: threading.Event) -> None:
        next_reclaim = 0.0
        try:
            while not stop.is_set():
                try:
                    if time.monotonic() >= next_reclaim:
                        self._reclaim()
                        next_reclaim = time.monotonic() + self._s.reclaim_idle_ms / 2000.0
                    free = self._slots.wait_free(self._s.block_ms / 1000.0)
                    if free and not stop.is_set():
                        self._read(free)
                    self.outage.recovered()
                except redis.RedisError as exc:
                    if is_transient(exc):
                        stop.wait(self.outage.failed(exc))
                    elif "NOGROUP" in str(exc):  # stream or group deleted under us: recreate it
                        self._regroup(stop)
                    else:
                        log.warning("redis refused a read (%s); retrying in 1 s", exc)
                        stop.wait(1.0)
                except BrokerUnavailable as exc:
                    log.error("%s; the worker stops", exc)
                    self.gave_up = exc
                    stop.set()
                except Exception:
                    log.exception("unexpected error in the reader; retrying in 1 s")
                    stop.wait(1.0)
        finally:
            self._todo.put(None)

    def _regroup(self, stop: threading.Event) -> None:
        log.error("the consumer group of pool %s was gone: the server lost its data (a restart without "
                  "persistence, or a failover to a replica without it); batches it held are lost", self.pool)
        try:
            ensure_group(self._r, self.stream, self.pool)
        except redis.RedisError:
            stop.wait(1.0)

    def _read(self, free: int) -> None:
        cursor = self._own_cursor
        entries = read_group(self._direct, {self.stream: cursor or ">"}, self.pool, self.worker,
                             count=free, block_ms=None if cursor else self._s.block_ms)
        if cursor is not None:
            self._own_cursor = entries[-1].id if entries else None
        for entry in entries:
            n = 1 if cursor is None else deliveries(self._r, self.stream, self.pool, entry.id)
            self._accept(entry, n)

    def _reclaim(self) -> None:
        free = self._slots.free()
        for c in self._reclaimer.claim(free):
            self._accept(c.entry, c.deliveries)
        try:
            self._reclaimer.prune(self._clock.now_ms())
        except redis.ResponseError as exc:  # housekeeping only: never worth stopping for
            log.debug("prune skipped: %s", exc)

    def _accept(self, entry: Entry, n: int) -> None:
        self._slots.hold(entry.id)
        work = Work(entry, deliveries=n)
        if entry.raw is None:
            self._done.put(work)  # nothing to run: the publisher only acks it
            return
        if n > self._s.max_deliveries:
            work.reject = ("max_deliveries", f"delivered {n} times (limit {self._s.max_deliveries})")
        try:
            work.batch = read_batch(entry.raw, self._limits)
        except InvalidMessage as exc:
            work.reject = work.reject or (exc.reason, exc.detail)
        (self._done if work.reject else self._todo).put(work)


def publish_loop(publisher: Publisher, slots: Slots, done: queue.SimpleQueue[Work | None]) -> None:
    """Finish each batch (results + ack + event in one call) and free its slot."""
    while True:
        work = done.get()
        if work is None:
            return
        try:
            _publish(publisher, work)
        except BrokerUnavailable as exc:
            log.warning("batch entry %s left pending (%s); a worker reclaims it once the broker is back",
                        work.entry.id, exc)
        except Exception:
            log.exception("could not finish batch entry %s", work.entry.id)
        finally:
            slots.release(work.entry.id)


def _publish(publisher: Publisher, work: Work) -> None:
    if work.entry.raw is None:
        publisher.drop(work.entry)
    elif work.reject is not None:
        reason, detail = work.reject
        publisher.reject(work.entry, reason=reason, detail=detail, batch=work.batch, deliveries=work.deliveries)
    elif work.batch is not None and work.outcome is not None:
        try:
            publisher.finish(work.entry, work.batch, work.outcome, work.deliveries)
        except (redis.ConnectionError, redis.TimeoutError, BrokerUnavailable):
            raise
        except Exception as exc:
            log.exception("results of batch %s could not be published", work.batch.id)
            publisher.reject(work.entry, reason="runtime_error", detail=f"{type(exc).__name__}: {exc}",
                             batch=work.batch, deliveries=work.deliveries)
