"""The live pipeline under a virtual clock: the planner's loop, one worker, and the costs between.

``engine.simulate`` models a policy and its batches; this models what the live planner does
around them, with the costs a ``Calibration`` measured:

* a job reaches the planner its ingress delay after it was submitted: replaying the calibration
  run's own jobs (as many jobs as it measured), each job lands when it landed live (a producer
  behind its schedule sends in bursts) and waits its own delay, so the jobs the planner read in
  one burst are read together again; otherwise the delay is drawn among the calibration run's
  jobs at the same point of that run, so the planner's bursts of lag recur;
  there the planner's own admission control (``planner/overload.py``, the very object the live
  planner builds, told of every finished batch and remembering what finished before the run)
  refuses it ``overloaded``, ends it expired when it was read after its deadline (the live
  planner's ``_hold``: it never enters the policy), or hands it to the policy;
* the planner works in steps (``planner.service.Planner.step``): it asks the policy for a batch
  while the worker has a free slot (every free slot in one step, as the live loop does), at
  ``now`` plus the expected wait before the batch starts,
  and expires what cannot finish even after the least recent wait, as ``planner.follow`` keeps;
  a busy step lasts a sampled step time (drawn the same way), so a freed slot waits for the
  loop; an idle planner wakes when a job or a finished batch arrives, as the live one blocks
  on its streams;
* the wait before a batch starts (what the policy is asked at, and expiry's bound) is learnt as
  the live planner learns it, from when the step's commands reached the server, a drawn lag after
  the decision (``Calibration.send_ms``);
* a batch sent to an idle worker reaches it a transfer time later (drawn like the delays above,
  among the live batches sent to an idle worker, or all those of the moment when live sent none
  to an idle one: the figure of a batch sent to a busy worker is only how soon it started after
  the batch before); one sent while the worker is busy is there before it is free (live, it
  started 0.05 ms after the batch before at the median) and waits behind the batch in hand (one
  execution lane, ``slots`` batches held); calibrations without ``transfer_busy`` draw every
  batch's transfer among all and wait for whichever is later; when a batch starts, its
  requests already past their deadlines end expired unrun, as the live worker ends them
  (``workers.execute.past_deadline``), and the rest, ``k`` of them, take ``s0 + s1 k``
  plus a residual drawn among the calibration's batches at the same point of the run (the worker
  slows when the machine does): replaying the run's own jobs, among the live batches dispatched
  within 10 ms of the same moment; the policy is told the runner's share of it (``e0 + e1 k``),
  as the live worker reports;
* the planner hears of a finished batch (its slot free, the policy's feedback, the admission
  control's count) as late as the live planner heard of the batches finishing at the same moment
  of the run (``Calibration.heard_ms``);
* replaying the run's own jobs, the loop's timing is the run's (``loop.py``): it dispatches when
  the live planner dispatched, and a finished batch's slot is free to a dispatch once the worker
  acked it before the step before began; the step time and the hearing delay above then govern
  only the feedback and what comes after the run's last dispatch;
* the policy starts as the live one stood when the run began: told first of the batches the
  live planner heard finish before it (``Calibration.learnt_before``: its warm-up and earlier runs);
* a request is on time when its batch finishes by its deadline.

Pure: no clock, no Redis; the policy objects are the live ones.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Protocol, runtime_checkable

import numpy as np

from adaserve.broker.events import HEARD_SPAN_MS
from adaserve.planner.core import Pending, Scheduler, batch_feedback
from adaserve.planner.overload import Overload
from adaserve.planner.pools import slot_limit
from adaserve.planner.sim.calibrate import DRAIN_SPAN_MS, Calibration
from adaserve.planner.sim.engine import SimResult
from adaserve.planner.sim.loop import ReplayedLoop
from adaserve.planner.state import WAIT_HALF_LIFE_MS, BatchLength, Ewma, RecentFloor

__all__ = ["simulate_pipeline"]

WAKE_S = 1e-4  # an idle planner's wake-up on a new stream entry


class _Draw:
    """Samples of a calibration (ms), drawn as seconds: among those at the same point of the
    calibration run (the same fraction of its samples, give or take ``window``) when they are in
    run order, else among all."""

    def __init__(self, samples_ms: list[float], ordered: bool, rng: np.random.Generator,
                 window: float = 0.01) -> None:
        self.v = np.asarray(samples_ms) / 1e3
        self.ordered, self.rng, self.window = ordered, rng, window

    def __call__(self, position: float) -> float:
        n = self.v.size
        if not self.ordered:
            return float(self.rng.choice(self.v))
        lo = min(max(int((position - self.window) * n), 0), n - 1)
        hi = min(max(int((position + self.window) * n) + 1, lo + 1), n)
        return float(self.v[lo + int(self.rng.integers(hi - lo))])


class _TimedDraw:
    """Samples of a calibration (ms), drawn as seconds among those taken within ``window_ms`` of
    a moment of the calibration run (ms after its start); when none was, drawn by ``otherwise``
    if given, else the nearest one."""

    def __init__(self, samples_ms: list[float], at_ms: list[float], rng: np.random.Generator,
                 window_ms: float = 10.0, otherwise: _TimedDraw | None = None) -> None:
        order = np.argsort(at_ms, kind="stable")
        self.v, self.at = np.asarray(samples_ms)[order] / 1e3, np.asarray(at_ms)[order]
        self.rng, self.window, self.otherwise = rng, window_ms, otherwise

    def __call__(self, t_ms: float) -> float:
        lo, hi = np.searchsorted(self.at, [t_ms - self.window, t_ms + self.window], side="left")
        if hi <= lo and self.otherwise is not None:
            return self.otherwise(t_ms)
        if hi <= lo:  # none that close: the nearest
            i = min(int(lo), self.at.size - 1)
            if i > 0 and t_ms - self.at[i - 1] < self.at[i] - t_ms:
                i -= 1
            return float(self.v[i])
        return float(self.v[lo + int(self.rng.integers(hi - lo))])


@runtime_checkable
class _LearnsObjective(Protocol):
    """A policy that judges a batch against an objective it learns from requests (Clipper)."""

    def learn_objective(self, slo_s: float) -> None: ...


def _learn_before(scheduler: Scheduler, cal: Calibration, model: str, app: str, deadline_s: float,
                  t_first: float) -> None:
    """Tell the policy of the batches the live planner heard finish before the run, as it did:
    the live policy serves a run after a warm-up and earlier runs, and what it learnt there is
    where it starts (Clipper's batch size: started fresh at 1.2x of capacity, the simulated one
    stayed at 3-4 requests while its never-expiring queue went stale, where the live one sent
    32, and finished 0.000-0.002 of the requests against 0.23-0.48 live). Those batches' requests
    were seen live, not here: their objective is taken as this run's deadline."""
    if not cal.learnt_before:
        return
    if isinstance(scheduler, _LearnsObjective):
        scheduler.learn_objective(deadline_s)
    apps = cal.learnt_apps if len(cal.learnt_apps) == len(cal.learnt_before) else []
    for i, (at_ms, k, exec_ms) in enumerate(cal.learnt_before):
        mine = tuple(apps[i]) if apps and len(apps[i]) == k else (app,) * k
        _observe(scheduler, model, mine, exec_ms / 1e3, t_first + at_ms / 1e3)


