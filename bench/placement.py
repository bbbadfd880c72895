"""``adaserve bench placement``: StarONNX's placement measured as the paper does (Sec. 5, Fig. 4).

For each arrival rate on a sweep: the p99 latency and whether the rate is sustained, for
``gpu-only``, ``cpu-only``, ``static-split`` (the ``--split`` override: every batch split) and
``heft``; each policy's maximum rate (bisection past the sweep, median over seeds); the fraction of
the GPU's time HEFT offloaded; HEFT's prediction error. Driven by the measured GPU and CPU profile
(``docs/gpu-h100.json`` by default) and the hand-over cost measured through Redis on this host.
Where HEFT's gain is capped, ``per_batch`` shows what the GPU, the CPU and the transport cost.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from adaserve.bench.placement_sim import POLICIES, Run, Setup, heft_placer, simulate
from adaserve.planner.heft import WHOLE, Histories, Key

MODEL = "effnet-lite0"
INTERMEDIATE_BYTES = 80 * 14 * 14 * 4  # effnet-lite0 after block 8: 80 x 14 x 14 float32
INPUT_BYTES = 3 * 224 * 224 * 4


def _ms(h: Histories, part: str, kind: str, b: int) -> float | None:
    est = h.predict(Key(MODEL, part, kind), b)
    return None if est is None else est.seconds * 1000.0


def per_batch(truth: Histories, handover: dict[str, Any], sizes: tuple[int, ...] = (1, 8, 16, 32)) -> list[dict[str, Any]]:
    """What one batch costs on each device and in transport, and the gain the split can give at
    most at that size: with a share ``f`` of batches split the GPU spends ``W - f*saved`` per batch
    and the CPU ``f*cpu_part2``; the CPU keeps up while ``f <= W / (cpu_part2 + saved)``."""
    rows = []
    fixed, per_mb = handover["fixed_ms"], handover["per_mb_ms"]
    for b in sizes:
        w, p1, p2 = (_ms(truth, p, "gpu", b) for p in (WHOLE, "part1", "part2"))
        cw, c2 = _ms(truth, WHOLE, "cpu", b), _ms(truth, "part2", "cpu", b)
        if None in (w, p1, p2, cw, c2):
            continue
        assert w is not None and p1 is not None and p2 is not None and c2 is not None
        saved = w - p1
        f = min(1.0, w / (c2 + saved)) if saved > 0 else 0.0
        rows.append({
            "batch": b, "gpu_whole_ms": w, "gpu_part1_ms": p1, "gpu_part2_ms": p2, "cpu_whole_ms": cw,
            "cpu_part2_ms": c2, "gpu_saved_ms": saved, "tail_share": p2 / (p1 + p2),
            "handover_ms": fixed + per_mb * b * INTERMEDIATE_BYTES / 1e6,
            "handover_fp16_ms": fixed + per_mb * b * INTERMEDIATE_BYTES / 2e6,
            "input_f32_ms": fixed + per_mb * b * INPUT_BYTES / 1e6, "input_u8_ms": fixed + per_mb * b * INPUT_BYTES / 4e6,
            "max_split_share": f, "bound_heft_vs_gpu_only": w / (w - f * saved) if saved > 0 else 1.0,
        })
    return rows


def _row(run: Run) -> dict[str, Any]:
    return {"p99_ms": run.pct(0.99) * 1000.0, "max_ms": run.pct(1.0) * 1000.0, "sustained": run.sustained(32),
            "offload": run.offload, "split_share": run.split_batches / max(run.batches, 1),
            "mean_batch": statistics.fmean(run.sizes) if run.sizes else 0.0, "explored": run.explored}


def _run(setup: Setup, policy: str, rate: float) -> Run:
    return simulate(setup, policy, rate, heft_placer(setup, setup.truth) if policy == "heft" else None)


def max_rate(setup: Setup, policy: str, lo: float, hi: float, steps: int = 8) -> tuple[float, Run | None]:
    """The highest sustained rate between ``lo`` (sustained) and ``hi`` (not), by bisection."""
    best: Run | None = None
    for _ in range(steps):
        mid = (lo + hi) / 2
        run = _run(setup, policy, mid)
        if run.sustained(setup.max_batch):
            lo, best = mid, run
        else:
            hi = mid
    return lo, best


def sweep(truth: Histories, handover: dict[str, Any], *, seeds: int = 3, points: int = 12, seconds: float = 3.0,
          progress: Any = None) -> dict[str, Any]:
    per_req = handover["per_mb_ms"] * INTERMEDIATE_BYTES / 1e9

    def hand(n: int) -> float:
        return handover["fixed_ms"] / 1000.0 + per_req * n

    base = Setup(MODEL, truth, hand, seconds=seconds)
    w32 = _ms(truth, WHOLE, "gpu", 32) or 1.0
    cap = 32 / (w32 / 1000.0)  # the GPU alone at its largest batch
    rates = [round(cap * (0.1 + 1.2 * i / (points - 1)), 1) for i in range(points)]
    curves: dict[str, list[dict[str, Any]]] = {p: [] for p in POLICIES}
    maxima: dict[str, list[float]] = {p: [] for p in POLICIES}
    at_max: list[Run] = []
    errors: list[float] = []
    execs: list[float] = []
    task = progress.add_task("placement sweep", total=len(POLICIES) * (points + seeds)) if progress else None
    for policy in POLICIES:
        failed = 0
        for rate in rates:
            if failed >= 2:  # far past this policy's capacity: not simulated
                curves[policy].append({"rate": rate, "sustained": False, "p99_ms": None})
            else:
                run = _run(base, policy, rate)
                curves[policy].append({"rate": rate, **_row(run)})
                failed = failed + 1 if not run.sustained(base.max_batch) else 0
                if policy == "heft":
                    errors += run.errors
            if task is not None:
                progress.advance(task)
        ok = [r["rate"] for r in curves[policy] if r["sustained"]]
        lo = max(ok) if ok else 1.0
        hi = min([r["rate"] for r in curves[policy] if not r["sustained"] and r["rate"] > lo], default=lo * 2)
        for seed in range(seeds):
            rate, best = max_rate(Setup(MODEL, truth, hand, seconds=seconds, seed=seed), policy, lo, hi)
            maxima[policy].append(rate)
            if policy == "heft" and best is not None:
                at_max.append(best)
            if task is not None:
                progress.advance(task)
    for run in at_max:
        errors += run.errors
    med = {p: statistics.median(v) for p, v in maxima.items()}
    abs_err = sorted(abs(e) * 1000 for e in errors)
    return {
        "model": MODEL, "rates": rates, "curves": curves,
        "max_rate": med, "max_rate_runs": maxima,
        "heft_vs_gpu_only": med["heft"] / med["gpu-only"] if med["gpu-only"] else None,
        "heft_vs_gpu_only_runs": [h / g for h, g in zip(maxima["heft"], maxima["gpu-only"])],
        "offload_at_max": [r.offload for r in at_max],
        "split_share_at_max": [r.split_batches / max(r.batches, 1) for r in at_max],
        "offload_at_max_median": statistics.median(r.offload for r in at_max) if at_max else None,
        "prediction_error": {"batches": len(abs_err),
                             "median_abs_ms": abs_err[len(abs_err) // 2] if abs_err else None,
                             "p90_abs_ms": abs_err[int(0.9 * len(abs_err))] if abs_err else None},
        "seeds": seeds, "seconds": seconds, "execs": len(execs),
    }


def report(profile: Path, settings: Any, *, seeds: int = 3, points: int = 12, seconds: float = 3.0,
           progress: Any = None) -> dict[str, Any]:
    from adaserve.bench.placement_handover import measure
    from adaserve.planner.heft.seed import seed_file

    truth = Histories()
    seed_file(truth, profile, [MODEL])
    handover = measure(settings, INTERMEDIATE_BYTES)
    out = sweep(truth, handover, seeds=seeds, points=points, seconds=seconds, progress=progress)
    out.update({"bench": "placement", "profile": str(profile), "where": "simulator (measured profiles)",
                "handover": handover, "per_batch": per_batch(truth, handover)})
    return out
