"""A job-level discrete-event simulator of MOSEL: one worker, jobs in deadline order.

Virtual time only, so a run is a pure function of its jobs, the policy and its seed. The monitor
(``replan``) runs at every arrival and before every dispatch, and is treated as off the critical
path (MOSEL overlaps it with execution); its real wall time is recorded, not charged. A job runs
as one batch run per modality subset of its strategy, with the TRUE costs, which may differ from
the costs the planner believes (profiling error, Sec. 7.4); when it finishes, its latency is
reported back to the selector (``observe``), as MOSEL's worker reports to its monitor.
"""

from __future__ import annotations

from dataclasses import dataclass

from .costs import SubsetCosts
from .queue import QueuedJob, QueueState
from .selector import ModalitySelector
from .timeline import EPS_S


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one job ended: ``completed`` (by its deadline), ``late`` or ``expired`` (not run)."""

    job: QueuedJob
    status: str
    start: float | None
    finish: float
    accuracy: float | None
    counts: tuple[int, ...] | None


@dataclass
class _World:
    selector: ModalitySelector
    true: SubsetCosts
    queue: dict[str, QueuedJob]
    out: list[Outcome]
    busy_until: float = 0.0
    report: tuple[float, float] | None = None  # (predicted, actual) of the job on the worker

    def tick(self, now: float) -> None:
        if self.report and now >= self.busy_until:
            # The worker's latency report reaches the monitor when the job has finished.
            self.selector.observe(*self.report)
            self.report = None
        changes = self.selector.replan(QueueState(list(self.queue.values()), self.busy_until), now)
        for c in changes:
            if c.after is None:
                job = self.queue.pop(c.job_id)
                self.out.append(Outcome(job, "expired", None, now, None, None))

    def dispatch(self, now: float) -> None:
        if not self.queue:
            return
        job = min(self.queue.values(), key=lambda j: j.order)
        del self.queue[job.job_id]
        s = self.selector.release(job.job_id)
        exec_s = sum(self.true.run_ms(m, k) for m, k in enumerate(s.counts)) / 1e3
        self.busy_until = now + exec_s
        self.report = (s.latency_s, exec_s)
        status = "completed" if self.busy_until <= job.deadline + EPS_S else "late"
        self.out.append(Outcome(job, status, now, self.busy_until, s.accuracy, s.counts))


def simulate(jobs: list[QueuedJob], selector: ModalitySelector, true_costs: SubsetCosts) -> list[Outcome]:
    """Run ``jobs`` (sorted by arrival) through ``selector`` on one worker; one outcome per job."""
    if list(true_costs.subsets) != list(selector.matrix.subsets):
        raise ValueError("true costs and the planner's matrix must list the same subsets in order")
    w = _World(selector, true_costs, {}, [])
    order = sorted(jobs, key=lambda j: (j.arrival, j.job_id))
    i = 0
    while i < len(order) or w.queue:
        if i < len(order) and (not w.queue or order[i].arrival <= w.busy_until):
            now = order[i].arrival
            # Arrivals at the same instant are admitted together: one monitor pass for them.
            while i < len(order) and order[i].arrival == now:
                w.selector.admit(order[i])
                w.queue[order[i].job_id] = order[i]
                i += 1
            w.tick(now)
            if w.busy_until <= now:
                w.dispatch(now)
        else:
            now = w.busy_until
            w.tick(now)
            w.dispatch(now)
    return w.out
