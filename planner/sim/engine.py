"""The discrete-event loop: requests arrive, free workers ask the policy for a batch, batches finish.

The policy is the planner's own scheduler object; the clock is virtual (seconds), so a run takes
as long as the policy's code does and nothing else. Workers pull: when one is free it calls
``next_batch`` (as the live planner does when a pool advertises a slot), it runs the batch for
``c0 + c1 * k * max(l)`` and then reports a ``Feedback`` carrying each request's execution time,
as ORLOJ's profiler would. Every request ends exactly once: met, late, or expired.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from adaserve.planner.core import Feedback, Pending, Scheduler

__all__ = ["SimResult", "simulate"]


@dataclass(frozen=True)
class SimResult:
    requests: int
    met: int
    late: int
    expired: int
    batches: int
    mean_batch: float
    busy_s: float
    span_s: float
    # Which requests met their deadline, in arrival order (``np.packbits``): comparing two policies
    # on the same arrivals request by request separates a real difference from noise.
    met_bits: bytes = field(default=b"", repr=False, compare=False)
    rejected: int = 0  # refused on admission (``overloaded``): the pipeline simulator's jobs only
    rejected_bits: bytes = field(default=b"", repr=False, compare=False)  # which, as ``met_bits``

    @property
    def finish_rate(self) -> float:
        return self.met / self.requests if self.requests else 0.0

    @property
    def utilisation(self) -> float:
        return self.busy_s / self.span_s if self.span_s > 0 else 0.0


def simulate(scheduler: Scheduler, arrivals_s: np.ndarray, exec_s: np.ndarray, apps: list[str],
             slo_s: float, *, batch_s: Callable[[int, float], float], workers: int = 1, max_batch: int = 16,
             model: str = "sim", progress: Callable[[int], None] | None = None) -> SimResult:
    """Serve ``arrivals_s`` (sorted) whose execution times are ``exec_s`` with ``scheduler``."""
    n = int(arrivals_s.size)
    if exec_s.size != n or len(apps) != n:
        raise ValueError("one execution time and one app per arrival")
    if workers < 1 or max_batch < 1 or not slo_s > 0:
        raise ValueError("workers >= 1, max_batch >= 1 and a positive SLO are required")
    ended = np.zeros(n, dtype=np.int8)  # 0 pending, 1 met, 2 late, 3 expired
    running: list[tuple[float, int, list[Pending], float]] = []  # (finish, worker, batch, seconds)
    idle = list(range(workers))
    now, i, batches, in_batches, busy = 0.0, 0, 0, 0, 0.0
    tick = max(n // 100, 1)

    def end(items: list[Pending], code: int) -> None:
        for p in items:
            if ended[p.seq]:
                raise RuntimeError(f"request {p.seq} ended twice")
            ended[p.seq] = code

    def dispatch() -> None:
        nonlocal batches, in_batches, busy
        while idle and len(scheduler):
            d = scheduler.next_batch(now, max_batch)
            end(d.expired, 3)
            if not d.batch:
                return
            k = len(d.batch)
            seconds = batch_s(k, max(float(exec_s[p.seq]) for p in d.batch))
            heapq.heappush(running, (now + seconds, idle.pop(), d.batch, seconds))
            batches, in_batches, busy = batches + 1, in_batches + k, busy + seconds

    while i < n or running or len(scheduler):
        t_arr = float(arrivals_s[i]) if i < n else np.inf
        t_fin = running[0][0] if running else np.inf
        if t_arr == np.inf and t_fin == np.inf:
            # Nothing will happen by itself: let the policy expire what is left, then stop.
            nxt = scheduler.earliest_deadline()
            now = max(now, nxt if nxt is not None else now) + 1e-6
            end(scheduler.expire(now), 3)
            dispatch()
            if not running and len(scheduler) and scheduler.earliest_deadline() is None:
                raise RuntimeError("the policy holds requests it neither serves nor expires")
            continue
        if t_fin <= t_arr:
            now, w, batch, seconds = heapq.heappop(running)
            end([p for p in batch if now <= p.deadline + 1e-12], 1)
            end([p for p in batch if now > p.deadline + 1e-12], 2)
            idle.append(w)
            scheduler.observe(Feedback(model, len(batch), seconds, tuple(p.app for p in batch),
                                       tuple(float(exec_s[p.seq]) for p in batch), "sim"))
        else:
            now = t_arr
            while i < n and arrivals_s[i] == now:  # simultaneous arrivals are seen together
                scheduler.add(Pending(str(i), "0", apps[i], model, now, now + slo_s, seq=i), now)
                i += 1
                if progress is not None and i % tick == 0:
                    progress(tick)
        dispatch()
    if np.any(ended == 0):
        raise RuntimeError("some requests never ended")
    counts = np.bincount(ended, minlength=4)
    span = max(now - float(arrivals_s[0]), 1e-9) if n else 0.0
    return SimResult(n, int(counts[1]), int(counts[2]), int(counts[3]), batches,
                     in_batches / batches if batches else 0.0, busy, span, np.packbits(ended == 1).tobytes())
