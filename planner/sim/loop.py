"""The live planner's loop, replayed: when it came to dispatch, and which slots it knew were free.

At and above capacity the live planner's loop is busy back to back, and a slot freed by a
finished batch is filled at the dispatch of a later step: up to two steps later when steps are
long. The simulator used to free a slot when the planner heard of the finish and then hold the
loop a sampled step after each sending step. Both waits were measured to the same dispatch, so
at 100 ms deadlines, where steps are 10-30 ms, it counted the loop twice: it sent a quarter
fewer batches than live and predicted finish rates 0.165 low at 1.2x of capacity, 100 ms
(docs/orloj.md, "Fifteenth session").

Replaying the run's own jobs, the simulator now dispatches at the moments the live planner
dispatched (each ``batch.dispatched``), and a slot is free to a dispatch when its batch was acked
before the step before began (the first dispatch of the previous step, or a median busy step
earlier, whichever is later). That rule is measured, not derived: with the time the step's own
counts were read (a field tried on ``batch.dispatched``) the replays over-predicted overload by
0.07-0.09 and fitted only with an ack 6 ms after the finish, where the worker's acks come about
1 ms after it at the median and 4-5 ms at the 90th percentile. The policy, the worker's lane,
expiry and admission stay the simulator's own: only the loop's timing is taken from the run.
Past the run's last dispatch, a slot is free once acked and the loop dispatches at once.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

__all__ = ["ACK_MS", "ReplayedLoop"]

# From a batch's finish (``batch.finished``'s ``ts``) to the worker's ack, which its in-flight
# count drops with: the ``batch.finished`` entry's id minus its ``ts`` measured 0.7-1.2 ms at the
# median in runs at 1.2x of capacity.
ACK_MS = 0.5
# Dispatches closer than this to the one before belong to the same step (their events are
# stamped as each batch is built).
SAME_STEP_MS = 1.0


class ReplayedLoop:
    """The run's dispatches in seconds on the simulator's clock; ``step_s``: the loop's median
    busy step."""

    def __init__(self, points: Sequence[float], step_s: float, ack_s: float = ACK_MS / 1e3) -> None:
        if step_s < 0 or ack_s < 0:
            raise ValueError("step_s and ack_s must not be negative")
        self._at = sorted(float(a) for a in points)
        self._counted: list[float] = []  # per dispatch: a slot acked by then is free to it
        prev_step = step_start = -float("inf")  # the first dispatch of the step before, of this one
        for i, at in enumerate(self._at):
            if not i or at - self._at[i - 1] > SAME_STEP_MS / 1e3:
                prev_step, step_start = step_start, at
            self._counted.append(max(prev_step, at - step_s))
        self._next = 0
        self._acked: list[float] = []  # when each finished batch's slot shows free, not yet handed out
        self.ack_s = ack_s

    @property
    def replaying(self) -> bool:
        """Whether dispatches of the run are left to replay."""
        return self._next < len(self._at)

    def finished(self, finish_s: float) -> None:
        """A batch finished at ``finish_s``: its slot is free once the worker has acked it."""
        heapq.heappush(self._acked, finish_s + self.ack_s)

    def next_at(self) -> float | None:
        """When the loop next dispatches (or, past the run's dispatches, next sees a slot free)."""
        if self._next < len(self._at):
            return self._at[self._next]
        return self._acked[0] if self._acked else None

    def dispatch(self, now: float) -> tuple[bool, int]:
        """Whether the loop dispatches at ``now``, and how many slots it has newly seen free; past
        the run's dispatches, every moment is one, and a slot is seen free once acked."""
        while self._next < len(self._at) and self._at[self._next] < now - 1e-12:
            self._next += 1  # the simulation jumped past dispatches at which nothing happened
        if self._next >= len(self._at):
            return True, self._release(now)
        if self._at[self._next] > now + 1e-12:
            return False, 0
        counted = self._counted[self._next]
        self._next += 1
        return True, self._release(counted)

    def _release(self, until: float) -> int:
        n = 0
        while self._acked and self._acked[0] <= until + 1e-12:
            heapq.heappop(self._acked)
            n += 1
        return n
