"""A planner that holds requests and sends nothing says why, once in a while.

Live runs of the benchmark found planners that stopped dispatching for the rest of their life while
jobs kept arriving: every request then expired, and nothing in the logs said which of the
planner's beliefs (no free slot, a pool's wait, a latency prediction) kept batches back. The
watch notices "requests pending, pools known, no batch for ``after_ms``" and asks the shell for
a line of the state that decides dispatch; it repeats at most every ``every_ms`` while it lasts.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["StallWatch"]


@dataclass
class StallWatch:
    after_ms: float = 1000.0
    every_ms: float = 5000.0
    _last_sent: float | None = None
    _last_told: float | None = None
    _pending_since: float | None = None

    def sent(self, now_ms: float) -> None:
        self._last_sent, self._last_told = now_ms, None

    def idle(self, now_ms: float) -> None:
        """Nothing pending: a quiet planner is not a stalled one."""
        self._pending_since = self._last_told = None

    def due(self, now_ms: float) -> bool:
        """Whether to report a stall now (requests are pending)."""
        if self._pending_since is None:
            self._pending_since = now_ms
        since = max(self._pending_since, self._last_sent or self._pending_since)
        if now_ms - since < self.after_ms:
            return False
        if self._last_told is not None and now_ms - self._last_told < self.every_ms:
            return False
        self._last_told = now_ms
        return True

    def stalled_ms(self, now_ms: float) -> float:
        start = self._pending_since if self._pending_since is not None else now_ms
        return now_ms - max(start, self._last_sent or start)
