"""A planner that holds requests and sends nothing says why, once in a while.

Live runs of the benchmark found planners that stopped dispatching for the rest of their life while
jobs kept arriving: every request then expired, and nothing in the logs said which of the
planner's beliefs (no free slot, a pool's wait, a latency prediction) kept batches back. The
watch notices "requests pending, pools known, no batch for ``after_ms``" (repeating at most every
``every_ms`` while it lasts), and ``describe`` gives the line of state that decides dispatch
(found so: a latency fit that believed a batch of one took 38 ms, docs/orloj.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adaserve.planner.core import Scheduler
    from adaserve.planner.follow import Follower

__all__ = ["StallWatch", "describe"]


@dataclass
class StallWatch:
    after_ms: float = 1000.0
    every_ms: float = 5000.0
    _last_sent: float | None = None
    _last_told: float | None = None
    _pending_since: float | None = None

    def sent(self, now_ms: float) -> None:
        self._last_sent, self._last_told = now_ms, None

    def idle(self) -> None:
        """Nothing pending: a quiet planner is not a stalled one."""
        self._pending_since = self._last_told = None

    def due(self, now_ms: float) -> bool:
        """Whether to report a stall now (requests are pending)."""
        if self._pending_since is None:
            self._pending_since = now_ms
        if self.stalled_ms(now_ms) < self.after_ms:
            return False
        if self._last_told is not None and now_ms - self._last_told < self.every_ms:
            return False
        self._last_told = now_ms
        return True

    def stalled_ms(self, now_ms: float) -> float:
        """Since requests began to wait or the last batch went out, whichever is later."""
        start = self._pending_since if self._pending_since is not None else now_ms
        return now_ms - (start if self._last_sent is None else max(start, self._last_sent))


def describe(follow: Follower, scheds: Mapping[str, Scheduler], now_ms: float) -> str:
    """What decides dispatch now: each pool's slots, batch limit, in-flight batches and waits; each model's
    pending requests, time left to the most urgent and the policy's own belief."""
    pools = {v.name: {"slots": v.slots, "limit": v.limit, "inflight": v.inflight,
                      "wait_ms": round(follow.wait_ms(v.name, now_ms), 2),
                      "floor_ms": round(follow.floor_ms(v.name, now_ms), 2)} for v in follow.pools.views.values()}
    models = {}
    for m, s in scheds.items():
        first = s.earliest_deadline()
        models[m] = {"pending": len(s), "ahead_ms": round(follow.ahead_ms(m, now_ms), 2),
                     "first_left_ms": None if first is None else round(first * 1000.0 - now_ms, 1), **s.diagnose()}
    return (f"workers {follow.pools.workers}, pools {pools}, models {models}, "
            f"dispatched and not heard finished {len(follow.inflight.dispatched)}")
