"""What a live run's telemetry says the pipeline around the policy costs (pure; no I/O).

The simulator of ``engine.py`` models execution and batching only. Live, a request also waits
for the planner to read it (ingress: the producer's XADD until ``job.accepted``), a batch travels
to the worker and waits there behind the batch in hand, and the worker spends time around the
model call (decoding, results, the finaliser). ``calibrate`` measures each of these from the
events of one run, so that ``pipeline.simulate_pipeline`` can replay the same arrivals with the
same costs and say what a policy would finish.

From every ``batch.finished`` whose ``batch.dispatched`` is known: its requests' ``total_ms`` and
``queue_ms`` give when they were submitted and when the batch started, so

* ``transfer``: dispatch to start not spent behind the worker's previous batch, per batch in run
  order (and its lower quartile), and whether the worker was still running that previous batch
  when it was dispatched (the figure of such a batch is only the gap after that one),
* ``service``: start to the finished event, fitted as ``s0 + s1 * size`` with the residuals kept
  (the size the worker ran: requests it ended unrun past their deadlines are not counted, and a
  batch that ran none gives no sample),
* ``exec``: the runner's own time (what policies learn from), fitted the same way,
* ``step``: how long the planner's loop is busy in a step that sent a batch (its wall time less its
  blocking reads), as its ``planner.state`` reports give it: the simulator lets the loop send again
  that long after it sent. Reports that predate it leave the step to be inferred from the
  ``job.accepted`` bursts (the loop reads the ingress stream once a step; the gap before a burst
  of two or more jobs). Those gaps also hold the time a loop with no free slot waited for a
  finish, which the simulator charges again as the hearing delay: its loop sent a fifth fewer
  batches than live (FIFO's batches of 8 at 0.8x: 1,521-1,763 against 1,976-2,215, finish rates
  0.14-0.22 under; halving those steps closed most of it),
* ``ingress``: per job, ``job.accepted`` (or ``job.rejected``: a job refused ``overloaded``
  waited as long to be read) minus its submission (``submitted_ms`` of the event; from the
  finished requests' timings for events that lack it, which misses the jobs that expired),
* ``heard``: how long after a batch finished the planner came to dispatch in the step that read
  of it (its ``planner.state`` reports: quantiles per 100 ms of finishes; before them, when it
  read of it, which left out the admission a step waiting for a slot does after its read), so
  that a freed slot and the policy's feedback wait
  as long in the simulator: a busy planner loop hears of finishes 2-7 ms late at the median, which
  bounds a policy of small batches (FIFO) and Clockwork's timing more than the execution does,
* the admission control's memory (``planner/overload.py``): what the planner had seen finish in
  the seconds before the run (``before``: its events since the planner started), and the server
  time of the run's first submission, so the simulator refuses jobs on the same drain rate,
* what the policy learnt before the run: the batches of ``before`` in the order they finished
  (their size run and exec ms), which the simulator tells its policy first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from adaserve.broker.errors import DataError, InvalidArgument
from adaserve.broker.events import (
    HEARD_SPAN_MS,
    BatchDispatched,
    BatchFinished,
    Event,
    JobAccepted,
    JobRejected,
    PlannerState,
)
from adaserve.broker.violations import explain

__all__ = ["Calibration", "calibrate"]

MAX_SAMPLES = 4096  # samples kept per distribution, evenly spaced
# Ingress delays are kept one per job up to this many: the simulator then replays the run's own
# jobs with their own delays, so the jobs the planner read in one burst arrive together again.
MAX_JOBS = 65536
DRAIN_SPAN_MS = 100  # the spans admission control measures its drain rate over (``Overload.span_s``)


class Calibration(BaseModel):
    """Pipeline costs in milliseconds, as measured in one live run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    batches: int = Field(ge=1)
    ingress_ms: list[float] = Field(min_length=1)
    # Whether those delays are in the order the jobs were submitted: the planner falls behind in
    # bursts (a long ingress read, a collection), so the simulator then draws a job's delay among
    # the jobs at the same point of the run, or, replaying the run's own jobs (one delay per
    # job), gives each job its own.
    ingress_ordered: bool = False
    transfer_ms: float = Field(ge=0)
    # Per batch, in run order: dispatch to start less any time the worker was still busy with
    # the batch before (what the lane model adds itself). Empty in calibrations that predate it.
    transfer_run_ms: list[float] = Field(default_factory=list)
    # Per batch of ``transfer_run_ms``: whether the worker was still running the batch before when
    # it was dispatched. Such a batch's figure is only how soon it started after that one (0.05
    # ms at the median), not how long it took to reach the worker (1-6 ms when the machine is
    # saturated): the simulator draws a transfer among the other batches, and has a batch it sends
    # to a busy worker wait only for that worker. Empty in calibrations that predate it.
    transfer_busy: list[bool] = Field(default_factory=list)
    service_c0_ms: float = Field(ge=0)
    service_c1_ms: float = Field(ge=0)
    service_residual_ms: list[float] = Field(min_length=1)  # in run order (batch by batch)
    exec_c0_ms: float = Field(ge=0)
    exec_c1_ms: float = Field(ge=0)
    # The planner's busy steps (read, admit, dispatch, round trips) that sent a batch, from its
    # reports (or, for runs before those, the gaps between its bursts of job acceptances), in
    # run order when ``step_ordered``.
    step_ms: list[float] = Field(default_factory=lambda: [0.0], min_length=1)
    step_ordered: bool = False
    # Per batch sent, in run order, the ms from its decision to the step's commands reaching the
    # server, from the planner's reports: the planner measures the wait before a batch starts
    # from there, so the simulator does too. Empty in calibrations that predate it (the wait is
    # then measured from the decision).
    send_ms: list[float] = Field(default_factory=list)
    # Server time (ms) of the run's first submission, where the simulator's clock starts (the
    # admission control counts whole seconds of that clock), and the requests of the model that
    # finished per whole second in the horizon before it: ``[second, requests]``.
    start_ms: float | None = None
    # When each job of the run landed (ms after ``start_ms``), one per ingress delay: a producer
    # that falls behind its schedule sends what is due in a burst, so replaying the run's own
    # jobs replays these landings rather than the schedule. Empty past ``MAX_JOBS``.
    submitted_run_ms: list[float] = Field(default_factory=list)
    # When each batch of ``transfer_run_ms`` / ``service_residual_ms`` was dispatched (ms after
    # ``start_ms``): the simulator's batches then draw the costs of live batches sent at the same
    # moment, so a slow spell of the machine falls on the same stretch of the run.
    batch_run_ms: list[float] = Field(default_factory=list)
    # Every dispatch of the run (``batch.dispatched`` of the model, those whose requests all ended
    # unrun too), ms after ``start_ms``, in order: the simulator replays the planner's loop with
    # them (``planner/sim/loop.py``). Empty in calibrations that predate it or past ``MAX_JOBS``.
    dispatch_run_ms: list[float] = Field(default_factory=list)
    drained: list[tuple[int, int]] = Field(default_factory=list)
    # The same per 100 ms span (``[span start in ms, requests]``), the resolution the admission
    # control measures its drain rate at; calibrations that predate it spread each second evenly.
    drained_spans: list[tuple[int, int]] = Field(default_factory=list)
    # How long after a batch finished the planner heard of it, and when it finished (ms after
    # ``start_ms``): each span of a ``planner.state`` report as its quantiles, at the span's middle.
    # Empty in calibrations that predate it (the simulator then hears at once).
    heard_ms: list[float] = Field(default_factory=list)
    heard_run_ms: list[float] = Field(default_factory=list)
    # The worker's slots, as the planner's reports gave them (the most batches it kept in flight):
    # the simulated planner keeps to as many. None in calibrations that predate them.
    slots: int | None = Field(default=None, ge=1)
    # The planner's ``queue_ms`` (``pools.slot_limit``), as its reports gave it: the simulated
    # planner holds as few batches as the live one. None in calibrations that predate it: every slot.
    queue_ms: float | None = Field(default=None, ge=0.0, le=10_000.0)
    # The whole batches of the model the planner heard finish before the run (since it started,
    # as ``before`` gives them), in the order they finished: ``[ms before start_ms, requests run,
    # exec ms]``. The live policy learnt from each (Clipper grows its batch size a step per full
    # batch: a fresh one at 1.2x of capacity stayed at 3-4 requests where the live one, grown in
    # the earlier runs, sent 32), so the simulated policy is told of them first. Empty in
    # calibrations that predate it; ``adaserve sim --calibrate`` keeps the horizon's only.
    learnt_before: list[tuple[float, int, float]] = Field(default_factory=list)
    # The apps of each request of those batches, for a run of several apps; empty otherwise.
    learnt_apps: list[list[str]] = Field(default_factory=list)
    # A run of several apps (``bench apps``): each job's app, one per ``submitted_run_ms``; each
    # app's deadline (ms, the median of its jobs'); and per app, the lines of the batches whose
    # dearest request was that app's (``[service c0, service c1, exec c0, exec c1]`` ms), apps
    # ordered cheapest first (``app_order``): a batch runs at its dearest request's pace, so the
    # simulator times it by that app's lines. Empty for a run of one app.
    job_apps: list[str] = Field(default_factory=list)
    app_deadline_ms: dict[str, float] = Field(default_factory=dict)
    app_order: list[str] = Field(default_factory=list)
    app_lines: dict[str, tuple[float, float, float, float]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_flag_per_transfer(self) -> Calibration:
        if self.transfer_busy and len(self.transfer_busy) != len(self.transfer_run_ms):
            raise ValueError(f"transfer_busy has {len(self.transfer_busy)} flags for "
                             f"{len(self.transfer_run_ms)} transfers (transfer_run_ms); one each, or none")
        if self.job_apps and len(self.job_apps) != len(self.submitted_run_ms):
            raise ValueError(f"job_apps has {len(self.job_apps)} apps for {len(self.submitted_run_ms)} jobs "
                             "(submitted_run_ms); one each, or none")
        if set(self.app_lines) - set(self.app_order) or set(self.job_apps) - set(self.app_deadline_ms):
            raise ValueError("every app of app_lines must be in app_order, and every app of job_apps in app_deadline_ms")
        return self

    def line_of(self, apps: Iterable[str]) -> tuple[float, float, float, float]:
        """The service and exec lines (ms) of a batch holding requests of ``apps``: its dearest
        app's, else the run's."""
        rank = {a: i for i, a in enumerate(self.app_order)}
        dearest = max(apps, key=lambda a: rank.get(a, -1), default=None)
        got = self.app_lines.get(dearest) if dearest is not None else None
        return got if got is not None else (self.service_c0_ms, self.service_c1_ms, self.exec_c0_ms, self.exec_c1_ms)

    def save(self, path: Path) -> None:
        path.write_text(self.model_dump_json(indent=1))

    @classmethod
    def load(cls, path: Path) -> Calibration:
        """The calibration saved at ``path``; ``DataError`` (a ``ValueError``) when it is none."""
        try:
            return cls.model_validate(json.loads(path.read_text()))
        except json.JSONDecodeError as exc:
            raise DataError(f"{path} is not a saved calibration: not JSON ({exc})") from None
        except ValidationError as exc:
            raise DataError(f"{path} is not a saved calibration: {explain(exc)}") from None


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least squares ``y = c0 + c1 x`` with both coefficients floored at 0."""
    if x.size < 2 or np.ptp(x) <= 0:
        return float(max(np.median(y), 0.0)), 0.0
    c1, c0 = np.polyfit(x, y, 1)
    if c1 < 0:
        return float(max(np.median(y), 0.0)), 0.0
    if c0 < 0:
        return 0.0, float(max(np.sum(x * y) / np.sum(x * x), 0.0))
    return float(c0), float(c1)


def _thinned(values: np.ndarray, most: int = MAX_SAMPLES) -> np.ndarray:
    """``values`` kept in their order, thinned evenly to ``most``."""
    if values.size > most:
        values = values[np.linspace(0, values.size - 1, most).round().astype(int)]
    return values


def _ordered(values: np.ndarray, most: int = MAX_SAMPLES) -> list[float]:
    """``_thinned``, rounded."""
    return [round(float(x), 4) for x in _thinned(values, most)]


def calibrate(events: Iterable[Event], model: str | None = None, *, before: Iterable[Event] = (),
              horizon_s: int = 30) -> Calibration:
    """Measure the pipeline's costs from one run's events (those of ``model``, or the only one);
    ``before``: the planner's events before the run (what its admission control remembers)."""
    sent: dict[str, BatchDispatched] = {}
    accepted: dict[str, JobAccepted] = {}
    refused: list[JobRejected] = []
    finished: list[BatchFinished] = []
    reports: list[PlannerState] = []
    for ev in events:
        if isinstance(ev, PlannerState):
            reports.append(ev)
        elif isinstance(ev, BatchDispatched):
            sent[ev.batch_id] = ev
        elif isinstance(ev, JobAccepted):
            accepted[ev.job_id] = ev
        elif isinstance(ev, JobRejected):
            refused.append(ev)
        elif isinstance(ev, BatchFinished) and ev.part is None and ev.items:
            finished.append(ev)
    models = {f.model for f in finished}
    if model is None:
        if len(models) != 1:
            raise InvalidArgument(f"the run served {len(models)} models ({', '.join(sorted(models))}); name one")
        model = models.pop()
    # every accepted job's delay, the ones that later expired too, in the order they were submitted
    lags = sorted([(a.submitted_ms, a.ts, a.app) for a in accepted.values() if a.model == model and a.submitted_ms is not None]
                  + [(x.submitted_ms, x.ts, x.app) for x in refused if x.model == model and x.submitted_ms is not None])
    size: list[int] = []
    wait: list[float] = []
    service: list[float] = []
    execs: list[float] = []
    transfer: list[float] = []
    busy: list[bool] = []
    ingress: list[float] = []
    sent_at: list[float] = []
    batch_apps: list[frozenset[str]] = []
    prev_end = -np.inf
    for f in sorted(finished, key=lambda f: f.ts):
        d = sent.get(f.batch_id)
        if f.model != model or d is None:
            continue
        ran = f.ran_items()
        if not ran:  # every request ended unrun: no service to learn from (the simulator drops them itself)
            continue
        started = float(np.median([f.ts - it.total_ms + it.queue_ms for it in ran]))
        size.append(f.ran)
        batch_apps.append(frozenset(it.app for it in ran))
        sent_at.append(d.ts)
        wait.append(max(started - d.ts, 0.0))
        transfer.append(max(started - max(d.ts, prev_end), 0.0))
        busy.append(prev_end > d.ts)
        prev_end = f.ts
        service.append(max(f.ts - started, 0.0))
        execs.append(f.exec_ms)
        if not lags:  # events without submitted_ms: the jobs that finished tell their own delay
            subs = {it.job_id: f.ts - it.total_ms for it in f.items}
            ingress.extend(max(accepted[j].ts - t, 0.0) for j, t in subs.items() if j in accepted)
    if lags:
        # One planner reads the stream in order, so a job was read no later than any job
        # submitted after it: the events' own times are stamped at different points of the read
        # (a refusal's at its start, an acceptance's after the job was registered).
        read = np.minimum.accumulate(np.asarray([ts for _, ts, _ in lags])[::-1])[::-1]
        ingress = [max(float(ts) - sub, 0.0) for (sub, _, _), ts in zip(lags, read)]
    if not size or not ingress:
        raise DataError(f"no finished batches of {model!r} with their dispatch and acceptance in these events")
    k, svc = np.asarray(size, dtype=np.float64), np.asarray(service)
    s0, s1 = _line(k, svc)
    e0, e1 = _line(k, np.asarray(execs))
    apps = _apps(lags, accepted.values(), model)
    order, lines, line_svc = (_app_lines(batch_apps, k, svc, np.asarray(execs), (s0, s1, e0, e1)) if apps[0]
                              else ([], {}, s0 + s1 * k))
    learnt = _learnt(before, model, lags[0][0]) if lags else ([], [])
    steps = _measured(reports, lambda r: (r.steps, r.step_quantiles_ms)) or _steps(sorted(ts for _, ts, _ in lags))
    heard, heard_at = _heard(reports, lags[0][0]) if lags else ([], [])
    return Calibration(model=model, batches=len(size),
                       ingress_ms=_ordered(np.asarray(ingress) if lags else np.sort(ingress), MAX_JOBS),
                       ingress_ordered=bool(lags), transfer_ms=float(np.percentile(wait, 25)),
                       transfer_run_ms=_ordered(np.asarray(transfer)),
                       transfer_busy=[bool(x) for x in _thinned(np.asarray(busy))], service_c0_ms=s0, service_c1_ms=s1,
                       service_residual_ms=_ordered(svc - line_svc), exec_c0_ms=e0, exec_c1_ms=e1,
                       step_ms=steps or [0.5], step_ordered=bool(steps),
                       send_ms=_measured(reports, lambda r: (r.sends, r.send_quantiles_ms)),
                       start_ms=lags[0][0] if lags else None,
                       batch_run_ms=_ordered(np.asarray(sent_at) - lags[0][0]) if lags else [],
                       dispatch_run_ms=_dispatches(sent.values(), model, lags[0][0]) if lags else [],
                       submitted_run_ms=[round(sub - lags[0][0], 3) for sub, _, _ in lags] if len(lags) <= MAX_JOBS else [],
                       job_apps=apps[0] if len(lags) <= MAX_JOBS else [],
                       app_deadline_ms=apps[1] if len(lags) <= MAX_JOBS else {}, app_order=order, app_lines=lines,
                       drained=_drained(before, model, lags[0][0] / 1000.0, horizon_s) if lags else [],
                       drained_spans=_drained(before, model, lags[0][0] / 1000.0, horizon_s, span_ms=DRAIN_SPAN_MS)
                       if lags else [],
                       heard_ms=heard, heard_run_ms=heard_at, slots=_slots(reports),
                       queue_ms=next((r.queue_ms for r in reversed(reports) if r.queue_ms is not None), None),
                       learnt_before=learnt[0], learnt_apps=learnt[1] if apps[0] else [])


def _apps(lags: list[tuple[float, float, str]], accepted: Iterable[JobAccepted],
          model: str) -> tuple[list[str], dict[str, float]]:
    """For a run of several apps, each job's app (in the order of ``lags``) and each app's
    deadline (the median of its accepted jobs'); nothing for a run of one app."""
    names = {app for _, _, app in lags}
    if len(names) < 2:
        return [], {}
    per: dict[str, list[float]] = {}
    for a in accepted:
        if a.model == model:
            per.setdefault(a.app, []).append(a.deadline_ms)
    if names - set(per):  # an app every job of which was refused: its deadline is not known
        return [], {}
    return [app for _, _, app in lags], {app: float(np.median(d)) for app, d in per.items() if app in names}


def _app_lines(batch_apps: list[frozenset[str]], k: np.ndarray, svc: np.ndarray, execs: np.ndarray,
               run: tuple[float, float, float, float]) -> tuple[list[str], dict[str, tuple[float, float, float, float]],
                                                              np.ndarray]:
    """Apps ordered by what their batches of them alone ran (the runner's ms against the run's
    line at their sizes, median), each app's service and exec lines over the batches whose
    dearest app it is, and each batch's service line value (for the residuals); ``run``: the
    run's service and exec lines."""
    s0, s1, e0, e1 = run
    rel: dict[str, list[float]] = {}
    for apps, size, x in zip(batch_apps, k, execs):
        if len(apps) == 1:
            rel.setdefault(next(iter(apps)), []).append(x / max(e0 + e1 * size, 1e-9))
    order = sorted(rel, key=lambda a: (float(np.median(rel[a])), a))
    rank = {a: i for i, a in enumerate(order)}
    dearest = [max(apps, key=lambda a: rank.get(a, -1)) for apps in batch_apps]
    lines: dict[str, tuple[float, float, float, float]] = {}
    at = s0 + s1 * k
    for app in order:
        mine = np.asarray([d == app for d in dearest])
        if mine.sum() < 3:  # too few batches for a line: the run's serves it
            continue
        a0, a1 = _line(k[mine], svc[mine])
        x0, x1 = _line(k[mine], execs[mine])
        lines[app] = (round(a0, 4), round(a1, 4), round(x0, 4), round(x1, 4))
        at[mine] = a0 + a1 * k[mine]
    return order, lines, at


def _dispatches(sent: Iterable[BatchDispatched], model: str, start_ms: float) -> list[float]:
    """Each dispatch of ``model`` in ms after ``start_ms``, in time order; none past ``MAX_JOBS``
    (a replay needs every one)."""
    out = sorted(round(d.ts - start_ms, 3) for d in sent if d.model == model)
    return out if len(out) <= MAX_JOBS else []


def _slots(reports: list[PlannerState]) -> int | None:
    """The most slots a pool had in the run's reports (the simulator models one worker)."""
    return max((n for r in reports for n in r.slots.values() if n > 0), default=None)


def _heard(reports: list[PlannerState], start_ms: float) -> tuple[list[float], list[float]]:
    """The reports' quantiles of how late the planner heard of finishes, each at the middle of the
    span of finishes it describes."""
    values: list[float] = []
    at: list[float] = []
    for rep in reports:
        for span in rep.heard:
            values.extend(span.quantiles_ms)
            at.extend([round(span.at_ms + HEARD_SPAN_MS / 2.0 - start_ms, 3)] * len(span.quantiles_ms))
    return values, at


def _drained(events: Iterable[Event], model: str, start_s: float, horizon_s: int,
             span_ms: int = 1000) -> list[tuple[int, int]]:
    """Requests of ``model`` finished before ``start_s`` per whole second (``span_ms`` 1000: keyed
    by the second) or per span (keyed by its start in ms), as the planner counts them
    (``Overload.finished``: whole batches, the last part of a split one)."""
    per: dict[int, int] = {}
    for ev in events:
        if isinstance(ev, BatchFinished) and ev.model == model and ev.next_pool is None \
                and start_s - horizon_s <= ev.ts / 1000.0 < start_s:
            key = int(ev.ts / 1000.0) if span_ms == 1000 else int(ev.ts // span_ms) * span_ms
            per[key] = per.get(key, 0) + ev.ran
    return sorted(per.items())


def _learnt(events: Iterable[Event], model: str,
            start_ms: float) -> tuple[list[tuple[float, int, float]], list[list[str]]]:
    """The batches of ``model`` finished before ``start_ms`` that the planner's policy learnt from
    (``Follower._finished``: whole batches that ran a request), oldest first, the last
    ``MAX_JOBS`` of them; and the apps of each one's requests."""
    done = sorted(((ev.ts, ev.ran, ev.exec_ms), [i.app for i in ev.ran_items()]) for ev in events
                  if isinstance(ev, BatchFinished) and ev.model == model and ev.part is None and ev.ran > 0
                  and ev.ts < start_ms)[-MAX_JOBS:]
    return [(round(ts - start_ms, 3), k, round(x, 4)) for (ts, k, x), _ in done], [apps for _, apps in done]


def _measured(reports: list[PlannerState], field: Callable[[PlannerState], tuple[int, list[float]]],
              per_report: int = 64, min_steps: int = 20) -> list[float]:
    """A figure the planner's reports give as a count and five quantiles (the busy times of its
    steps that sent a batch, the sends' lags), in run order: each quantile stands for a fifth of
    the report's count, up to ``per_report`` samples a report."""
    out: list[float] = []
    for rep in sorted(reports, key=lambda r: r.ts):
        count, q = field(rep)
        if count and q:
            n = max(min(count, per_report) // len(q), 1)
            out.extend(v for v in q for _ in range(n))
    return _ordered(np.asarray(out)) if len(out) >= min_steps else []


def _steps(accepted_ms: list[float], burst_gap_ms: float = 0.3, min_steps: int = 20) -> list[float]:
    """Busy step times from the times jobs were accepted (sorted): a step is the gap between the
    starts of two bursts of acceptances when the later burst held two jobs or more."""
    t = np.asarray(accepted_ms, dtype=np.float64)
    if t.size < 3:
        return []
    first = np.flatnonzero(np.concatenate([[True], np.diff(t) > burst_gap_ms]))
    sizes = np.diff(np.concatenate([first, [t.size]]))
    gaps = np.diff(t[first])
    busy = gaps[sizes[1:] >= 2]
    return _ordered(busy) if busy.size >= min_steps else []
