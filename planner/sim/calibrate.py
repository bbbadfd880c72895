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
  order (and its lower quartile),
* ``service``: start to the finished event, fitted as ``s0 + s1 * size`` with the residuals kept,
* ``exec``: the runner's own time (what policies learn from), fitted the same way,
* ``step``: the planner's loop reads the ingress stream once a step, so ``job.accepted`` events
  come in bursts; the gap before a burst of two or more jobs (which piled up meanwhile) is a busy
  step. Live, under load, these steps bounded throughput before the worker did,
* ``ingress``: per job, ``job.accepted`` minus its submission (``submitted_ms`` of the event;
  from the finished requests' timings for events that lack it, which misses the jobs that
  expired).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from adaserve.broker.events import BatchDispatched, BatchFinished, Event, JobAccepted, JobExpired

__all__ = ["Calibration", "calibrate"]

MAX_SAMPLES = 4096  # samples kept per distribution, evenly spaced in sorted order


class Calibration(BaseModel):
    """Pipeline costs in milliseconds, as measured in one live run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="after")
    def _paired(self) -> "Calibration":
        if self.ingress_at_ms is not None and len(self.ingress_at_ms) != len(self.ingress_ms):
            raise ValueError("ingress_at_ms must give one time per ingress_ms sample")
        return self

    model: str
    batches: int = Field(ge=1)
    ingress_ms: list[float] = Field(min_length=1)
    # When each of those jobs was submitted (ms after the run's first job), when known: the
    # planner falls behind in bursts (a long ingress read, a collection), so the simulator draws
    # a job's delay from jobs submitted near the same time of the run.
    ingress_at_ms: list[float] | None = None
    transfer_ms: float = Field(ge=0)
    # Per batch, in run order: dispatch to start less any time the worker was still busy with
    # the batch before (what the lane model adds itself). Empty in calibrations that predate it.
    transfer_run_ms: list[float] = Field(default_factory=list)
    service_c0_ms: float = Field(ge=0)
    service_c1_ms: float = Field(ge=0)
    service_residual_ms: list[float] = Field(min_length=1)  # in run order (batch by batch)
    exec_c0_ms: float = Field(ge=0)
    exec_c1_ms: float = Field(ge=0)
    # The planner's busy steps (read, admit, dispatch, round trips): the gaps between its reads
    # of the ingress stream when jobs had piled up meanwhile, in run order when ``step_ordered``.
    step_ms: list[float] = Field(default_factory=lambda: [0.0], min_length=1)
    step_ordered: bool = False

    def save(self, path: Path) -> None:
        path.write_text(self.model_dump_json(indent=1))

    @classmethod
    def load(cls, path: Path) -> "Calibration":
        return cls.model_validate(json.loads(path.read_text()))


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


def _thin(values: np.ndarray) -> list[float]:
    v = np.sort(values)
    if v.size > MAX_SAMPLES:
        v = v[np.linspace(0, v.size - 1, MAX_SAMPLES).round().astype(int)]
    return [round(float(x), 4) for x in v]


def _ordered(values: np.ndarray) -> list[float]:
    """``values`` kept in their order, thinned evenly to ``MAX_SAMPLES``."""
    if values.size > MAX_SAMPLES:
        values = values[np.linspace(0, values.size - 1, MAX_SAMPLES).round().astype(int)]
    return [round(float(x), 4) for x in values]


def calibrate(events: Iterable[Event], model: str | None = None) -> Calibration:
    """Measure the pipeline's costs from one run's events (those of ``model``, or the only one)."""
    events_list = list(events)
    sent: dict[str, BatchDispatched] = {}
    accepted: dict[str, float] = {}
    lags: list[tuple[float, float]] = []
    finished: list[BatchFinished] = []
    for ev in events_list:
        if isinstance(ev, BatchDispatched):
            sent[ev.batch_id] = ev
        elif isinstance(ev, JobAccepted):
            accepted[ev.job_id] = ev.ts
            if ev.submitted_ms is not None:  # every accepted job, the ones that later expired too
                lags.append((ev.submitted_ms, max(ev.ts - ev.submitted_ms, 0.0)))
        elif isinstance(ev, BatchFinished) and ev.part is None and ev.items:
            finished.append(ev)
    models = {f.model for f in finished}
    if model is None:
        if len(models) != 1:
            raise ValueError(f"the run served {len(models)} models ({', '.join(sorted(models))}); name one")
        model = models.pop()
    size, wait, service, execs, ingress, transfer = [], [], [], [], [], []
    prev_end = -np.inf
    for f in sorted(finished, key=lambda f: f.ts):
        d = sent.get(f.batch_id)
        if f.model != model or d is None:
            continue
        subs = {it.job_id: f.ts - it.total_ms for it in f.items}
        started = float(np.median([f.ts - it.total_ms + it.queue_ms for it in f.items]))
        size.append(f.size)
        wait.append(max(started - d.ts, 0.0))
        transfer.append(max(started - max(d.ts, prev_end), 0.0))
        prev_end = f.ts
        service.append(max(f.ts - started, 0.0))
        execs.append(f.exec_ms)
        ingress.extend(max(accepted[j] - s, 0.0) for j, s in subs.items() if j in accepted)
    at: list[float] | None = None
    if lags:
        lags.sort()
        t0 = lags[0][0]
        at, ingress = [round(t - t0, 3) for t, _ in lags], [lag for _, lag in lags]
        if len(at) > MAX_SAMPLES:
            keep = np.linspace(0, len(at) - 1, MAX_SAMPLES).round().astype(int).tolist()
            at, ingress = [at[i] for i in keep], [ingress[i] for i in keep]
    if not size or not ingress:
        raise ValueError(f"no finished batches of {model!r} with their dispatch and acceptance in these events")
    k, svc = np.asarray(size, dtype=np.float64), np.asarray(service)
    s0, s1 = _line(k, svc)
    e0, e1 = _line(k, np.asarray(execs))
    lag_ms = [round(float(x), 4) for x in ingress] if at is not None else _thin(np.asarray(ingress))
    steps = _steps(sorted(t + lag for t, lag in lags)) if lags else []
    return Calibration(model=model, batches=len(size), ingress_ms=lag_ms, ingress_at_ms=at,
                       transfer_ms=float(np.percentile(wait, 25)), transfer_run_ms=_ordered(np.asarray(transfer)),
                       service_c0_ms=s0, service_c1_ms=s1,
                       service_residual_ms=_ordered(svc - (s0 + s1 * k)), exec_c0_ms=e0, exec_c1_ms=e1,
                       step_ms=[round(x, 4) for x in steps] if steps else [0.5], step_ordered=bool(steps))


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
    if busy.size < min_steps:
        return []
    if busy.size > MAX_SAMPLES:
        busy = busy[np.linspace(0, busy.size - 1, MAX_SAMPLES).round().astype(int)]
    return busy.tolist()
