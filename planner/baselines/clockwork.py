"""Clockwork: earliest deadline first with one point estimate of latency per batch size.

From Gujarati et al., "Serving DNNs like Clockwork: Performance Predictability from the Bottom
Up" (OSDI 2020). Requests wait in deadline order; the controller picks the largest supported
batch size whose predicted latency lets the most urgent request finish in time, and drops
requests that cannot finish even alone. Latency is a single predicted value per batch size
(here from the mean execution time, ``MeanLatency``, as ORLOJ Sec. 2.3 describes).

Clockwork plans ahead: it sends the next batch as an action to start when the worker is predicted
to be free, and a worker rejects an action it cannot start within the action's window. With
``action_window_s`` set, that is emulated: when the slot frees later than predicted by more than
the window, the batch that had been planned for it fails (its requests end as expired) — the
"fail every other batch" behaviour ORLOJ observed with variable execution times.
``action_window_s=None`` turns the emulation off (plain EDF with a point estimate).
"""

from __future__ import annotations

import heapq

from adaserve.planner.baselines.point import MeanLatency
from adaserve.planner.core import Decision, Feedback, Pending, Scheduler
from adaserve.planner.deadlines import DeadlineHeap

__all__ = ["ClockworkScheduler"]


class ClockworkScheduler(Scheduler):
    name = "clockwork"

    def __init__(self, latency: MeanLatency | None = None, *, sizes: tuple[int, ...] = (1, 2, 4, 8, 16),
                 action_window_s: float | None = 0.005) -> None:
        if not sizes or min(sizes) < 1:
            raise ValueError("sizes must be positive batch sizes")
        if action_window_s is not None and action_window_s < 0:
            raise ValueError("action_window_s must be non-negative (or None)")
        self.latency = latency if latency is not None else MeanLatency()
        self.sizes = tuple(sorted(sizes))
        self.window = action_window_s
        self._q = DeadlineHeap()
        self._free_at: list[float] = []  # predicted completion of each batch in flight
        self._done: list[float] = []  # predicted completion of batches that finished, not yet checked
        self.rejected_batches = 0

    def __len__(self) -> int:
        return len(self._q)

    def add(self, item: Pending, now: float) -> None:
        self._q.push(item)

    def expire(self, now: float) -> list[Pending]:
        return self._q.expire_before(now + self.latency.predict(1))

    def _form(self, now: float, max_size: int) -> list[Pending]:
        first = self._q.earliest()
        if first is None:
            return []
        k = 1
        for size in self.sizes:
            if size <= min(max_size, len(self._q)) and now + self.latency.predict(size) <= first:
                k = size
        return self._q.pop(k)

    def next_batch(self, now: float, max_size: int) -> Decision:
        expired = self.expire(now)
        while self._done:
            predicted = self._done.pop()
            if self.window is not None and now > predicted + self.window:
                failed = self._form(predicted, max_size)
                if failed:
                    self.rejected_batches += 1
                    expired.extend(failed)
                    expired.extend(self.expire(now))
        batch = self._form(now, max_size)
        if not batch:
            return Decision(expired=expired)
        predicted_s = self.latency.predict(len(batch))
        heapq.heappush(self._free_at, now + predicted_s)
        return Decision(batch=batch, expired=expired, predicted_s=predicted_s)

    def observe(self, feedback: Feedback) -> None:
        # The batch that finished is taken to be the one predicted to finish first.
        if self._free_at:
            self._done.append(heapq.heappop(self._free_at))
        self.latency.update(feedback)

    def earliest_deadline(self) -> float | None:
        return self._q.earliest()
