"""MOSEL in the live planner: a ``Scheduler`` that chooses modality subsets and batches per subset.

How the two policies compose: MOSEL decides how many of a job's requests use each subset (its
strategy, from the matrix and the monitor's re-selection); batches are then formed per subset in
deadline order, as the paper's worker runs one batch per subset. The planner's batching policy
(``--policy``) serves the models without modality subsets.

A job's life here:

1. ``add`` gathers its requests (the planner adds all of a job's requests at once).
2. The next ``next_batch``/``expire`` admits it to the :class:`ModalitySelector` at its most
   accurate strategy and hands the monitor a snapshot of the queue (:mod:`.monitor`).
3. Once a monitor pass has seen it, the job may be dispatched: as in the paper, a job reaches the
   worker's queue through the monitor, so a job that only a cheaper mix can save is not
   dispatched at its richest before the monitor looked. The loop never waits for the monitor; it
   serves what is ready.
4. The most urgent work (the earliest-deadline released request or planned job) picks the
   subset; the batch is that subset's released requests in deadline order, topped up from
   planned jobs whose strategy uses it. A job's strategy is released, and final, when its first
   request is taken: each request gets its subset and ``HeldJob.accuracy`` the effective accuracy.
5. ``expire`` ends the jobs the monitor found hopeless and requests that cannot finish even alone.
"""

from __future__ import annotations

import heapq
import logging
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from adaserve.broker.errors import InvalidMessage
from adaserve.broker.messages import Job
from adaserve.planner.core import Decision, Feedback, Pending

from .costs import SubsetCosts
from .livejob import (LiveJob, best_subset, chunk_sizes, feasible_subsets, floor_problem, modalities,
                      set_accuracy)
from .matrix import StrategyMatrix
from .monitor import Monitor
from .queue import Change, QueuedJob, QueueState
from .selector import POLICIES, ModalitySelector
from .strategy import Strategy

log = logging.getLogger("adaserve.planner.mosel")
INFLIGHT_FORGET_S = 10.0  # a batch whose feedback never came stops counting as backlog


@dataclass(frozen=True, slots=True)
class _Pass:
    """One finished monitor pass: the chunks it saw, what it changed, when it was snapshot."""

    ids: tuple[str, ...]
    changes: list[Change]
    snapshot_now: float


