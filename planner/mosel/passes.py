"""The live MOSEL scheduler's side of the monitor: when to hand it a pass over the queue, and what a
finished pass changes (gates opened, jobs doomed, ``planner.replanned`` events)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .matrix import StrategyMatrix
from .planned import PlannedJobs
from .queue import Change, QueuedJob, QueueState
from .ready import ReadyQueues
from .shared import Selection
from .tasks import Tasks

log = logging.getLogger("adaserve.planner.mosel")


@dataclass(frozen=True, slots=True)
class _Pass:
    """One finished monitor pass: the chunks it saw, what it changed, when it was snapshot."""

    ids: tuple[str, ...]
    changes: list[Change]
    snapshot_now: float


class MonitorPasses:
    """Hands the monitor snapshots of the planned chunks and applies the passes it finishes.

    ``dirty`` says the queue moved since the last pass (a job entered the selector, a batch left),
    so a pass may find something to change before ``period_s`` is up.
    """

    def __init__(self, sel: Selection, plans: PlannedJobs, ready: ReadyQueues, monitor: Tasks, *,
                 model: str = "", period_s: float = 0.02) -> None:
        self.sel, self.plans, self.ready, self.monitor = sel, plans, ready, monitor
        self.model, self.period_s = model, period_s
        self.dirty = False
        self.doomed: set[str] = set()  # job keys a pass expired, ended at the next call
        self._events: list[tuple[str, dict[str, object]]] = []
        self._next_replan = 0.0
        self._lag_s = 0.0

    def kick(self, now: float) -> None:
        """Open the gates without a pass when none could change anything, else submit one."""
        if self.sel.selector is None or not self.plans.chunks or (not self.dirty and now < self._next_replan):
            return
        if self._quiet(now + self.ready.backlog_s(now)):
            # No job would miss its deadline and none is below its richest mix: a pass could only
            # confirm the plan (new jobs start at their richest), so the gate opens without one.
            for job in self.plans.jobs.values():
                self.plans.open_gate(job)
            self.dirty = False
            self._next_replan = now + self.period_s
            return
        chunks = list(self.plans.chunks.values())
        busy_until = now + self._lag_s + self.ready.backlog_s(now)
        if self.monitor.submit(lambda: self._replan(chunks, busy_until, now)):
            self.dirty = False
            self._next_replan = now + self.period_s
            if self.monitor.inline:
                self.collect(now)

    def _replan(self, chunks: list[QueuedJob], busy_until: float, now: float) -> _Pass:
        # Runs on the monitor thread: only the selector (thread-safe) is touched here.
        assert self.sel.selector is not None
        changes = self.sel.selector.replan(QueueState(chunks, busy_until), now + self._lag_s, admit_new=False)
        return _Pass(tuple(c.job_id for c in chunks), changes, now)

    def collect(self, now: float) -> None:
        """Apply what the monitor finished: a built matrix, or passes."""
        for res in self.monitor.drain():
            if isinstance(res, StrategyMatrix):
                self.sel.use(res)
                log.info("%s: strategy matrix ready; modality selection (%s) is on", self.model, self.sel.policy)
                continue
            if not isinstance(res, _Pass):
                continue
            # How long a pass takes to reach the batch former: the next pass plans that far ahead.
            # Only while some job of it still waits at the gate: otherwise the loop was idle (no
            # job waiting, so it blocked on ingress for up to its read timeout) and the delay cost
            # nobody. Counted, those idle waits made the lag 0.1-0.18 s at 5 jobs/s (docs/mosel.md).
            if any(self.plans.waiting(cid) for cid in res.ids):
                self._lag_s += 0.2 * (max(now - res.snapshot_now, 0.0) - self._lag_s)
            for cid in res.ids:
                job = self.plans.job_of(cid)
                if job is not None:
                    self.plans.open_gate(job)
            for c in res.changes:
                self._event(c)

    def _quiet(self, t0: float) -> bool:
        """Whether the queued jobs, at their current strategies and in deadline order from ``t0``,
        all meet their deadlines at their richest mixes (nothing for the monitor to do)."""
        assert self.sel.selector is not None
        t = t0
        for q in sorted(self.plans.chunks.values(), key=lambda q: q.order):
            s = self.sel.selector.strategy(q.job_id)
            if s is None or s != self.plans.top.get(q.job_id):
                return False
            t += self.sel.strategy_s(s)
            if t > q.deadline:
                return False
        return True

    def _event(self, c: Change) -> None:
        key = self.plans.key_of(c.job_id)
        if c.after is None:
            self.doomed.add(key)
        part = c.job_id.rsplit("#", 1)[1] if "#" in c.job_id else None
        self._events.append(("planner.replanned", {
            **c.event_fields(), "job_id": key.split("/")[0], "model": self.model,
            "part": int(part) if part is not None else None,
            "before_accuracy": c.before.accuracy, "after_accuracy": c.after.accuracy if c.after else None,
        }))

    def take_doomed(self) -> set[str]:
        out, self.doomed = self.doomed, set()
        return out

    def drain_events(self) -> list[tuple[str, dict[str, object]]]:
        out, self._events = self._events, []
        return out
