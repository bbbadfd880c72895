"""Measuring one (model, variant, device): latency per batch size, quality, execution-time histograms.

``measure_variant`` is a plain function: the rq job calls it, and so can benchmarks and tests.
Latencies are wall times of ``Runner.run`` on ready-made numpy batches: ``warmup`` untimed runs
first (session start-up, allocator, caches), then the median and p90 of ``repeats`` timed runs.
For the language models one run is the whole greedy generation of the variant's
``max_new_tokens`` tokens.
"""

from __future__ import annotations

import platform
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from adaserve.broker.errors import InvalidArgument
from adaserve.broker.profiles import ExecHistogram, LatencyPoint, PartPoint, Profile, QualityPoint
from adaserve.models.manifest import ModelInfo, VariantInfo
from adaserve.profiling.data import RunnerFactory, Validation, validation
from adaserve.workers.runtime.base import GenerativeRunner, Runner

Progress = Callable[[int, int, str], None]  # (done, total, stage)
DEFAULT_BATCH_SIZES = (1, 2, 4, 8, 16, 32)
TINY_BATCH_SIZES = (1, 2, 4)


@dataclass(frozen=True)
class MeasureConfig:
    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    repeats: int = 10
    warmup: int = 2
    quality_samples: int = 300   # validation samples scored (LM: windows of held-out text)
    hist_samples: int = 200      # single-request runs behind an execution-time histogram
    hist_bins: int = 20
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.batch_sizes or any(not 1 <= b <= 32 for b in self.batch_sizes):
            raise InvalidArgument(f"batch sizes must lie in 1..32, got {self.batch_sizes}")
        if self.repeats < 1 or self.warmup < 0 or self.quality_samples < 1 or self.hist_samples < 1:
            raise InvalidArgument("repeats, quality_samples and hist_samples must be >= 1, warmup >= 0")

    @classmethod
    def tiny(cls) -> MeasureConfig:
        return cls(TINY_BATCH_SIZES, repeats=3, warmup=1, quality_samples=16, hist_samples=16, hist_bins=8)


def host_info(device: str) -> dict[str, str | None]:
    import onnxruntime as ort

    info: dict[str, str | None] = {"host": socket.gethostname(), "machine": platform.machine(),
                                   "python": platform.python_version(), "onnxruntime": ort.__version__,
                                   "device": device, "cpu": platform.processor() or None}
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = str(torch.get_num_threads())
    except ImportError:  # pragma: no cover - torch is a dependency, but the profile does not need it
        pass
    return info


def time_runs(runner: Runner, inputs: dict[str, np.ndarray], repeats: int, warmup: int) -> np.ndarray:
    """Wall seconds of ``repeats`` runs after ``warmup`` untimed ones."""
    for _ in range(warmup):
        runner.run(inputs)
    out = np.empty(repeats)
    for i in range(repeats):
        t0 = time.perf_counter()
        runner.run(inputs)
        out[i] = time.perf_counter() - t0
    return out


