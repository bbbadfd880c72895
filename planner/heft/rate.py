"""The batch size for an arrival rate (StarONNX Sec. 4.2, Fig. 2b), and the rate itself (pure).

At ``rate`` requests per second a batch of ``b`` is complete ``(b - 1) / rate`` after its first
request arrived; it then runs ``latency(b)``. A pool of ``servers`` workers keeps up when it
finishes ``b`` requests at least as fast as they arrive, ``latency(b) <= servers * b / rate``;
otherwise the queue, and the first request's latency, grow without bound. The chosen size is the
one that keeps up and minimises the first request's (the batch's maximum) latency
``(b - 1) / rate + latency(b)``; when no size keeps up, the one with the highest throughput.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field


def max_latency(b: int, rate: float, latency: Callable[[int], float], servers: int = 1) -> float:
    """Steady-state maximum request latency with batches of ``b`` (inf when the pool falls behind)."""
    run = latency(b)
    if rate > 0 and run > servers * b / rate * (1 + 1e-9):
        return float("inf")
    return (b - 1) / rate + run if rate > 0 else run


def batch_for_rate(rate: float, latency: Callable[[int], float], max_batch: int, servers: int = 1) -> int:
    """The batch size that keeps up with ``rate`` at the least maximum latency (ties: the smaller)."""
    if max_batch < 1:
        raise ValueError("max_batch must be >= 1")
    if rate <= 0:
        return 1
    best, best_lat = 0, float("inf")
    for b in range(1, max_batch + 1):
        lat = max_latency(b, rate, latency, servers)
        if lat < best_lat:
            best, best_lat = b, lat
    if best:
        return best
    return max(range(1, max_batch + 1), key=lambda b: (b / max(latency(b), 1e-12), -b))


@dataclass
class RateMeter:
    """Arrivals per second over the last ``window_s`` (at least two arrivals, else 0)."""

    window_s: float = 2.0
    cap: int = 4096
    _t: deque[float] = field(default_factory=deque)

    def arrived(self, t: float, n: int = 1) -> None:
        for _ in range(min(n, self.cap)):
            self._t.append(t)
        while len(self._t) > self.cap:
            self._t.popleft()

    def rate(self, now: float) -> float:
        while self._t and self._t[0] < now - self.window_s:
            self._t.popleft()
        if len(self._t) < 2:
            return 0.0
        span = max(now - self._t[0], 1e-6)
        return (len(self._t) - 1) / span
