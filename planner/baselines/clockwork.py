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
``action_window_s=None`` turns the emulation off (plain EDF with a point estimate). A batch
planned while others are in flight is predicted to start when the worker is predicted to be free
(``lanes`` workers, each running one batch at a time, as the live worker and the simulators do).

Whether a slot freed late is the worker's fact, judged on its clock when the slot freed: a
Clockwork worker holds the next action and checks the window itself, so how long the controller
takes to hear of the finish cannot fail an action. When the feedback says when the batch finished
(``Feedback.finished_s``, as the live planner's and the pipeline simulator's do) that time is
compared with the prediction; without it (the paper-table simulator, which observes a batch at its
finish) the time of the next decision is.
Judged by when the live planner read the event, batches were failed for the planner's own
delay: idle, it learns of a finish when the next job arrives (2.4-3.0 ms after it at half load,
more than the 5 ms window for 12-19 % of batches; docs/orloj.md).
"""

from __future__ import annotations

import heapq
import itertools

from adaserve.planner.baselines.point import MeanLatency
from adaserve.planner.core import Decision, Feedback, Pending, Scheduler
from adaserve.planner.deadlines import DeadlineHeap

__all__ = ["ClockworkScheduler"]

# A prediction this far (s) behind a reported finish belongs to no batch still running.
STALE_S = 1.0


class ClockworkScheduler(Scheduler):
    name = "clockwork"

    def __init__(self, latency: MeanLatency | None = None, *, sizes: tuple[int, ...] = (1, 2, 4, 8, 16),
                 action_window_s: float | None = 0.005, lanes: int = 1) -> None:
        if not sizes or min(sizes) < 1:
            raise ValueError("sizes must be positive batch sizes")
        if action_window_s is not None and action_window_s < 0:
            raise ValueError("action_window_s must be non-negative (or None)")
        self.latency = latency if latency is not None else MeanLatency()
        self.sizes = tuple(sorted(sizes))
        if lanes < 1:
            raise ValueError("lanes must be at least 1")
        self.window = action_window_s
        self.lanes = lanes  # batches that run at once (workers of the pool)
        self._q = DeadlineHeap()
        self._free_at: dict[int, float] = {}  # predicted completion of each batch in flight, by token
        self._tokens = itertools.count()
        # (predicted, actual or None) completion of batches that finished, not yet checked
        self._done: list[tuple[float, float | None]] = []
        self.rejected_batches = 0

    def __len__(self) -> int:
        return len(self._q)

    def add(self, item: Pending, now: float) -> None:
        self._q.push(item)

    def diagnose(self) -> dict[str, object]:
        return {"predict1_ms": round(self.latency.predict(1) * 1000.0, 3)}

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
            predicted, finished = self._done.pop()
            freed = now if finished is None else finished
            if self.window is not None and freed > predicted + self.window:
                failed = self._form(predicted, max_size)
                if failed:
                    self.rejected_batches += 1
                    expired.extend(failed)
                    expired.extend(self.expire(now))
        batch = self._form(now, max_size)
        if not batch:
            return Decision(expired=expired)
        predicted_s = self.latency.predict(len(batch))
        token = next(self._tokens)
        self._free_at[token] = self._start(now) + predicted_s
        return Decision(batch=batch, expired=expired, predicted_s=predicted_s, token=token)

    def _start(self, now: float) -> float:
        # Each lane (a worker) runs its actions one after another, as Clockwork's controller
        # plans them: with n batches in flight on L lanes, the next starts once n - L + 1 of
        # them are predicted to have ended (the last one, on one lane).
        ahead = len(self._free_at) - self.lanes + 1
        if ahead <= 0:
            return now
        return max(now, heapq.nsmallest(ahead, self._free_at.values())[-1])

    def observe(self, feedback: Feedback) -> None:
        fin = feedback.finished_s
        predicted = self._pair(feedback.token, fin)
        if predicted is not None:
            self._done.append((predicted, fin))
        if fin is not None:  # predictions that ended long before a finish belong to no batch in flight
            for token in [t for t, at in self._free_at.items() if at < fin - STALE_S]:
                del self._free_at[token]
        self.latency.update(feedback)

    def _pair(self, token: int | None, fin: float | None) -> float | None:
        """The prediction of the batch that finished, out of those in flight.

        Clockwork's controller tracks each action by its id; the planner hands the decision's
        token back with the batch's feedback. Without one (the paper-table simulator, a planner
        restarted since), the batch is taken to be the one predicted to finish first, or nearest
        to the reported finish. Matched by time, a batch heard of after the planner had planned
        others paired with a later prediction and left its own over, to be paired 25-70 ms late
        with a later finish: live, 15 % of Clockwork's batches failed against 4 % replayed
        (docs/orloj.md, "Twenty-first session")."""
        if token is not None:
            # a decision sent as several messages comes back once per message: the first is its finish
            return self._free_at.pop(token, None)
        if not self._free_at:
            return None
        if fin is None:
            first = min(self._free_at, key=self._free_at.__getitem__)
        else:
            first = min(self._free_at, key=lambda t: abs(self._free_at[t] - fin))
        return self._free_at.pop(first)

    def earliest_deadline(self) -> float | None:
        return self._q.earliest()
