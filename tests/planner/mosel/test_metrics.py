from __future__ import annotations

import pytest

from adaserve.planner.mosel import QueuedJob
from adaserve.planner.mosel.metrics import summarize
from adaserve.planner.mosel.sim import Outcome


def test_summary_counts_every_way_a_job_ends() -> None:
    j = [QueuedJob(f"j{k}", 2, 0.7, float(k), float(k) + 1.0) for k in range(4)]
    outs = [
        Outcome(j[0], "completed", 0.0, 0.5, 0.8, (1, 1, 0)),
        Outcome(j[1], "completed", 1.0, 1.5, 0.9, (0, 2, 0)),
        Outcome(j[2], "late", 2.0, 3.5, 0.75, (2, 0, 0)),
        Outcome(j[3], "expired", None, 3.0, None, None),
    ]
    s = summarize(outs)
    assert (s["completed"], s["late"], s["expired"]) == (2, 1, 1)
    assert s["slo_violation_ratio"] == pytest.approx(0.5)
    assert s["throughput_jobs_s"] == pytest.approx(2 / 3.5)
    assert s["accuracy"]["mean"] == pytest.approx((0.8 + 0.9 + 0.75) / 3)
    assert s["floor_violations"] == 0
    assert s["jct_ms"]["p50"] == pytest.approx(500.0)


def test_a_plan_below_its_floor_is_counted() -> None:
    j = QueuedJob("j", 2, 0.9, 0.0, 1.0)
    assert summarize([Outcome(j, "completed", 0.0, 0.1, 0.8, (2, 0, 0))])["floor_violations"] == 1
    with pytest.raises(ValueError):
        summarize([])
