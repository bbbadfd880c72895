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
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from adaserve.broker.errors import DataError, InvalidArgument
from adaserve.broker.events import BatchDispatched, BatchFinished, Event, JobAccepted
from adaserve.broker.violations import explain

__all__ = ["Calibration", "calibrate"]

MAX_SAMPLES = 4096  # samples kept per distribution, evenly spaced


class Calibration(BaseModel):
    """Pipeline costs in milliseconds, as measured in one live run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    batches: int = Field(ge=1)
    ingress_ms: list[float] = Field(min_length=1)
    # Whether those delays are in the order the jobs were submitted: the planner falls behind in
    # bursts (a long ingress read, a collection), so the simulator then draws a job's delay among
    # the jobs at the same point of the run.
    ingress_ordered: bool = False
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


def _ordered(values: np.ndarray) -> list[float]:
    """``values`` kept in their order, thinned evenly to ``MAX_SAMPLES``."""
    if values.size > MAX_SAMPLES:
        values = values[np.linspace(0, values.size - 1, MAX_SAMPLES).round().astype(int)]
    return [round(float(x), 4) for x in values]


def calibrate(events: Iterable[Event], model: str | None = None) -> Calibration:
    """Measure the pipeline's costs from one run's events (those of ``model``, or the only one)."""
    sent: dict[str, BatchDispatched] = {}
    accepted: dict[str, JobAccepted] = {}
    finished: list[BatchFinished] = []
    for ev in events:
        if isinstance(ev, BatchDispatched):
            sent[ev.batch_id] = ev
        elif isinstance(ev, JobAccepted):
            accepted[ev.job_id] = ev
        elif isinstance(ev, BatchFinished) and ev.part is None and ev.items:
            finished.append(ev)
    models = {f.model for f in finished}
    if model is None:
        if len(models) != 1:
            raise InvalidArgument(f"the run served {len(models)} models ({', '.join(sorted(models))}); name one")
        model = models.pop()
    # every accepted job's delay, the ones that later expired too, in the order they were submitted
    lags = sorted((a.submitted_ms, a.ts) for a in accepted.values() if a.model == model and a.submitted_ms is not None)
    size: list[int] = []
    wait: list[float] = []
    service: list[float] = []
    execs: list[float] = []
    transfer: list[float] = []
    ingress: list[float] = []
    prev_end = -np.inf
    for f in sorted(finished, key=lambda f: f.ts):
        d = sent.get(f.batch_id)
        if f.model != model or d is None:
            continue
        started = float(np.median([f.ts - it.total_ms + it.queue_ms for it in f.items]))
        size.append(f.size)
        wait.append(max(started - d.ts, 0.0))
        transfer.append(max(started - max(d.ts, prev_end), 0.0))
        prev_end = f.ts
        service.append(max(f.ts - started, 0.0))
        execs.append(f.exec_ms)
        if not lags:  # events without submitted_ms: the jobs that finished tell their own delay
            subs = {it.job_id: f.ts - it.total_ms for it in f.items}
            ingress.extend(max(accepted[j].ts - t, 0.0) for j, t in subs.items() if j in accepted)
    if lags:
        ingress = [max(ts - sub, 0.0) for sub, ts in lags]
    if not size or not ingress:
        raise DataError(f"no finished batches of {model!r} with their dispatch and acceptance in these events")
    k, svc = np.asarray(size, dtype=np.float64), np.asarray(service)
    s0, s1 = _line(k, svc)
    e0, e1 = _line(k, np.asarray(execs))
    steps = _steps(sorted(ts for _, ts in lags))
    return Calibration(model=model, batches=len(size),
                       ingress_ms=_ordered(np.asarray(ingress) if lags else np.sort(ingress)),
                       ingress_ordered=bool(lags), transfer_ms=float(np.percentile(wait, 25)),
                       transfer_run_ms=_ordered(np.asarray(transfer)), service_c0_ms=s0, service_c1_ms=s1,
                       service_residual_ms=_ordered(svc - (s0 + s1 * k)), exec_c0_ms=e0, exec_c1_ms=e1,
                       step_ms=steps or [0.5], step_ordered=bool(steps))


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