class MoselScheduler:
    """Modality selection for one model; see the module docstring for the flow."""

    name = "mosel"

    def __init__(self, costs: SubsetCosts, matrix: StrategyMatrix | None, policy: str = "optimized", *,
                 model: str = "", build: Callable[[], StrategyMatrix] | None = None, inline: bool = False,
                 period_s: float = 0.02, solve_budget_s: float = 0.05, learn_rate: float = 0.2,
                 seed: int = 0) -> None:
        if matrix is None and build is None:
            raise ValueError("a strategy matrix, or a way to build one, is needed")
        self.costs, self.policy, self.model = costs, policy, model
        self.period_s = period_s
        if policy not in POLICIES:
            raise ValueError(f"unknown modality policy {policy!r} (choose from {', '.join(POLICIES)})")
        self._sel_kw = {"seed": seed, "solve_budget_s": solve_budget_s, "learn_rate": learn_rate}
        self.matrix: StrategyMatrix | None = None
        self.selector: ModalitySelector | None = None
        self.monitor = Monitor(f"mosel-monitor-{model}", inline=inline)
        self.finalized: deque[tuple[str, tuple[Strategy, ...], float]] = deque(maxlen=4096)
        self._open: dict[str, LiveJob] = {}     # job id -> a job still gathering requests
        self._fresh: list[LiveJob] = []
        self._jobs: dict[str, LiveJob] = {}     # key -> admitted, not yet released
        self._order: list[tuple[float, float, str]] = []  # planned jobs, deadline order (lazy)
        self._chunk: dict[str, QueuedJob] = {}
        self._chunk_key: dict[str, str] = {}
        self._top: dict[str, Strategy] = {}  # chunk -> its most accurate candidate
        self._ready: dict[str, list[tuple[float, int, Pending]]] = {s: [] for s in costs.subsets}
        self._inflight: deque[tuple[str, int, float, float]] = deque()  # subset, size, predicted s, sent
        self._doomed: set[str] = set()
        self._dropped: list[Pending] = []
        self._events: list[tuple[str, dict[str, object]]] = []
        self._count = self._seq = 0
        self._dirty = False
        self._next_replan = 0.0
        self._lag_s = 0.0
        if matrix is not None:
            self._use(matrix)
        elif build is not None:
            log.info("%s: building its strategy matrix; jobs run at their most accurate subset until it is ready",
                     model)
            self.monitor.submit(build)

    # -- the Scheduler protocol --------------------------------------------------------------

    def add(self, item: Pending, now: float) -> None:
        job = self._open.get(item.job_id)
        if job is None:
            self._seq += 1
            key = item.job_id if item.job_id not in self._jobs else f"{item.job_id}/{self._seq}"
            job = self._open[item.job_id] = LiveJob(key, item.job_id, item.floor, item.arrival, item.deadline)
            self._fresh.append(job)
        job.items.append(item)
        self._count += 1

    def next_batch(self, now: float, max_size: int) -> Decision:
        self._kick(now)
        expired = self._take_doomed()
        subset = self._head()
        if subset is None:
            return Decision(expired=expired)
        heap = self._ready[subset]
        batch = [heapq.heappop(heap)[2] for _ in range(min(max_size, len(heap)))]
        if len(batch) < max_size:
            self._top_up(subset, batch, max_size)
        self._count -= len(batch)
        self._dirty = True  # the queue moved on: spare time may be given back as accuracy
        predicted = self._run_s(subset, len(batch))
        self._inflight.append((subset, len(batch), predicted, now))
        return Decision(batch=batch, expired=expired, predicted_s=predicted, variant=subset,
                        modalities=modalities(subset))

    def expire(self, now: float) -> list[Pending]:
        self._kick(now)
        out = self._take_doomed()
        for subset, heap in self._ready.items():
            alone = self._run_s(subset, 1)
            while heap and heap[0][0] < now + alone:
                out.append(heapq.heappop(heap)[2])
                self._count -= 1
        scale = self._scale()
        for job in [j for j in self._jobs.values() if j.deadline < now + j.fastest_s * scale]:
            out.extend(self._drop(job))
        return out

    def observe(self, feedback: Feedback) -> None:
        """Feedback without the batch's variant cannot be matched to a subset's profile; the
        planner calls :meth:`observe_variant` instead."""

    def observe_variant(self, variant: str, feedback: Feedback) -> None:
        """A batch of ``variant`` ran for ``feedback.exec_s``: correct the profile's scale (MOSEL's
        worker reports latencies to its monitor) and stop counting the batch as backlog."""
        if variant not in self._ready or feedback.size < 1:
            return
        if self.selector is not None:
            self.selector.observe(self.costs.run_ms(self.costs.subsets.index(variant), feedback.size) / 1e3,
                                  feedback.exec_s)
        for i, (s, k, _, _) in enumerate(self._inflight):
            if s == variant and k == feedback.size:
                del self._inflight[i]
                break

    def earliest_deadline(self) -> float | None:
        heads = [h[0][0] for h in self._ready.values() if h]
        top = self._peek()
        if top is not None:
            heads.append(top.deadline)
        if heads:
            return min(heads)
        return math.inf if self._count else None  # only jobs the monitor has not seen yet

    def drain_events(self) -> list[tuple[str, dict[str, object]]]:
        out, self._events = self._events, []
        return out

    def check_job(self, job: Job) -> None:
        """Admission: raise ``InvalidMessage`` when no plan can reach the job's accuracy floor."""
        fake = [Pending(job.id, r.id, job.app, job.model, 0.0, 0.0, payload=(None, r)) for r in job.requests]
        why = floor_problem(self.costs, feasible_subsets(self.costs, fake), job.slo.min_accuracy)
        if why:
            raise InvalidMessage("accuracy_floor", f"job {job.id}: {why}")

    def close(self) -> None:
        self.monitor.close()

    def __len__(self) -> int:
        return self._count

    # -- admission and the monitor -------------------------------------------------------------

    def _use(self, matrix: StrategyMatrix) -> None:
        self.matrix, self.costs = matrix, matrix.costs
        self.selector = ModalitySelector(matrix, self.policy, **self._sel_kw)

    def _kick(self, now: float) -> None:
        self._collect(now)
        if self._fresh:
            for job in self._fresh:
                self._admit(job)
            self._fresh.clear()
            self._open.clear()
        if self.selector is None or not self._chunk or (not self._dirty and now < self._next_replan):
            return
        if self._quiet(now + self._backlog_s(now)):
            # No job would miss its deadline and none is below its richest mix: a pass could only
            # confirm the plan (new jobs start at their richest), so the gate opens without one.
            for job in self._jobs.values():
                self._open_gate(job)
            self._dirty = False
            self._next_replan = now + self.period_s
            return
        chunks = list(self._chunk.values())
        busy_until = now + self._lag_s + self._backlog_s(now)
        if self.monitor.submit(lambda: self._replan(chunks, busy_until, now)):
            self._dirty = False
            self._next_replan = now + self.period_s
            if self.monitor.inline:
                self._collect(now)

    def _replan(self, chunks: list[QueuedJob], busy_until: float, now: float) -> _Pass:
        # Runs on the monitor thread: only the selector (thread-safe) is touched here.
        assert self.selector is not None
        changes = self.selector.replan(QueueState(chunks, busy_until), now + self._lag_s, admit_new=False)
        return _Pass(tuple(c.job_id for c in chunks), changes, now)

    def _collect(self, now: float) -> None:
        for res in self.monitor.drain():
            if isinstance(res, StrategyMatrix):
                self._use(res)
                log.info("%s: strategy matrix ready; modality selection (%s) is on", self.model, self.policy)
                continue
            if not isinstance(res, _Pass):
                continue
            # How long a pass takes to reach the batch former: the next pass plans that far ahead.
            self._lag_s += 0.2 * (max(now - res.snapshot_now, 0.0) - self._lag_s)
            for cid in res.ids:
                job = self._jobs.get(self._chunk_key.get(cid, ""))
                if job is not None:
                    self._open_gate(job)
            for c in res.changes:
                self._event(c)

    def _open_gate(self, job: LiveJob) -> None:
        if not job.planned:
            job.planned = True
            heapq.heappush(self._order, job.order)

    def _quiet(self, t0: float) -> bool:
        """Whether the queued jobs, at their current strategies and in deadline order from ``t0``,
        all meet their deadlines at their richest mixes (nothing for the monitor to do)."""
        assert self.selector is not None
        scale, t = self._scale(), t0
        for q in sorted(self._chunk.values(), key=lambda q: q.order):
            s = self.selector.strategy(q.job_id)
            if s is None or s != self._top.get(q.job_id):
                return False
            t += s.latency_s * scale
            if t > q.deadline:
                return False
        return True

    def _admit(self, job: LiveJob) -> None:
        allowed = feasible_subsets(self.costs, job.items)
        why = floor_problem(self.costs, allowed, job.floor)
        if why:  # admission control rejects these first; this is the backstop for a race
            log.warning("%s: job %s cannot be planned (%s); its requests end", self.model, job.job_id, why)
            self._dropped.extend(job.items)
            self._count -= len(job.items)
            return
        self._jobs[job.key] = job
        if self.selector is None or len(allowed) < len(self.costs.subsets) or not self._enter(job):
            best = best_subset(self.costs, allowed)
            assert best is not None
            counts = tuple(len(job.items) if m == best else 0 for m in range(len(self.costs.subsets)))
            job.pinned = self.costs.strategy(counts)
            job.fastest_s = job.pinned.latency_s
            job.planned = True
            heapq.heappush(self._order, job.order)

    def _enter(self, job: LiveJob) -> bool:
        assert self.selector is not None and self.matrix is not None
        sizes = chunk_sizes(len(job.items), self.matrix.max_size)
        for k, size in enumerate(sizes):
            cid = job.key if len(sizes) == 1 else f"{job.key}#{k}"
            q = QueuedJob(cid, size, job.floor, job.arrival, job.deadline)
            try:
                self.selector.admit(q)
            except InvalidMessage:
                for c in job.chunks:
                    self._forget(c)
                job.chunks.clear()
                return False
            job.chunks.append(cid)
            self._chunk[cid], self._chunk_key[cid] = q, job.key
            cands = [self.matrix.richest(size)] if self.policy == "none" else self.matrix.candidates(size, job.floor)
            self._top[cid] = cands[-1]
            job.fastest_s += cands[0].latency_s
        self._dirty = True
        return True

    def _forget(self, cid: str) -> Strategy | None:
        self._chunk.pop(cid, None)
        self._chunk_key.pop(cid, None)
        self._top.pop(cid, None)
        assert self.selector is not None
        try:
            return self.selector.release(cid)
        except KeyError:
            return None  # the monitor expired it meanwhile

    # -- batch formation -------------------------------------------------------------------

    def _peek(self) -> LiveJob | None:
        while self._order:
            job = self._jobs.get(self._order[0][2])
            if job is not None:
                return job
            heapq.heappop(self._order)
        return None

    def _head(self) -> str | None:
        while True:
            heads = [(h[0][0], s) for s, h in self._ready.items() if h]
            best = min(heads) if heads else None
            job = self._peek()
            if job is None or (best is not None and best[0] < job.deadline):
                return best[1] if best else None
            self._release(job)

    def _top_up(self, subset: str, batch: list[Pending], max_size: int) -> None:
        m = self.costs.subsets.index(subset)
        heap = self._ready[subset]
        for _, _, key in heapq.nsmallest(256, self._order):
            if len(batch) >= max_size:
                return
            job = self._jobs.get(key)
            if job is None or not any(s.counts[m] for s in self._current(job)):
                continue
            self._release(job)
            while heap and len(batch) < max_size:
                batch.append(heapq.heappop(heap)[2])

    def _current(self, job: LiveJob) -> list[Strategy]:
        if job.pinned is not None:
            return [job.pinned]
        assert self.selector is not None
        return [s for s in (self.selector.strategy(c) for c in job.chunks) if s is not None]

    def _release(self, job: LiveJob) -> None:
        """The job's strategy becomes final; its requests join their subsets' queues."""
        del self._jobs[job.key]
        final = [job.pinned] if job.pinned is not None else [self._forget(c) for c in job.chunks]
        if any(s is None for s in final):
            # The monitor expired (part of) it between its pass and this release: end it whole.
            self._dropped.extend(job.items)
            self._count -= len(job.items)
            return
        strategies = tuple(s for s in final if s is not None)
        accuracy = sum(s.accuracy * s.size for s in strategies) / len(job.items)
        set_accuracy(job.items, accuracy)
        self.finalized.append((job.job_id, strategies, accuracy))
        items = iter(job.items)
        for s in strategies:
            for subset, k in zip(s.subsets, s.counts):
                for _ in range(k):
                    p = next(items)
                    self._seq += 1
                    heapq.heappush(self._ready[subset], (p.deadline, self._seq, p))

    # -- expiry, backlog, events -------------------------------------------------------------

    def _drop(self, job: LiveJob) -> list[Pending]:
        self._jobs.pop(job.key, None)
        for c in job.chunks:
            self._forget(c)
        self._count -= len(job.items)
        return list(job.items)

    def _take_doomed(self) -> list[Pending]:
        out, self._dropped = self._dropped, []
        for key in self._doomed:
            job = self._jobs.get(key)
            if job is not None:
                out.extend(self._drop(job))
        self._doomed.clear()
        return out

    def _scale(self) -> float:
        return self.selector.latency_scale if self.selector is not None else 1.0

    def _run_s(self, subset: str, k: int) -> float:
        return self.costs.run_ms(self.costs.subsets.index(subset), k) / 1e3 * self._scale()

    def _backlog_s(self, now: float) -> float:
        """Work already committed ahead of the queue: released requests and unreported batches."""
        while self._inflight and self._inflight[0][3] < now - INFLIGHT_FORGET_S:
            self._inflight.popleft()
        queued = sum(self._run_s(s, len(h)) for s, h in self._ready.items() if h)
        return queued + sum(x[2] for x in self._inflight)

    def _event(self, c: Change) -> None:
        key = self._chunk_key.get(c.job_id, c.job_id.split("#")[0])
        if c.after is None:
            self._doomed.add(key)
        part = c.job_id.rsplit("#", 1)[1] if "#" in c.job_id else None
        self._events.append(("planner.replanned", {
            **c.event_fields(), "job_id": key.split("/")[0], "model": self.model,
            "part": int(part) if part is not None else None,
            "before_accuracy": c.before.accuracy, "after_accuracy": c.after.accuracy if c.after else None,
        }))