def _replayed(cal: Calibration, t_first: float) -> ReplayedLoop | None:
    """The live planner's dispatches to replay (``loop.py``), when the calibration holds all of
    them: ``dispatch_run_ms``, or, in calibrations that predate it, the dispatches of the batches
    that ran, when none was thinned out."""
    points = cal.dispatch_run_ms
    if not points and cal.batch_run_ms and len(cal.batch_run_ms) == cal.batches:
        points = cal.batch_run_ms
    if not points:
        return None
    return ReplayedLoop([t_first + a / 1e3 for a in points], float(np.median(cal.step_ms)) / 1e3)


def _sent_idle(cal: Calibration) -> list[bool] | None:
    """Which of the calibration's batches were sent to an idle worker; None when it does not say
    (calibrations that predate ``transfer_busy``) or when none was."""
    idle = [not b for b in cal.transfer_busy]
    return idle if any(idle) else None


def _transfers(cal: Calibration, idle: list[bool] | None,
               rng: np.random.Generator) -> tuple[_Draw, _TimedDraw | None]:
    """The transfer of a batch sent to an idle worker: drawn among the live batches sent to an
    idle one (``idle``, from ``_sent_idle``: the figure of a batch sent to a busy worker is only
    the gap after the batch before); replaying the run's own batches (the second draw), among
    those sent within 10 ms of the same moment, or when live sent none to an idle worker then (the
    worker was saturated), among all the batches sent then, as for calibrations without the flags."""
    values = cal.transfer_run_ms if idle is None else [x for x, i in zip(cal.transfer_run_ms, idle) if i]
    anyhow = _Draw(values or [cal.transfer_ms], bool(values), rng)
    if len(cal.batch_run_ms) != len(cal.transfer_run_ms):
        return anyhow, None
    every = _TimedDraw(cal.transfer_run_ms, cal.batch_run_ms, rng)
    if idle is None:
        return anyhow, every
    return anyhow, _TimedDraw(values, [at for at, i in zip(cal.batch_run_ms, idle) if i], rng, otherwise=every)


