"""The worker's heartbeat: its state in the workers hash and on telemetry, on its own connection.

Each beat also re-syncs the server clock and renews the lease of every batch the worker holds
(``XCLAIM ... JUSTID`` to itself resets the entry's idle time without counting a delivery), so
only batches of workers that stopped beating ever look idle to a reclaimer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis

from adaserve.broker.clock import ServerClock
from adaserve.broker.codec import encode
from adaserve.broker.connection import connect
from adaserve.broker.errors import BrokerUnavailable
from adaserve.broker.events import WorkerHeartbeat, WorkerStopped
from adaserve.broker.keys import Keys
from adaserve.broker.outage import Outage, is_transient
from adaserve.broker.settings import Settings
from adaserve.workers.gpu import GpuMonitor
from adaserve.workers.slots import Slots

log = logging.getLogger(__name__)


class Heartbeat:
    def __init__(
        self, settings: Settings, *, worker: str, pool: str, device: str, slots: Slots,
        models: Callable[[], list[str]], clock: ServerClock, gpu: GpuMonitor | None = None,
        inputs: Callable[[], dict[str, dict[str, dict[str, object]]]] = dict, outage: Outage | None = None,
        memory_mb: int | None = None,
    ) -> None:
        self.memory_mb = memory_mb
        self._s = settings
        # shared with the reader: an outage is logged once for the whole worker
        self._outage = outage or Outage(f"worker {worker}", max_s=settings.max_outage_s, logger=log)
        self._keys = Keys(settings.namespace)
        self._stream = self._keys.batches(pool)
        self.worker, self.pool, self.device = worker, pool, device
        self._slots = slots
        self._models = models
        self._inputs = inputs
        self._clock = clock
        self._gpu = gpu
        self.draining = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._r: redis.Redis[bytes] = connect(settings, block_ms=0)

    def event(self) -> WorkerHeartbeat:
        return WorkerHeartbeat(
            ts=self._clock.now_ms(), worker=self.worker, pool=self.pool,
            slots=0 if self.draining else self._slots.total, busy=self._slots.busy(),
            models=self._models(), inputs=self._inputs(), device=self.device,
            gpu=self._gpu.figures() if self._gpu is not None else None, memory_mb=self.memory_mb,
        )

    def beat(self) -> WorkerHeartbeat:
        """One heartbeat now (also called directly at start and when draining begins)."""
        self._clock.sync(self._r)
        ev = self.event()
        raw = encode(ev)
        pipe = self._r.pipeline(transaction=False)
        pipe.hset(self._keys.workers, self.worker, raw)
        pipe.xadd(self._keys.telemetry, {b"m": raw}, maxlen=self._s.telemetry_maxlen, approximate=True)
        self._renew(pipe)
        pipe.execute()
        return ev

    def renew(self) -> None:
        """Reset the idle time of every batch held, so no reclaimer takes it while it waits or runs."""
        pipe = self._r.pipeline(transaction=False)
        if self._renew(pipe):
            pipe.execute()

    def _renew(self, pipe: redis.client.Pipeline[bytes]) -> bool:
        held = self._slots.ids()
        if held:
            pipe.xclaim(self._stream, self.pool, self.worker, 0, held, justid=True)
        return bool(held)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{self.worker}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        # Leases are renewed at least three times per reclaim idle limit, even when heartbeats
        # are further apart than that: a held batch must never look idle to a reclaimer.
        tick = min(self._s.heartbeat_s, self._s.reclaim_idle_ms / 3000.0)
        next_beat = time.monotonic() + self._s.heartbeat_s
        while not self._stop.wait(tick):
            try:
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + self._s.heartbeat_s
                    self.beat()
                else:
                    self.renew()
                self._outage.recovered()
            except redis.RedisError as exc:
                if not is_transient(exc):
                    log.warning("heartbeat failed: %s", exc)  # the next beat retries; a gap is tolerated
                    continue
                try:
                    self._outage.failed(exc)  # the tick paces the retries
                except BrokerUnavailable:
                    pass  # the reader gives up for the worker
            except Exception:
                log.exception("heartbeat failed")

    def stop(self, *, goodbye: bool = True) -> None:
        """Stop beating; with ``goodbye``, leave the workers hash and say ``worker.stopped``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._s.heartbeat_s + 5.0)
        if goodbye:
            try:
                ev = encode(WorkerStopped(ts=self._clock.now_ms(), worker=self.worker, pool=self.pool))
                pipe = self._r.pipeline(transaction=False)
                pipe.hdel(self._keys.workers, self.worker)
                pipe.xadd(self._keys.telemetry, {b"m": ev}, maxlen=self._s.telemetry_maxlen, approximate=True)
                pipe.execute()
            except redis.RedisError as exc:
                log.warning("could not announce the stop: %s", exc)
        if self._gpu is not None:
            self._gpu.close()
        self._r.close()
