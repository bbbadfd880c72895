"""Builders of ``ee-lm-xs`` and ``ee-lm-s``: train on tiny-shakespeare, store per layer, evaluate per exit."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rich.progress
import safetensors
import torch

from adaserve.models.lm.corpus import SOURCE, load_corpus
from adaserve.models.lm.gpt import GptConfig
from adaserve.models.lm.train import TrainConfig, evaluate_exits, new_gpt, train
from adaserve.models.lm.weights import depth_artifacts, save_layers
from adaserve.models.manifest import InputSpec, ModelInfo, VariantInfo, artifact_hashes

PROMPT_LEN = 32
MAX_NEW_TOKENS = 16
PAD_ID = -1


@dataclass(frozen=True)
class LmSpec:
    name: str
    n_layer: int
    n_embd: int
    n_head: int
    block_size: int
    train: TrainConfig
    eval_windows: int | None  # None: the whole held-out tail


XS = LmSpec("ee-lm-xs", 2, 64, 4, 64, TrainConfig(steps=1500, batch_size=32, lr=3e-3), None)
# Deeper exits weigh more in the loss: with equal weights exits 3 and 4 ended level (5.82, 5.83).
S = LmSpec("ee-lm-s", 4, 128, 4, 128,
           TrainConfig(steps=1000, batch_size=32, lr=3e-3, deep_weighted=True), None)
TINY = TrainConfig(steps=40, batch_size=16, lr=3e-3, warmup=5)


def tiny_spec(spec: LmSpec) -> LmSpec:
    """Same depth (so every variant exists), narrow and briefly trained: seconds, for CI."""
    return LmSpec(spec.name, spec.n_layer, 32, 2, 48, TINY, 40)


def build_lm(spec: LmSpec, out_dir: Path, *, tiny: bool, seed: int,
             progress: rich.progress.Progress) -> ModelInfo:
    if tiny:
        spec = tiny_spec(spec)
    threads = torch.get_num_threads()
    # One thread: the same float reduction order on every machine (reproducible weights), and no
    # OpenMP spin-waiting when the cores are shared, which made training 15x slower here.
    torch.set_num_threads(1)
    try:
        return _build(spec, out_dir, tiny=tiny, seed=seed, progress=progress)
    finally:
        torch.set_num_threads(threads)


def _build(spec: LmSpec, out_dir: Path, *, tiny: bool, seed: int,
           progress: rich.progress.Progress) -> ModelInfo:
    torch.manual_seed(seed)
    corpus = load_corpus()
    config = GptConfig(corpus.vocab.size, spec.block_size, spec.n_layer, spec.n_embd, spec.n_head)
    model = new_gpt(config, seed)
    task = progress.add_task(f"{spec.name}: training", total=spec.train.steps)

    def on_step(step: int, loss: float) -> None:
        progress.update(task, completed=step + 1, description=f"{spec.name}: loss {loss:.3f}")

    seconds = train(model, corpus.train, spec.train, seed, on_step)
    progress.update(task, description=f"{spec.name}: evaluating exits")
    stats = evaluate_exits(model, corpus.val, spec.eval_windows)
    save_layers(model, out_dir, corpus.vocab.chars)
    progress.update(task, description=f"{spec.name}: done")

    params = sum(p.numel() for p in model.parameters())
    variants = [
        VariantInfo(
            name=f"depth{s.depth}", kind="lm-exit", artifacts=depth_artifacts(s.depth),
            inputs={"tokens": InputSpec(shape=(PROMPT_LEN,), dtype="int64")},
            metric="perplexity", quality=round(s.perplexity, 4),
            extra={"depth": s.depth, "max_new_tokens": MAX_NEW_TOKENS, "pad_id": PAD_ID,
                   "mean_confidence": round(float(s.mean_confidence), 4),
                   "agree_with_last": round(float(s.agree_with_last), 4)},
        )
        for s in stats
    ]
    info = ModelInfo(
        name=spec.name, family="ee-lm", task="text-generation",
        description=(f"character-level GPT, {spec.n_layer} layers x {spec.n_embd}, an exit head after "
                     f"every layer; variant depthK loads only the first K layers ({params:,} "
                     "parameters in all)"),
        labels=list(corpus.vocab.chars), default_variant=f"depth{spec.n_layer}", variants=variants,
        train={"seed": seed, "tiny": tiny, "steps": spec.train.steps, "batch_size": spec.train.batch_size,
               "lr": spec.train.lr, "deep_weighted_exits": spec.train.deep_weighted,
               "seconds": round(seconds, 1), "parameters": params,
               "config": config.to_dict(), "held_out_tokens": stats[0].tokens,
               "metrics": {f"depth{s.depth}": {"perplexity": round(s.perplexity, 4)} for s in stats}},
        versions={"torch": torch.__version__, "safetensors": safetensors.__version__,
                  "numpy": np.__version__, "python": platform.python_version()},
        source=SOURCE + "; split: first 90 % train, last 10 % held out",
    )
    info.hashes = artifact_hashes(out_dir, info)
    return info


def build_xs(out_dir: Path, *, tiny: bool, seed: int, progress: rich.progress.Progress) -> ModelInfo:
    """``ee-lm-xs``: 2 layers x 64, exits after layers 1 and 2."""
    return build_lm(XS, out_dir, tiny=tiny, seed=seed, progress=progress)


def build_s(out_dir: Path, *, tiny: bool, seed: int, progress: rich.progress.Progress) -> ModelInfo:
    """``ee-lm-s``: 4 layers x 128, exits after each of the 4 layers."""
    return build_lm(S, out_dir, tiny=tiny, seed=seed, progress=progress)
