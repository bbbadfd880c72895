"""Figures of one simulated run: SLO violations, throughput, completion time, effective accuracy."""

from __future__ import annotations

import numpy as np

from .sim import Outcome
from .strategy import ACC_TOL


def _pct(values: list[float], qs: tuple[int, ...]) -> dict[str, float | None]:
    if not values:
        return {f"p{q}": None for q in qs}
    arr = np.asarray(values)
    return {f"p{q}": float(np.percentile(arr, q)) for q in qs}


def summarize(outcomes: list[Outcome]) -> dict[str, object]:
    """SLO violation = finished late or expired; throughput counts jobs that met their deadline
    over the span from the first arrival to the last event. Effective accuracy is over the jobs
    that ran (an expired job has none)."""
    n = len(outcomes)
    if n == 0:
        raise ValueError("no outcomes to summarize")
    ok = [o for o in outcomes if o.status == "completed"]
    ran = [o for o in outcomes if o.status != "expired"]
    first = min(o.job.arrival for o in outcomes)
    span = max(max(o.finish for o in outcomes), max(o.job.arrival for o in outcomes)) - first
    span = max(span, 1e-9)
    acc = [o.accuracy for o in ran if o.accuracy is not None]
    floor_violations = sum(1 for o in ran if o.accuracy is not None and o.accuracy < o.job.floor - ACC_TOL)
    jct = [o.finish - o.job.arrival for o in ran]
    return {
        "jobs": n,
        "completed": len(ok),
        "late": sum(1 for o in outcomes if o.status == "late"),
        "expired": n - len(ran),
        "slo_violation_ratio": 1.0 - len(ok) / n,
        "throughput_jobs_s": len(ok) / span,
        "throughput_requests_s": sum(o.job.size for o in ok) / span,
        "jct_ms": {k: (v * 1e3 if v is not None else None)
                   for k, v in {**_pct(jct, (50, 95, 99)), "mean": float(np.mean(jct)) if jct else None}.items()},
        "accuracy": {**_pct(acc, (5, 25, 50, 75, 95)), "mean": float(np.mean(acc)) if acc else None,
                     "min": float(min(acc)) if acc else None},
        "accuracy_above_floor_mean": float(np.mean([o.accuracy - o.job.floor for o in ran
                                                     if o.accuracy is not None])) if ran else None,
        "floor_violations": floor_violations,
    }
