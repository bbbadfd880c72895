"""The MOSEL evaluation in the simulator: load sweeps per policy (Fig. 5), the largest load each
policy holds at a violation target, the profiling-error study (Sec. 7.4) and the work-ratio cap."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .costs import SubsetCosts
from .matrix import StrategyMatrix
from .metrics import summarize
from .selector import MODALITY_POLICIES, ModalitySelector
from .sim import simulate
from .workload import WorkloadSpec, arrival_times, make_jobs, size_distribution

Progress = Callable[[str, int], None]  # (what was done, how many steps it counts for)


@dataclass(frozen=True)
class SweepConfig:
    """Offered loads are multiples of ``capacity_none`` (jobs/s the ``none`` policy could serve
    back to back); a policy's sweep stops once its violation ratio passes ``stop_at``."""

    n_jobs: int = 1000
    seed: int = 0
    loads: tuple[float, ...] = (0.4, 0.7, 0.9, 1.0, 1.1, 1.2, 1.35, 1.5, 1.65, 1.8, 2.0, 2.2)
    policies: tuple[str, ...] = MODALITY_POLICIES
    solve_budget_s: float = 0.1
    learn_rate: float = 0.2
    target: float = 0.05
    stop_at: float = 0.3
    spec: WorkloadSpec = field(default_factory=WorkloadSpec)


def expected_work(matrix: StrategyMatrix, spec: WorkloadSpec, points: int = 400) -> tuple[float, float]:
    """Mean seconds of work per job: all modalities (``none``), and the cheapest mix meeting a
    floor drawn uniformly from the model's range (the least any modality-aware policy can do)."""
    _, none, least = _work_table(matrix, spec, points)
    return float(none.sum()), float(least.sum())


def _work_table(matrix: StrategyMatrix, spec: WorkloadSpec, points: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(probabilities, weighted all-modality work, weighted least work) over (size, floor) cells."""
    p = size_distribution(spec)
    lo, hi = matrix.floors[0], matrix.floors[-1]
    floors = lo + (np.arange(points) + 0.5) * (hi - lo) / points
    prob = np.repeat(p / points, points)
    none = np.repeat([matrix.richest(n).latency_s for n in range(1, spec.max_size + 1)], points)
    least = np.array([matrix.lookup(n, f).latency_s for n in range(1, spec.max_size + 1) for f in floors])
    return prob, prob * none, prob * least


def load_bound(matrix: StrategyMatrix, spec: WorkloadSpec, target: float, points: int = 400) -> float:
    """An upper bound (jobs/s) on the load any modality-aware policy can carry with at most a
    ``target`` share of jobs missing: at least ``1 - target`` of the jobs must run, each at no
    less than its cheapest floor-meeting mix, and the cheapest such set is the least-work
    ``1 - target`` share of jobs. Long-run work per second cannot exceed one worker-second."""
    prob, _, least = _work_table(matrix, spec, points)
    work = least / np.where(prob > 0, prob, 1.0)
    order = np.argsort(work)
    cum = np.cumsum(prob[order])
    keep = cum <= 1.0 - target
    w_kept = float((prob[order] * work[order])[keep].sum())
    return 1.0 / w_kept if w_kept > 0 else float("inf")


def run_point(matrix: StrategyMatrix, true_costs: SubsetCosts, policy: str, rate: float,
              cfg: SweepConfig, gaps: np.ndarray | None) -> dict[str, Any]:
    """One simulated run; the same seed gives every policy the same jobs and arrivals."""
    arrivals = arrival_times(gaps, rate, cfg.n_jobs, cfg.seed)
    jobs = make_jobs(true_costs, cfg.spec, arrivals, cfg.seed)
    sel = ModalitySelector(matrix, policy, seed=cfg.seed, solve_budget_s=cfg.solve_budget_s,
                           learn_rate=cfg.learn_rate)
    out = summarize(simulate(jobs, sel, true_costs))
    st = sel.stats
    out.update(offered_jobs_s=rate, policy=policy, solves=st.solves, fallbacks=st.fallbacks,
               replans=st.replans, latency_scale_end=sel.latency_scale,
               solve_ms={f"p{q}": (float(np.percentile(st.solve_wall_s, q)) * 1e3 if st.solve_wall_s
                                   else None) for q in (50, 90, 99)})
    return out


def max_load(points: list[dict[str, Any]], target: float) -> dict[str, Any]:
    """Largest offered load with violations <= target: linear between the last point under and
    the first point over it (first crossing, in load order)."""
    pts = sorted((float(p["offered_jobs_s"]), float(p["slo_violation_ratio"])) for p in points)
    for k, (r, v) in enumerate(pts):
        if v > target:
            if k == 0:
                return {"jobs_s": None, "bound": "below_lowest_load", "lowest": r}
            r0, v0 = pts[k - 1]
            return {"jobs_s": r0 + (target - v0) * (r - r0) / (v - v0), "bound": "interpolated"}
    return {"jobs_s": pts[-1][0], "bound": "at_least"}


def sweep(matrix: StrategyMatrix, true_costs: SubsetCosts, cfg: SweepConfig,
          gaps: np.ndarray | None, progress: Progress | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every policy over the load grid, each stopping once past ``stop_at`` violations."""
    w_none, _ = expected_work(matrix, cfg.spec)
    curves: dict[str, list[dict[str, Any]]] = {}
    for policy in cfg.policies:
        curves[policy] = []
        for k, mult in enumerate(cfg.loads):
            point = run_point(matrix, true_costs, policy, mult / w_none, cfg, gaps)
            point["load_x_capacity_none"] = mult
            curves[policy].append(point)
            stop = float(point["slo_violation_ratio"]) > cfg.stop_at
            if progress:
                progress(f"{policy} @ {mult:.2f}x", len(cfg.loads) - k if stop else 1)
            if stop:
                break
    return curves


def robustness(matrix: StrategyMatrix, true_costs: SubsetCosts, cfg: SweepConfig, rate: float,
               gaps: np.ndarray | None, errors: tuple[float, ...] = (-0.5, -0.25, 0.0, 0.25, 0.5),
               policy: str = "optimized", progress: Progress | None = None) -> list[dict[str, Any]]:
    """Sec. 7.4: the planner believes every latency is ``(1 + error)`` x the truth; jobs still run
    (and deadlines are still set) by the true costs. Reports throughput and accuracy per error,
    with ``cfg.learn_rate`` deciding whether execution feedback may correct the belief."""
    rows = []
    for err in errors:
        believed = scaled_matrix(matrix, 1.0 + err)
        point = run_point(believed, true_costs, policy, rate, cfg, gaps)
        point["profile_error"] = err
        rows.append(point)
        if progress:
            progress(f"profile error {err:+.0%}", 1)
    return rows


def scaled_matrix(matrix: StrategyMatrix, factor: float) -> StrategyMatrix:
    """The matrix a planner would hold if every profiled latency were ``factor`` x the truth.

    Scaling every latency by one factor leaves each cheapest mix unchanged, so the entries carry
    over and only the latencies (and thus the online decisions) change.
    """
    data = matrix.model_dump()
    data["batch_ms"] = [[v * factor for v in row] for row in matrix.batch_ms]
    return StrategyMatrix.model_validate(data)
