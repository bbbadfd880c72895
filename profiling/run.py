"""Profiling without rq: resolve a built model, measure a variant, store the merged profile.

``measure_model_variant`` is what an rq job runs; ``profile_model`` measures every variant of a
model in this process and stores the result (for benchmarks, tests and ``--local`` runs).
"""

from __future__ import annotations

from pathlib import Path

from adaserve.broker.profiles import Profile
from adaserve.models.manifest import ModelInfo
from adaserve.models.registry import load_info
from adaserve.profiling.measure import MeasureConfig, Progress, measure_variant
from adaserve.profiling.store import merge
from adaserve.workers.runtime.base import Runner


def model_info(model: str, data_dir: Path) -> ModelInfo:
    """The manifest of ``model`` as the runtime resolves it (data dir first, then the shipped zoo)."""
    return load_info(model, data_dir)[1]


def measure_model_variant(model: str, variant: str, device: str, data_dir: Path,
                          cfg: MeasureConfig | None = None, progress: Progress | None = None) -> Profile:
    """Measure one variant of a built (or shipped) model on ``device``."""
    from adaserve.workers.runtime.loader import load_runner

    info = model_info(model, data_dir)
    runners: dict[tuple[str, str], Runner] = {}

    def runner_for(name: str) -> Runner:
        # The part-2 profile needs part 1's real outputs: part 1 runs on the CPU for that.
        dev = device if name == variant else "cpu"
        if (name, dev) not in runners:
            runners[name, dev] = load_runner(model, name, dev, data_dir)
        return runners[name, dev]

    return measure_variant(info, info.variant(variant), device, runner_for, cfg, progress)


def profile_model(model: str, device: str, data_dir: Path, cfg: MeasureConfig | None = None,
                  variants: list[str] | None = None, progress: Progress | None = None) -> Profile:
    """Every (or the named) variant of ``model``, measured here and merged into one profile."""
    info = model_info(model, data_dir)
    names = variants or [v.name for v in info.variants]
    profile: Profile | None = None
    for name in names:
        profile = merge(profile, measure_model_variant(model, name, device, data_dir, cfg, progress))
    if profile is None:
        raise ValueError(f"model {model!r} has no variants to profile")
    return profile
