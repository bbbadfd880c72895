"""The load generator's report, computed from the results it collected (pure; no I/O)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel

from adaserve.producers.results import JobResult


class LoadSummary(BaseModel):
    """Per-request accounting of one load run: submitted = completed + expired + rejected +
    failed + unfinished (no result within the grace period)."""

    run: str
    model: str
    pattern: str
    jobs: int
    submitted: int
    completed: int
    expired: int
    rejected: int
    failed: int
    unfinished: int
    finish_rate: float
    p50_ms: float | None
    p99_ms: float | None
    throughput_rps: float
    accuracy: float | None
    offered_jobs_per_s: float
    duration_s: float
    deadline_ms: float
    reasons: dict[str, int]


def percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if len(values) else None


def summarize(
    results: Sequence[JobResult], *, run: str, model: str, pattern: str, jobs: int, submitted: int,
    duration_s: float, elapsed_s: float, deadline_ms: float,
    labels: Mapping[tuple[str, str], int] | None = None,
) -> LoadSummary:
    """``elapsed_s``: from the first send to the last completed result, the span over which
    throughput is measured; ``labels``: the true class per (job id, request id), when known."""
    status: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    latencies: list[float] = []
    on_time = correct = judged = 0
    for job in results:
        for res in job.results:
            status[res.status] += 1
            if res.status != "completed":
                reasons[res.reason or res.status] += 1
                continue
            latencies.append(res.timings.total_ms)
            on_time += res.timings.total_ms <= job.deadline_ms
            if labels is not None and res.prediction is not None:
                label = labels.get((job.job_id, res.request_id))
                if label is not None:
                    judged += 1
                    correct += int(res.prediction == label)
    ended = sum(status.values())
    done = status["completed"]
    return LoadSummary(
        run=run, model=model, pattern=pattern, jobs=jobs, submitted=submitted,
        completed=done, expired=status["expired"], rejected=status["rejected"], failed=status["failed"],
        unfinished=max(0, submitted - ended),
        finish_rate=on_time / submitted if submitted else 0.0,
        p50_ms=percentile(latencies, 50), p99_ms=percentile(latencies, 99),
        throughput_rps=done / elapsed_s if elapsed_s > 0 else 0.0,
        accuracy=correct / judged if judged else None,
        offered_jobs_per_s=jobs / duration_s if duration_s > 0 else 0.0,
        duration_s=duration_s, deadline_ms=deadline_ms, reasons=dict(reasons),
    )