def _observe(scheduler: Scheduler, model: str, apps: tuple[str, ...], exec_s: float, finished_s: float,
             token: int | None = None) -> None:
    """What the live planner tells its policy of a finished batch of requests of ``apps``."""
    k = len(apps)
    scheduler.observe(batch_feedback(model, k, exec_s, apps, (exec_s,) * k, "sim", finished_s=finished_s,
                                     token=token))


def simulate_pipeline(scheduler: Scheduler, jobs_s: np.ndarray, requests_per_job: int, deadline_s: float,
                      cal: Calibration, *, slots: int = 2, max_batch: int = 32, seed: int = 0,
                      model: str = "sim", app: str = "default", overload: Overload | None = None,
                      queue_ms: float = 0.0) -> SimResult:
    """Serve jobs submitted at ``jobs_s`` (sorted, seconds) with ``scheduler`` through the pipeline;
    with ``overload``, jobs are first admitted by it as the live planner admits them. The worker
    holds at most ``slots`` batches, fewer when its batches are long (``queue_ms``, as the live
    planner's ``pools.slot_limit``; 0: every slot)."""
    if slots < 1 or max_batch < 1 or requests_per_job < 1 or not deadline_s > 0 or not queue_ms >= 0:
        raise ValueError("slots, max_batch and requests_per_job >= 1, a positive deadline and queue_ms >= 0 "
                         "are required")
    rng = np.random.default_rng(seed)
    n_jobs = int(jobs_s.size)
    n = n_jobs * requests_per_job
    resid = _Draw(cal.service_residual_ms, True, rng)
    idle = _sent_idle(cal)
    transfer, timed_transfer = _transfers(cal, idle, rng)
    # With the flags, a batch the worker is busy for reaches it before it is free, as live, and
    # the worker takes the measured service time. Calibrations without them replay as before:
    # their transfers start batches early, which a service held up to the runner's mean offset.
    flagged = idle is not None
    timed = None
    own = False  # the run's own jobs replayed
    # how late the planner heard of the batches that finished in the same span of the run: a
    # stall of its loop delays every finish of the moment, which independent draws would spread
    heard = _TimedDraw(cal.heard_ms, cal.heard_run_ms, rng, window_ms=0.6 * HEARD_SPAN_MS) if cal.heard_ms else None
    step = _Draw(cal.step_ms, cal.step_ordered, rng)
    # its own generator: calibrations without it draw everything else as before
    send = _Draw(cal.send_ms, True, np.random.default_rng([seed, 1])) if cal.send_ms else None
    lag = _Draw(cal.ingress_ms, cal.ingress_ordered, rng, window=0.005)
    # when each job is read and admitted by the planner, in that order
    if cal.ingress_ordered and len(cal.ingress_ms) == n_jobs and len(cal.submitted_run_ms) == n_jobs:
        # in ms of the run first, rounded: the jobs of one read must be read at the very same time;
        # and never before a job that landed earlier (one planner reads its stream in order), as
        # the rounding alone let a job straddle 0.001 ms and be read ahead of the rest of its read
        own = True
        landed = np.asarray(cal.submitted_run_ms)
        read = np.maximum.accumulate(np.round(landed + np.asarray(cal.ingress_ms), 3))
        jobs_s, seen = float(jobs_s[0]) + landed / 1e3, float(jobs_s[0]) + read / 1e3
        if timed_transfer is not None and len(cal.batch_run_ms) == len(cal.service_residual_ms):
            timed = (_TimedDraw(cal.service_residual_ms, cal.batch_run_ms, rng), timed_transfer)
    elif cal.ingress_ordered and len(cal.ingress_ms) == n_jobs:
        seen = jobs_s + np.asarray(cal.ingress_ms) / 1e3
    else:
        seen = np.asarray([t + lag(j / max(n_jobs - 1, 1)) for j, t in enumerate(jobs_s.tolist())])
    # a run of several apps replayed: each job's own app and deadline (``Calibration.job_apps``)
    several = own and len(cal.job_apps) == n_jobs
    job_app = cal.job_apps if several else [app] * n_jobs
    job_dl = [cal.app_deadline_ms[a] / 1e3 for a in cal.job_apps] if several else [deadline_s] * n_jobs
    order = np.argsort(seen, kind="stable")
    t_first = float(jobs_s[0]) if n_jobs else 0.0
    loop = _replayed(cal, t_first) if timed is not None else None
    span = max(float(jobs_s[-1]) - t_first, 1e-9) if n_jobs else 1.0
    ended = np.zeros(n, dtype=np.int8)  # 0 pending, 1 met, 2 late, 3 expired, 4 refused
    # The admission control counts whole seconds of the server's clock: the simulated clock is
    # put on it (the run's first submission at ``start_ms``), after what finished before the run.
    epoch = (cal.start_ms / 1000.0 - t_first) if cal.start_ms is not None else 0.0
    if overload is not None:
        if cal.drained_spans:
            for at_ms, done in cal.drained_spans:
                overload.finished(model, done, (at_ms + DRAIN_SPAN_MS / 2) / 1000.0)
        else:
            for sec, done in cal.drained:
                overload.finished_in_second(model, done, sec)
    _learn_before(scheduler, cal, model, app, deadline_s, t_first)
    # (finish, tie, batch, sent, exec, busy, the decision's token)
    running: list[tuple[float, int, list[Pending], float, float, bool, int | None]] = []
    noticed: list[tuple[float, int, list[Pending], float, float, bool, int | None, float]] = []  # (heard, ..., finish)
    tie = itertools.count()
    inflight, lane_free, nxt_job = 0, 0.0, 0
    wait = Ewma()  # dispatch-to-start plus the worker's time around the runner, as the planner keeps it
    floor = RecentFloor()  # the same gap for batches sent to an idle worker (ms), as the planner keeps
    ran_ms = BatchLength()  # the runner's ms a batch, as the planner keeps it for the slot limit
    for _, _, ms in cal.learnt_before:  # from what it heard before the run, as the live one did
        ran_ms.add(ms)
    limit = slot_limit(slots, 1, queue_ms, ran_ms.value)
    batches = in_batches = 0
    busy = 0.0
    read_at, late_in_read = -np.inf, 0  # the jobs of the current read that were past their deadlines

    def end(items: list[Pending], code: int) -> None:
        for p in items:
            if ended[p.seq]:
                raise RuntimeError(f"request {p.seq} ended twice")
            ended[p.seq] = code

    now = t_first
    gate = t_first  # the planner's loop can dispatch again from here on
    while nxt_job < n_jobs or running or noticed or len(scheduler):
        while running and running[0][0] <= now:  # finished: results out; the planner hears later
            fin, _, batch, sent, exec_s, was_busy, token = heapq.heappop(running)
            end([p for p in batch if fin <= p.deadline + 1e-12], 1)
            end([p for p in batch if fin > p.deadline + 1e-12], 2)
            late = heard((fin - t_first) * 1e3) if heard is not None else 0.0
            heapq.heappush(noticed, (fin + late, next(tie), batch, sent, exec_s, was_busy, token, fin))
            if loop is not None:  # its slot frees when the live loop would have seen it free
                loop.finished(fin)
        while noticed and noticed[0][0] <= now:  # the planner reads of it: slot free, feedback learnt
            _, _, batch, sent, exec_s, was_busy, token, fin = heapq.heappop(noticed)
            if loop is None:
                inflight -= 1
            gap = max(fin - exec_s - sent, 0.0)
            wait.add(gap, fin)
            if not was_busy:
                floor.add(fin * 1000.0, gap * 1000.0)
            k = len(batch)
            if not k:  # every request of it ended unrun: nothing ran to learn from
                continue
            ran_ms.add(exec_s * 1000.0)
            limit = slot_limit(slots, 1, queue_ms, ran_ms.value)
            if overload is not None:
                overload.finished(model, k, fin + epoch)
            _observe(scheduler, model, tuple(p.app for p in batch), exec_s, fin, token)
        while nxt_job < n_jobs and seen[order[nxt_job]] <= now:  # read and admitted by now
            j = int(order[nxt_job])
            t0, dl, japp = float(jobs_s[j]), job_dl[j], job_app[j]
            nxt_job += 1
            if seen[j] != read_at:
                read_at, late_in_read = float(seen[j]), 0
            if overload is not None and overload.check(model, len(scheduler) + late_in_read, requests_per_job,
                                                       (t0 + epoch) * 1e3, dl * 1e3,
                                                       (float(seen[j]) + epoch) * 1e3) is not None:
                ended[j * requests_per_job:(j + 1) * requests_per_job] = 4
                continue
            if seen[j] >= t0 + dl:
                # read after its deadline: the live planner ends it with the step's expiries and it
                # never enters the policy (``Planner._hold``), though the read's later verdicts
                # count it; in a policy that never expires (Clipper) it would swell the queue
                # that admission control reads
                ended[j * requests_per_job:(j + 1) * requests_per_job] = 3
                late_in_read += requests_per_job
                continue
            scheduler.add_many([Pending(str(j), str(r), japp, model, t0, t0 + dl, seq=j * requests_per_job + r)
                                for r in range(requests_per_job)], float(seen[j]))
        low = floor.value(now * 1000.0) / 1000.0
        end(scheduler.expire(now + low), 3)
        sent = False  # the planner's dispatch fills every free slot in one step (Planner._dispatch)
        can = now >= gate
        if loop is not None:
            replaying = loop.replaying
            at_point, released = loop.dispatch(now)
            inflight -= released
            can = at_point if replaying else can
        while can and inflight < limit and len(scheduler):
            d = scheduler.next_batch(now + (wait.recent(now, low, WAIT_HALF_LIFE_MS / 1e3) if inflight and wait.n
                                            else low), max_batch)
            end(d.expired, 3)
            if not d.batch:  # the policy holds its requests back: ask again a step later
                gate = now + max(step((now - t_first) / span), WAKE_S)
                break
            if timed is not None:  # the live batches sent at the same moment of the run
                r_s, x_s = timed[0]((now - t_first) * 1e3), timed[1]((now - t_first) * 1e3)
            else:
                r_s, x_s = resid((now - t_first) / span), transfer((now - t_first) / span)
            start = lane_free if flagged and lane_free > now else max(now + x_s, lane_free)
            ran = [p for p in d.batch if p.deadline > start]
            if len(ran) < len(d.batch):
                end([p for p in d.batch if p.deadline <= start], 3)
            k = len(ran)
            c = cal.line_of({p.app for p in ran}) if several else (
                cal.service_c0_ms, cal.service_c1_ms, cal.exec_c0_ms, cal.exec_c1_ms)
            exec_s = (c[2] + c[3] * k) / 1e3 if k else 0.0
            # not held up to the runner's mean (``exec_s``) with the flags: the residuals are skewed
            # (most batches run well under the line), and a floor at the mean made the simulated
            # worker a third slower at overload than the live one
            service = (max((c[0] + c[1] * k) / 1e3 + r_s, 0.0 if flagged else exec_s)
                       if k else 0.0)
            lane_free = start + service
            inflight += 1
            if k:
                batches, in_batches, busy = batches + 1, in_batches + k, busy + service
            # the wait the planner learns runs from when the step's commands reached the server
            # (drawn apart from the transfer, but never after the batch started)
            stamped = min(now + send((now - t_first) / span), start) if send is not None else now
            heapq.heappush(running, (lane_free, next(tie), ran, stamped, exec_s, inflight > 1, d.token))
            sent = True
        if sent:
            gate = now + step((now - t_first) / span)
        # the next moment anything happens: a job admitted, a batch done, the loop free again
        times = [float(seen[order[nxt_job]]) if nxt_job < n_jobs else np.inf]
        if running:
            times.append(running[0][0])
        if noticed:
            times.append(noticed[0][0])
        if loop is not None and (loop.replaying or inflight >= limit):
            at = loop.next_at()
            if at is not None:
                times.append(at)
        elif len(scheduler):
            freed = [x[0] for x in noticed[:1]] + [x[0] for x in running[:1]]
            times.append(max(gate, now) if inflight < limit else max(gate, min(freed) + WAKE_S))
        nxt = min(times)
        if not np.isfinite(nxt):  # nothing else will happen: let the policy expire what is left
            first = scheduler.earliest_deadline()
            nxt = max(now, first if first is not None else now) + 1e-6
        now = max(nxt, now + 1e-9) if nxt <= now else nxt
    if np.any(ended == 0):
        raise RuntimeError("some requests never ended")
    counts = np.bincount(ended, minlength=5)
    return SimResult(n, int(counts[1]), int(counts[2]), int(counts[3]), batches,
                     in_batches / batches if batches else 0.0, busy, max(now - t_first, 1e-9),
                     np.packbits(ended == 1).tobytes(), rejected=int(counts[4]),
                     rejected_bits=np.packbits(ended == 4).tobytes())
