"""Wall-clock milliseconds on the server's clock.

Submission and deadline times are stamped by the server (entry ids, ``TIME`` in Lua), so a planner
or worker on another host must correct its own clock before computing deadlines, queue and total
times. The offset is re-measured periodically (the worker's heartbeat thread, the planner's
housekeeping); the estimate with the smallest round trip of the recent ones
wins, since a slow round trip leaves the most doubt about when the server read its clock.
"""

from __future__ import annotations

import threading
import time
from collections import deque

import redis


class ServerClock:
    def __init__(self, window: int = 8) -> None:
        self._offset_ms = 0.0
        self._samples: deque[tuple[float, float]] = deque(maxlen=window)  # (rtt, offset)
        self._lock = threading.Lock()

    @property
    def offset_ms(self) -> float:
        return self._offset_ms

    def now_ms(self) -> float:
        return time.time() * 1000.0 + self._offset_ms

    def sync(self, r: redis.Redis[bytes]) -> float:
        """Measure the offset once with ``TIME``; returns the offset now in use."""
        t0 = time.time() * 1000.0
        sec, usec = r.time()
        t1 = time.time() * 1000.0
        server = sec * 1000.0 + usec / 1000.0
        with self._lock:
            self._samples.append((t1 - t0, server - (t0 + t1) / 2.0))
            self._offset_ms = min(self._samples)[1]
            return self._offset_ms
