"""Released requests of the live MOSEL scheduler, one deadline-ordered queue per subset, and how a
batch is formed from them: as the paper's worker, one batch runs one subset."""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterator

from adaserve.planner.core import Pending

from .held import MoselJob
from .planned import PlannedJobs
from .shared import Selection

INFLIGHT_FORGET_S = 10.0  # a batch whose feedback never came is dropped from the list this long after


class ReadyQueues:
    """Per-subset queues of released requests, and the batches sent whose feedback has not come.

    A planned job joins these queues only when it is released (its strategy final), so the queues
    hold exactly the work whose subsets can no longer change.
    """

    def __init__(self, sel: Selection, plans: PlannedJobs, seq: Iterator[int]) -> None:
        self.sel, self.plans, self._seq = sel, plans, seq
        self.heaps: dict[str, list[tuple[float, int, Pending]]] = {s: [] for s in sel.costs.subsets}
        self.inflight: deque[tuple[str, int, float, float]] = deque()  # subset, size, predicted s, sent

    def __contains__(self, subset: object) -> bool:
        return subset in self.heaps

    def __len__(self) -> int:
        return sum(len(h) for h in self.heaps.values())

    def deadlines(self) -> list[float]:
        """The earliest deadline of each non-empty queue."""
        return [h[0][0] for h in self.heaps.values() if h]

    # -- batch formation -------------------------------------------------------------------

    def head(self) -> str | None:
        """The subset of the most urgent work: a released request, or a gated job, which is
        released here when it is more urgent than every released request."""
        while True:
            heads = [(h[0][0], s) for s, h in self.heaps.items() if h]
            best = min(heads) if heads else None
            job = self.plans.peek()
            if job is None or (best is not None and best[0] < job.deadline):
                return best[1] if best else None
            self.release(job)

    def take(self, subset: str, max_size: int) -> list[Pending]:
        """A batch of ``subset``: its released requests in deadline order, topped up from the
        gated jobs (deadline order) whose current strategy uses it, which are released on the way."""
        heap = self.heaps[subset]
        batch = [heapq.heappop(heap)[2] for _ in range(min(max_size, len(heap)))]
        if len(batch) < max_size:
            self._top_up(subset, batch, max_size)
        return batch

    def _top_up(self, subset: str, batch: list[Pending], max_size: int) -> None:
        m = self.sel.costs.subsets.index(subset)
        heap = self.heaps[subset]
        for _, _, key in heapq.nsmallest(256, self.plans.order):
            if len(batch) >= max_size:
                return
            job = self.plans.jobs.get(key)
            if job is None or not any(s.counts[m] for s in self.plans.current(job)):
                continue
            self.release(job)
            while heap and len(batch) < max_size:
                batch.append(heapq.heappop(heap)[2])

    def release(self, job: MoselJob) -> None:
        """The job's strategy becomes final; its requests join their subsets' queues."""
        for subset, p in self.plans.release(job):
            heapq.heappush(self.heaps[subset], (p.deadline, next(self._seq), p))

    # -- expiry and backlog ----------------------------------------------------------------

    def expire(self, now: float) -> list[Pending]:
        """Released requests that cannot finish even alone."""
        out = []
        for subset, heap in self.heaps.items():
            alone = self.sel.run_s(subset, 1)
            while heap and heap[0][0] < now + alone:
                out.append(heapq.heappop(heap)[2])
        return out

    def sent(self, subset: str, size: int, now: float) -> float:
        """Count a dispatched batch as backlog until its feedback comes; its predicted seconds."""
        predicted = self.sel.run_s(subset, size)
        self.inflight.append((subset, size, predicted, now))
        return predicted

    def done(self, subset: str, size: int) -> None:
        for i, (s, k, _, _) in enumerate(self.inflight):
            if s == subset and k == size:
                del self.inflight[i]
                break

    def backlog_s(self, now: float) -> float:
        """Work already committed ahead of the queue: released requests, and what is left of the
        batches sent whose feedback has not come, run one after another from when each was sent.

        Left, not whole: a batch counts only until its predicted finish. The feedback of a batch
        can fail to reach the scheduler (3-4 of 20 batches in a measured run, docs/mosel.md);
        counted whole, such batches held 0.25-0.35 s of phantom backlog for seconds, and every
        new job then looked hopeless at 5 jobs/s on an idle worker."""
        while self.inflight and self.inflight[0][3] < now - INFLIGHT_FORGET_S:
            self.inflight.popleft()
        queued = sum(self.sel.run_s(s, len(h)) for s, h in self.heaps.items() if h)
        free = -math.inf  # when the worker is expected to be free of the batches sent so far
        for _, _, predicted, sent in self.inflight:
            free = max(free, sent) + predicted
        return queued + max(free - now, 0.0)