def measure_variant(info: ModelInfo, variant: VariantInfo, device: str, runner_for: RunnerFactory,
                    cfg: MeasureConfig | None = None, progress: Progress | None = None) -> Profile:
    """A profile holding this variant's points only; merge it into the model's profile."""
    cfg = cfg or MeasureConfig()
    report = progress or (lambda done, total, stage: None)
    dynamic = variant.kind == "exit"
    total = len(cfg.batch_sizes) + 1 + int(dynamic)
    report(0, total, "loading")
    runner = runner_for(variant.name)
    pool = max(cfg.batch_sizes)
    val = validation(info, variant, max(pool, cfg.quality_samples, cfg.hist_samples if dynamic else 1),
                     seed=cfg.seed, runner_for=runner_for)
    latency: list[LatencyPoint] = []
    parts: list[PartPoint] = []
    for i, b in enumerate(cfg.batch_sizes):
        report(i, total, f"batch size {b}")
        batch = val.batch(b)
        secs = time_runs(runner, batch, cfg.repeats, cfg.warmup) * 1000.0
        p50 = float(np.median(secs))
        latency.append(LatencyPoint(variant=variant.name, device=device, batch_size=b, p50_ms=p50,
                                    p90_ms=float(np.percentile(secs, 90)), mean_ms=float(secs.mean()),
                                    repeats=cfg.repeats))
        if variant.kind == "part":
            out = runner.run(batch)
            handed = out.outputs.get("intermediate", next(iter(out.outputs.values())))
            parts.append(PartPoint(variant=variant.name, device=device, batch_size=b, p50_ms=p50,
                                   out_bytes=int(np.asarray(handed).nbytes)))
    report(len(cfg.batch_sizes), total, "quality")
    quality = _quality(runner, variant, val, cfg)
    hists: list[ExecHistogram] = []
    if dynamic:
        report(total - 1, total, "execution-time histogram")
        hists.append(_histogram(runner, variant, device, val, cfg))
    report(total, total, "done")
    return Profile(model=info.name, created_ms=time.time() * 1000.0, host=host_info(device),
                   latency=latency, quality=[quality] if quality else [], exec_hist=hists, parts=parts)


def _quality(runner: Runner, variant: VariantInfo, val: Validation,
             cfg: MeasureConfig) -> QualityPoint | None:
    if variant.kind == "lm-exit":
        from adaserve.models.lm.corpus import load_corpus

        if not isinstance(runner, GenerativeRunner):
            raise TypeError(f"{variant.name} is an lm-exit variant but its runner does not generate")
        # The held-out text scored by the loaded depth only.
        ppl, n = runner.perplexity(load_corpus().val, max_windows=cfg.quality_samples)
        return QualityPoint(variant=variant.name, metric="perplexity", value=ppl, n=n)
    if val.correct is None:
        return None
    n = min(val.size, cfg.quality_samples)
    hits = []
    for start in range(0, n, 32):
        idx = np.arange(start, min(n, start + 32))
        hits.append(val.correct(runner.run(val.take(idx)), idx))
    accuracy = float(np.concatenate(hits).mean())
    return QualityPoint(variant=variant.name, metric="accuracy", value=accuracy, n=n)


def _histogram(runner: Runner, variant: VariantInfo, device: str, val: Validation,
               cfg: MeasureConfig) -> ExecHistogram:
    """Per-request execution time of single-request runs: the input decides how deep it goes."""
    n = min(val.size, cfg.hist_samples)
    times, exits = np.empty(n), []
    for i in range(n):
        out = runner.run(val.take(np.array([i])))
        times[i] = float(out.request_exec_s[0]) * 1000.0 if out.request_exec_s is not None else np.nan
        if out.exits is not None:
            exits.append(int(np.asarray(out.exits).reshape(-1)[0]))
    counts, edges = np.histogram(times[np.isfinite(times)], bins=_edges(times, cfg.hist_bins))
    fractions = {str(e): exits.count(e) / len(exits) for e in sorted(set(exits))} if exits else {}
    return ExecHistogram(variant=variant.name, device=device, edges_ms=[float(e) for e in edges],
                         counts=[int(c) for c in counts], exits=fractions)


def _edges(times_ms: np.ndarray, bins: int) -> np.ndarray:
    """Log-spaced bin edges: a few scheduler hiccups must not squeeze the whole body into one bin."""
    t = times_ms[np.isfinite(times_ms)]
    lo, hi = (float(t.min()), float(t.max())) if t.size else (0.0, 1.0)
    if lo <= 0 or hi <= lo:
        return np.linspace(lo, max(hi, lo + 1e-6), bins + 1)
    edges = np.geomspace(lo, hi, bins + 1)
    edges[0], edges[-1] = lo, hi  # exact ends, so the extremes fall inside
    return edges
