"""Jobs the live MOSEL scheduler has admitted but not yet released: their entries in the selector
(one per chunk), the dispatch gate, and the release that makes a job's strategy final."""

from __future__ import annotations

import heapq
import logging
from collections import deque

from adaserve.broker.errors import InvalidMessage
from adaserve.planner.core import Pending

from .held import MoselJob, best_subset, chunk_sizes, feasible_subsets, floor_problem, set_accuracy
from .queue import QueuedJob
from .shared import Selection
from .strategy import Strategy

log = logging.getLogger("adaserve.planner.mosel")


class PlannedJobs:
    """Admitted jobs by key, in deadline order once their gate is open.

    ``order`` is a lazy heap: a released or dropped job stays in it until it reaches the top, so
    neither has to search the heap. ``dropped`` holds requests that ended here between two calls
    of the scheduler (a failed admission or release); they no longer count as pending.
    """

    def __init__(self, sel: Selection, model: str = "") -> None:
        self.sel, self.model = sel, model
        self.finalized: deque[tuple[str, tuple[Strategy, ...], float]] = deque(maxlen=4096)
        self.jobs: dict[str, MoselJob] = {}     # key -> admitted, not yet released
        self.order: list[tuple[float, float, str]] = []  # gated jobs, deadline order (lazy)
        self.chunks: dict[str, QueuedJob] = {}
        self.chunk_key: dict[str, str] = {}
        self.top: dict[str, Strategy] = {}  # chunk -> its most accurate candidate
        self.dropped: list[Pending] = []
        self.held = 0  # requests of the jobs in ``jobs``

    # -- admission -------------------------------------------------------------------------

    def admit(self, job: MoselJob) -> bool:
        """Take ``job`` in; True when it entered the selector (the plan may have to change)."""
        costs = self.sel.costs
        allowed = feasible_subsets(costs, job.items)
        why = floor_problem(costs, allowed, job.floor)
        if why:  # admission control rejects these first; this is the backstop for a race
            log.warning("%s: job %s cannot be planned (%s); its requests end", self.model, job.job_id, why)
            self.dropped.extend(job.items)
            return False
        self.jobs[job.key] = job
        self.held += len(job.items)
        if self.sel.selector is None or len(allowed) < len(costs.subsets) or not self._enter(job):
            # Pinned: its inputs lack a modality, the matrix is still being built, or the
            # selector refused it; it runs whole on its best subset and needs no monitor pass.
            best = best_subset(costs, allowed)
            assert best is not None
            counts = tuple(len(job.items) if m == best else 0 for m in range(len(costs.subsets)))
            job.pinned = costs.strategy(counts)
            job.fastest = [job.pinned]
            job.planned = True
            heapq.heappush(self.order, job.order)
            return False
        return True

    def _enter(self, job: MoselJob) -> bool:
        selector, matrix = self.sel.selector, self.sel.matrix
        assert selector is not None and matrix is not None
        sizes = chunk_sizes(len(job.items), matrix.max_size)
        for k, size in enumerate(sizes):
            cid = job.key if len(sizes) == 1 else f"{job.key}#{k}"
            q = QueuedJob(cid, size, job.floor, job.arrival, job.deadline)
            try:
                selector.admit(q)
            except InvalidMessage:
                for c in job.chunks:
                    self.forget(c)
                job.chunks.clear()
                return False
            job.chunks.append(cid)
            self.chunks[cid], self.chunk_key[cid] = q, job.key
            cands = [matrix.richest(size)] if self.sel.policy == "none" else matrix.candidates(size, job.floor)
            self.top[cid] = cands[-1]
            job.fastest.append(cands[0])
        return True

    def forget(self, cid: str) -> Strategy | None:
        self.chunks.pop(cid, None)
        self.chunk_key.pop(cid, None)
        self.top.pop(cid, None)
        assert self.sel.selector is not None
        try:
            return self.sel.selector.release(cid)
        except KeyError:
            return None  # the monitor expired it meanwhile

    # -- the gate --------------------------------------------------------------------------

    def job_of(self, cid: str) -> MoselJob | None:
        return self.jobs.get(self.chunk_key.get(cid, ""))

    def key_of(self, cid: str) -> str:
        """The job key of chunk ``cid``, also once the chunk is gone (``key#part``)."""
        return self.chunk_key.get(cid, cid.split("#")[0])

    def waiting(self, cid: str) -> bool:
        """Whether the job of chunk ``cid`` is still held at the gate (no pass has opened it)."""
        job = self.job_of(cid)
        return job is not None and not job.planned

    def open_gate(self, job: MoselJob) -> None:
        if not job.planned:
            job.planned = True
            heapq.heappush(self.order, job.order)

    def peek(self) -> MoselJob | None:
        """The earliest-deadline job whose gate is open."""
        while self.order:
            job = self.jobs.get(self.order[0][2])
            if job is not None:
                return job
            heapq.heappop(self.order)
        return None

    def current(self, job: MoselJob) -> list[Strategy]:
        if job.pinned is not None:
            return [job.pinned]
        assert self.sel.selector is not None
        return [s for s in (self.sel.selector.strategy(c) for c in job.chunks) if s is not None]

    # -- leaving ---------------------------------------------------------------------------

    def release(self, job: MoselJob) -> list[tuple[str, Pending]]:
        """The job's strategy becomes final: each request with the subset it runs on."""
        del self.jobs[job.key]
        self.held -= len(job.items)
        final = [job.pinned] if job.pinned is not None else [self.forget(c) for c in job.chunks]
        if any(s is None for s in final):
            # The monitor expired (part of) it between its pass and this release: end it whole.
            self.dropped.extend(job.items)
            return []
        strategies = tuple(s for s in final if s is not None)
        accuracy = sum(s.accuracy * s.size for s in strategies) / len(job.items)
        set_accuracy(job.items, accuracy)
        self.finalized.append((job.job_id, strategies, accuracy))
        items = iter(job.items)
        return [(subset, next(items)) for s in strategies for subset, k in zip(s.subsets, s.counts)
                for _ in range(k)]

    def drop(self, job: MoselJob) -> list[Pending]:
        self.jobs.pop(job.key, None)
        for c in job.chunks:
            self.forget(c)
        self.held -= len(job.items)
        return list(job.items)

    def hopeless(self, now: float) -> list[Pending]:
        """End the jobs that cannot finish by their deadline even alone at their fastest."""
        out: list[Pending] = []
        for job in [j for j in self.jobs.values()
                    if j.deadline < now + sum(self.sel.strategy_s(s) for s in j.fastest)]:
            out.extend(self.drop(job))
        return out

    def take_dropped(self, doomed: set[str]) -> list[Pending]:
        """The requests that ended here, and those of the jobs in ``doomed`` (keys), now ended."""
        out, self.dropped = self.dropped, []
        for key in doomed:
            job = self.jobs.get(key)
            if job is not None:
                out.extend(self.drop(job))
        return out
