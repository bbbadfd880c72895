"""The Fig. 5 plot draws from a report with and without the live part (and its repeats)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adaserve.bench.mosel_live import spread
from adaserve.planner.mosel.plot import plot_fig5


def _point(policy: str, rate: float, v: float, *, jct: float | None = 20.0) -> dict[str, Any]:
    acc = {"p5": 0.9, "p25": 0.92, "p50": 0.93, "p75": 0.95, "p95": 0.97, "mean": 0.93}
    return {"policy": policy, "offered_jobs_s": rate, "slo_violation_ratio": v, "throughput_jobs_s": rate * (1 - v),
            "jct_ms": {"p50": jct}, "accuracy": acc}


def _report(live: bool) -> dict[str, Any]:
    curves = {p: [_point(p, r, v) for r, v in ((100, 0.0), (200, 0.02), (300, 0.4))] for p in ("optimized", "none")}
    rep: dict[str, Any] = {"curves": curves, "target_violation": 0.05, "robustness": [], "robustness_no_feedback": [],
                           "profile": {"model": "av-video", "source": "file:x", "synthetic": False}}
    if live:
        runs = [{p: [_point(p, 20, 0.0), _point(p, 40, v, jct=None)] for p in ("optimized", "none")} for v in (0.1, 0.3)]
        rep["live"] = {"runs": runs[0], "repeats": runs, "spread": spread(runs),
                       "config": {"deadline_ms": 100.0, "deadline_rule": "max(100 ms, 10x all-modality latency)"}}
    return rep


def test_plot_with_and_without_live(tmp_path: Path) -> None:
    for live in (False, True):
        out = plot_fig5(_report(live), tmp_path / f"fig-{live}.png")
        assert out.is_file() and out.stat().st_size > 10_000
