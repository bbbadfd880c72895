"""Measuring one variant on the CPU, on the GPU with ``session.run`` and on the GPU through IO binding.

The three runners get the same real validation batch (held-out audio, digits, photos, prompts) and
are timed in turn, call after call, so drift on a shared host hits them alike; figures are
medians. ``max_abs_diff`` compares the GPU's main output with the CPU's on that batch. The GPU's
energy per request comes from NVML's energy counter read around back-to-back calls of the faster
GPU mode for at least ``ENERGY_S`` (the counter ticks every few milliseconds, so reading it around
single sub-millisecond calls would count whole ticks against them); it includes the board's idle
power, which a dedicated GPU pays while serving. Absent where the device has no counter.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from adaserve.workers.runtime.base import Runner, RunOutput

if TYPE_CHECKING:
    from adaserve.profiling.data import Validation

Timer = Callable[[], float]
MODES = ("cpu", "gpu", "gpu_bound")
ENERGY_S = 1.0


@dataclass(frozen=True)
class Target:
    """One (model, variant) with the runners to compare; a missing GPU runner is ``None``."""

    model: str
    variant: str
    kind: str
    runners: dict[str, Runner | None]


def load_target(model: str, variant: str, data_dir: Path, gpu: bool) -> Target:
    from adaserve.models.registry import load_info
    from adaserve.workers.runtime import load_runner

    kind = load_info(model, data_dir)[1].variant(variant).kind
    runners: dict[str, Runner | None] = {"cpu": load_runner(model, variant, "cpu", data_dir)}
    runners["gpu"] = load_runner(model, variant, "gpu", data_dir, io_binding=False) if gpu else None
    # Torch runners have no IO binding to switch: their GPU figure is the ``gpu`` column alone.
    runners["gpu_bound"] = (load_runner(model, variant, "gpu", data_dir, io_binding=True)
                            if gpu and kind != "lm-exit" else None)
    return Target(model, variant, kind, runners)


def validation_for(target: Target, most: int, data_dir: Path) -> Validation:
    """Up to ``most`` real validation inputs of the variant, made once (part 2 gets part 1's real
    outputs, so a part-1 runner is loaded for it); ``.batch(b)`` cuts each batch from them."""
    from adaserve.models.registry import load_info
    from adaserve.profiling.data import validation
    from adaserve.workers.runtime import load_runner

    info = load_info(target.model, data_dir)[1]
    cpu: dict[str, Runner] = {}

    def runner_for(name: str) -> Runner:
        if name not in cpu:
            cpu[name] = load_runner(target.model, name, "cpu", data_dir)
        return cpu[name]

    return validation(info, info.variant(target.variant), max(most, 8), seed=0, runner_for=runner_for)


def main_output(out: RunOutput) -> np.ndarray:
    for name in ("logits", "intermediate", "tokens"):
        if name in out.outputs:
            return np.asarray(out.outputs[name])
    return np.asarray(next(iter(out.outputs.values())))


def measure(target: Target, feed: dict[str, np.ndarray], repeats: int, energy: Timer | None) -> dict[str, Any]:
    """Medians per mode over ``repeats`` interleaved calls, the GPU/CPU difference and energy."""
    live = {m: r for m, r in target.runners.items() if r is not None}
    for r in live.values():  # warm-up: CUDA kernels, cuDNN choices, device buffers, arenas
        for _ in range(3):
            r.run(feed)
    times: dict[str, list[float]] = {m: [] for m in live}
    for _ in range(repeats):
        for mode, r in live.items():
            t0 = time.perf_counter()
            r.run(feed)
            times[mode].append((time.perf_counter() - t0) * 1000.0)
    b = len(next(iter(feed.values())))
    row: dict[str, Any] = {"model": target.model, "variant": target.variant, "kind": target.kind, "batch": b}
    for mode in MODES:
        row[f"{mode}_p50_ms"] = statistics.median(times[mode]) if mode in times else None
    cpu_ms, gpu_ms, bound_ms = (row[f"{m}_p50_ms"] for m in MODES)
    row["gpu_speedup"] = cpu_ms / min(x for x in (gpu_ms, bound_ms) if x) if gpu_ms else None
    row["bound_speedup"] = gpu_ms / bound_ms if gpu_ms and bound_ms else None
    gpu_runner = live.get("gpu_bound") or live.get("gpu")
    if gpu_runner is not None and target.kind != "lm-exit":
        diff = np.abs(main_output(gpu_runner.run(feed)) - main_output(live["cpu"].run(feed)))
        row["max_abs_diff"] = float(diff.max())
    else:
        row["max_abs_diff"] = None
    gpu_modes = [m for m in ("gpu", "gpu_bound") if m in times]
    row["gpu_mj_per_request"] = row["gpu_watts"] = None
    if energy is not None and gpu_modes:
        fastest = min(gpu_modes, key=lambda m: statistics.median(times[m]))
        joules, seconds, calls = _energy(live[fastest], feed, energy)
        if joules > 0:
            row["gpu_mj_per_request"] = joules * 1000.0 / (calls * b)
            row["gpu_watts"] = joules / seconds
    return row


def _energy(runner: Runner, feed: dict[str, np.ndarray], energy: Timer) -> tuple[float, float, int]:
    """Joules, seconds and calls of back-to-back calls for at least ``ENERGY_S``."""
    calls = 0
    e0, t0 = energy(), time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < ENERGY_S or calls < 3:
        runner.run(feed)
        calls += 1
    return energy() - e0, elapsed, calls


def energy_counter() -> Timer | None:
    """Joules used by the visible GPU so far, or None where NVML or the counter is absent."""
    from adaserve.workers.gpu import GpuMonitor

    mon = GpuMonitor.open()
    if mon is None or "energy_j" not in mon.figures():
        return None

    def read() -> float:
        return float(mon.figures().get("energy_j", 0.0))

    return read


def host_figures(gpu: bool) -> dict[str, Any]:
    import os

    import onnxruntime as ort

    from adaserve.workers.gpu import GpuMonitor

    out: dict[str, Any] = {"cpus": len(os.sched_getaffinity(0)), "onnxruntime": ort.__version__,
                           "providers": ort.get_available_providers()}
    mon = GpuMonitor.open() if gpu else None
    if mon is not None:
        out["gpu_name"] = mon.name
        out["gpu_figures"] = mon.figures()
        mon.close()
    return out
