from __future__ import annotations

import pytest

from adaserve.planner.mosel import StrategyMatrix
from adaserve.planner.mosel.experiment import expected_work, load_bound, max_load, scaled_matrix
from adaserve.planner.mosel.workload import WorkloadSpec

SPEC = WorkloadSpec(size_mean=4, size_std=2, max_size=6)


def test_max_load_interpolates_the_first_crossing() -> None:
    pts = [{"offered_jobs_s": r, "slo_violation_ratio": v} for r, v in
           [(10, 0.0), (20, 0.03), (30, 0.07), (40, 0.02), (50, 0.5)]]
    got = max_load(pts, 0.05)
    assert got["bound"] == "interpolated" and got["jobs_s"] == pytest.approx(25.0)
    assert max_load(pts[:2], 0.05) == {"jobs_s": 20, "bound": "at_least"}
    assert max_load(pts[2:3], 0.05)["jobs_s"] is None


def test_work_and_bound(matrix: StrategyMatrix) -> None:
    w_none, w_min = expected_work(matrix, SPEC)
    assert 0 < w_min < w_none
    bound = load_bound(matrix, SPEC, 0.05)
    assert 1 / w_min < bound < 1 / (0.95 * w_min) * 1.5
    assert load_bound(matrix, SPEC, 0.0) == pytest.approx(1 / w_min, rel=1e-6)


def test_scaled_matrix_keeps_entries_and_scales_latency(matrix: StrategyMatrix) -> None:
    m = scaled_matrix(matrix, 0.5)
    assert m.entries == matrix.entries
    assert m.lookup(5, 0.8).latency_s == pytest.approx(0.5 * matrix.lookup(5, 0.8).latency_s)
