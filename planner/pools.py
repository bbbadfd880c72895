"""Worker pools as the planner sees them: live workers, their slots, the models they serve.

Pure bookkeeping fed by heartbeats; the in-flight count comes from the server (the pool group's
``lag + pending``), so several planners and planner restarts all agree on it.

A pool of long batches holds fewer than its slots (``slot_limit``). A worker's slots are sized
for small models: eight 2 ms batches keep it busy through the planner's slow steps. Eight
batches of a language model are a quarter of a second of work, and a request sent into them
waits behind all of them instead of joining a larger batch at the planner. Live, two apps of
ee-lm-xs finished 0.30, 0.48 and 0.26 of their requests with eight slots and 0.64, 0.54 and 0.50
with two (EDF, three seeds; docs/orloj.md, "Twenty-ninth session").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from adaserve.broker.events import WorkerHeartbeat


@dataclass
class PoolView:
    name: str
    slots: int = 0
    inflight: int = 0
    models: set[str] = field(default_factory=set)
    memory_mb: float | None = None  # the smallest budget its workers advertise (``--memory-mb``)
    workers: int = 0
    limit: int | None = None  # batches it may hold now (``slot_limit``); None: its slots

    @property
    def free(self) -> int:
        return max((self.slots if self.limit is None else self.limit) - self.inflight, 0)


MIN_HELD = 2  # one running, one decoded and ready


def slot_limit(slots: int, workers: int, queue_ms: float, batch_ms: float | None) -> int:
    """How many batches a pool may hold: per worker, the one running and as many more as it takes
    to queue ``queue_ms`` of batches of the pool's recent length ``batch_ms``
    (``state.BatchLength``), at least ``MIN_HELD`` and at most the pool's ``slots``. ``queue_ms``
    0 or no batch heard of yet: the slots."""
    if queue_ms <= 0 or batch_ms is None or not batch_ms > 0 or slots <= 0:
        return slots
    per_worker = max(MIN_HELD, 1 + math.ceil(queue_ms / batch_ms))
    return min(slots, per_worker * max(workers, 1))


class Pools:
    def __init__(self, ttl_s: float) -> None:
        self._ttl_ms = ttl_s * 1000.0
        self._workers: dict[str, WorkerHeartbeat] = {}
        self.views: dict[str, PoolView] = {}
        self.inputs: dict[str, dict[str, dict[str, Any]]] = {}

    def heartbeat(self, hb: WorkerHeartbeat) -> None:
        prev = self._workers.get(hb.worker)
        if prev is None or hb.ts >= prev.ts:
            self._workers[hb.worker] = hb

    def forget(self, worker: str) -> None:
        self._workers.pop(worker, None)

    def refresh(self, now_ms: float) -> None:
        """Rebuild the pool views from heartbeats younger than the TTL."""
        self._workers = {w: hb for w, hb in self._workers.items() if now_ms - hb.ts <= self._ttl_ms}
        views: dict[str, PoolView] = {}
        inputs: dict[str, dict[str, dict[str, Any]]] = {}
        for hb in self._workers.values():
            v = views.setdefault(hb.pool, PoolView(hb.pool))
            v.slots += hb.slots
            v.workers += 1
            v.models.update(hb.models)
            inputs.update(hb.inputs)
            mb = getattr(hb, "memory_mb", None)
            if isinstance(mb, (int, float)) and mb > 0:
                v.memory_mb = float(mb) if v.memory_mb is None else min(v.memory_mb, float(mb))
        for name, v in views.items():
            old = self.views.get(name)
            v.inflight = old.inflight if old else 0
        self.views, self.inputs = views, inputs

    def serving(self, model: str) -> list[PoolView]:
        """Pools that serve ``model``, those with a GPU first."""
        out = [v for v in self.views.values() if model in v.models]
        return sorted(out, key=lambda v: (not v.name.startswith("gpu"), v.name))

    def known(self, model: str) -> bool:
        return any(model in v.models for v in self.views.values())

    @property
    def workers(self) -> int:
        return len(self._workers)
