"""MOSEL in the live planner: a ``Scheduler`` that chooses modality subsets and batches per subset.

How the two policies compose: MOSEL decides how many of a job's requests use each subset (its
strategy, from the matrix and the monitor's re-selection); batches are then formed per subset in
deadline order, as the paper's worker runs one batch per subset. The planner's batching policy
(``--policy``) serves the models without modality subsets.

A job's life here:

1. ``add`` gathers its requests (the planner adds all of a job's requests at once).
2. The next ``next_batch``/``expire`` admits it to the :class:`ModalitySelector` at its most
   accurate strategy (:mod:`.planned`) and hands the monitor a snapshot of the queue
   (:mod:`.passes`, :mod:`.monitor`).
3. Once a monitor pass has seen it, the job may be dispatched: as in the paper, a job reaches the
   worker's queue through the monitor, so a job that only a cheaper mix can save is not
   dispatched at its richest before the monitor looked. The loop never waits for the monitor; it
   serves what is ready.
4. The most urgent work (the earliest-deadline released request or planned job) picks the
   subset; the batch is that subset's released requests in deadline order, topped up from
   planned jobs whose strategy uses it (:mod:`.ready`). A job's strategy is released, and final,
   when its first request is taken: each request gets its subset and ``HeldJob.accuracy`` the
   effective accuracy.
5. ``expire`` ends the jobs the monitor found hopeless and requests that cannot finish even alone.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable

from adaserve.broker.errors import InvalidMessage
from adaserve.broker.messages import Job
from adaserve.planner.core import Decision, Feedback, Pending, Scheduler

from .costs import SubsetCosts
from .held import MoselJob, feasible_subsets, floor_problem, modalities
from .matrix import StrategyMatrix
from .passes import MonitorPasses
from .planned import PlannedJobs
from .ready import ReadyQueues
from .selector import ModalitySelector
from .shared import Selection
from .tasks import InlineTasks, Tasks

log = logging.getLogger("adaserve.planner.mosel")


class MoselScheduler(Scheduler):
    """Modality selection for one model; see the module docstring for the flow.

    The parts, each in its own module: :class:`Selection` (costs, matrix, selector),
    :class:`PlannedJobs` (admitted jobs until release), :class:`ReadyQueues` (released requests
    per subset, batch formation, backlog) and :class:`MonitorPasses` (the monitor's passes).
    """

    name = "mosel"

    def __init__(self, costs: SubsetCosts, matrix: StrategyMatrix | None, policy: str = "optimized", *,
                 model: str = "", build: Callable[[], StrategyMatrix] | None = None, tasks: Tasks | None = None,
                 period_s: float = 0.02, solve_budget_s: float = 0.05, learn_rate: float = 0.2,
                 seed: int = 0, per_subset: bool = True) -> None:
        if matrix is None and build is None:
            raise ValueError("a strategy matrix, or a way to build one, is needed")
        self.model = model
        # False: one latency scale for every subset, as before the per-subset correction (kept for
        # the live bench's side-by-side comparison of the two).
        self.per_subset = per_subset
        self.sel = Selection(costs, policy, seed=seed, solve_budget_s=solve_budget_s, learn_rate=learn_rate)
        # Inline by default: a pure object. The live planner passes its monitor thread.
        self.monitor: Tasks = tasks if tasks is not None else InlineTasks()
        # Keys of repeated job ids and the queues' tie-breaks need only be unique and increasing.
        self._seq = itertools.count(1)
        self.plans = PlannedJobs(self.sel, model)
        self.ready = ReadyQueues(self.sel, self.plans, self._seq)
        self.passes = MonitorPasses(self.sel, self.plans, self.ready, self.monitor, model=model,
                                    period_s=period_s)
        self.finalized = self.plans.finalized
        self._open: dict[str, MoselJob] = {}     # job id -> a job still gathering requests
        self._fresh: list[MoselJob] = []
        self._gathering = 0  # requests of the jobs in ``_fresh``
        if matrix is not None:
            self.sel.use(matrix)
        elif build is not None:
            log.info("%s: building its strategy matrix; jobs run at their most accurate subset until it is ready",
                     model)
            self.monitor.submit(build)

    @property
    def costs(self) -> SubsetCosts:
        return self.sel.costs

    @property
    def matrix(self) -> StrategyMatrix | None:
        return self.sel.matrix

    @property
    def selector(self) -> ModalitySelector | None:
        return self.sel.selector

    @property
    def policy(self) -> str:
        return self.sel.policy

    @property
    def period_s(self) -> float:
        return self.passes.period_s

    # -- the Scheduler protocol --------------------------------------------------------------

    def add(self, item: Pending, now: float) -> None:
        job = self._open.get(item.job_id)
        if job is None:
            n = next(self._seq)
            key = item.job_id if item.job_id not in self.plans.jobs else f"{item.job_id}/{n}"
            job = self._open[item.job_id] = MoselJob(key, item.job_id, item.floor, item.arrival, item.deadline)
            self._fresh.append(job)
        job.items.append(item)
        self._gathering += 1

    def next_batch(self, now: float, max_size: int) -> Decision:
        self._kick(now)
        expired = self._take_doomed()
        subset = self.ready.head()
        if subset is None:
            return Decision(expired=expired)
        batch = self.ready.take(subset, max_size)
        self.passes.dirty = True  # the queue moved on: spare time may be given back as accuracy
        predicted = self.ready.sent(subset, len(batch), now)
        return Decision(batch=batch, expired=expired, predicted_s=predicted, variant=subset,
                        modalities=modalities(subset))

    def expire(self, now: float) -> list[Pending]:
        self._kick(now)
        out = self._take_doomed()
        out.extend(self.ready.expire(now))
        out.extend(self.plans.hopeless(now))
        return out

    def observe(self, feedback: Feedback) -> None:
        """A batch of ``feedback.variant`` ran for ``feedback.exec_s``: correct that subset's scale
        (MOSEL's worker reports latencies to its monitor) and stop counting the batch as backlog."""
        variant = feedback.variant
        if variant not in self.ready or feedback.size < 1:
            return
        if self.sel.selector is not None:
            # Per subset: the live worker's misfit to the profile differs by subset (docs/mosel.md).
            if self.per_subset:
                self.sel.selector.observe_batch(variant, feedback.size, feedback.exec_s)
            else:
                costs = self.sel.costs
                self.sel.selector.observe(costs.run_ms(costs.subsets.index(variant), feedback.size) / 1e3,
                                          feedback.exec_s)
        self.ready.done(variant, feedback.size)

    def earliest_deadline(self) -> float | None:
        heads = self.ready.deadlines()
        top = self.plans.peek()
        if top is not None:
            heads.append(top.deadline)
        if heads:
            return min(heads)
        return math.inf if len(self) else None  # only jobs the monitor has not seen yet

    def drain_events(self) -> list[tuple[str, dict[str, object]]]:
        return self.passes.drain_events()

    def check_job(self, job: Job) -> None:
        """Admission: raise ``InvalidMessage`` when no plan can reach the job's accuracy floor."""
        fake = [Pending(job.id, r.id, job.app, job.model, 0.0, 0.0, payload=(None, r)) for r in job.requests]
        why = floor_problem(self.sel.costs, feasible_subsets(self.sel.costs, fake), job.slo.min_accuracy)
        if why:
            raise InvalidMessage("accuracy_floor", f"job {job.id}: {why}")

    def close(self) -> None:
        self.monitor.close()

    def __len__(self) -> int:
        # Requests still gathering, admitted but not released, and released but not dispatched.
        return self._gathering + self.plans.held + len(self.ready)

    # -- between the protocol calls ------------------------------------------------------------

    def _kick(self, now: float) -> None:
        """Apply the monitor's finished work, admit the jobs added since, and maybe start a pass."""
        self.passes.collect(now)
        if self._fresh:
            for job in self._fresh:
                if self.plans.admit(job):
                    self.passes.dirty = True
            self._fresh.clear()
            self._open.clear()
            self._gathering = 0
        self.passes.kick(now)

    def _take_doomed(self) -> list[Pending]:
        return self.plans.take_dropped(self.passes.take_doomed())
