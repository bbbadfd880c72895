"""Builders of the ``lm`` family (``ee-lm-xs``, ``ee-lm-s``, ``ee-lm-code``): train on a weighted mix
of the two corpora, store per layer, evaluate every exit on both held-out tails.

All three share one character vocabulary (``corpus.SHARED_VOCAB``) so that any of them can serve
any prompt: HELIOS chooses among them at run time. ``ee-lm-s`` and ``ee-lm-xs`` are trained mostly
on Shakespeare, ``ee-lm-code`` (twice as deep and narrower, an exit every two layers) mostly on Python.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rich.progress
import safetensors
import torch

from adaserve.models.lm.corpus import PYTHON_SOURCE, SHARED_VOCAB, SOURCE, TASKS, load_task
from adaserve.models.lm.gpt import GptConfig
from adaserve.models.lm.train import ExitStats, TrainConfig, evaluate_exits, new_gpt, train
from adaserve.models.lm.weights import depth_artifacts, save_layers
from adaserve.models.manifest import InputSpec, ModelInfo, VariantInfo, artifact_hashes

PROMPT_LEN = 32
MAX_NEW_TOKENS = 16
PAD_ID = -1
TAU = 0.8  # the default confidence threshold of the exits (HELIOS's tau)
FAMILY = "lm"


@dataclass(frozen=True)
class LmSpec:
    name: str
    n_layer: int
    n_embd: int
    n_head: int
    block_size: int
    train: TrainConfig
    eval_windows: int | None  # None: the whole held-out tail of each task
    mix: tuple[tuple[str, float], ...] = (("shakespeare", 1.0),)  # training share per task
    exit_every: int = 1

    @property
    def exits(self) -> tuple[int, ...]:
        return tuple(range(self.exit_every, self.n_layer + 1, self.exit_every))

    @property
    def main_task(self) -> str:
        return max(self.mix, key=lambda tw: tw[1])[0]


SHAKESPEARE_MIX = (("shakespeare", 0.85), ("python", 0.15))
XS = LmSpec("ee-lm-xs", 2, 64, 4, 64, TrainConfig(steps=1200, batch_size=32, lr=3e-3), None,
            SHAKESPEARE_MIX)
# Deeper exits weigh more in the loss: with equal weights exits 3 and 4 ended level (5.82, 5.83).
S = LmSpec("ee-lm-s", 4, 128, 4, 128,
           TrainConfig(steps=700, batch_size=32, lr=3e-3, deep_weighted=True), None, SHAKESPEARE_MIX)
# 96 wide, not 128: a cheaper specialist (at depth 2 it beats ee-lm-s on Python, 6.28 against
# 6.72, at 1.4x its tokens per CPU second); 128 wide cost the same per token as ee-lm-s's cut, and
# 64 wide lost to it on Python (7.07). docs/helios.md, "Eighth session".
CODE = LmSpec("ee-lm-code", 8, 96, 4, 128,
              TrainConfig(steps=600, batch_size=32, lr=3e-3, deep_weighted=True), None,
              (("python", 0.75), ("shakespeare", 0.25)), exit_every=2)
TINY = TrainConfig(steps=40, batch_size=16, lr=3e-3, warmup=5)


def tiny_spec(spec: LmSpec) -> LmSpec:
    """Same depth and exits (so every variant exists), narrow and briefly trained: seconds, for CI."""
    return LmSpec(spec.name, spec.n_layer, 32, 2, 48, TINY, 40, spec.mix, spec.exit_every)


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
    config = GptConfig(SHARED_VOCAB.size, spec.block_size, spec.n_layer, spec.n_embd, spec.n_head)
    model = new_gpt(config, seed, spec.exits)
    task = progress.add_task(f"{spec.name}: training", total=spec.train.steps)

    def on_step(step: int, loss: float) -> None:
        progress.update(task, completed=step + 1, description=f"{spec.name}: loss {loss:.3f}")

    sources = [(load_task(t).train, w) for t, w in spec.mix]
    seconds = train(model, sources, spec.train, seed, on_step)
    progress.update(task, description=f"{spec.name}: evaluating exits")
    stats = {t: evaluate_exits(model, load_task(t).val, spec.eval_windows) for t in TASKS}
    save_layers(model, out_dir, SHARED_VOCAB.chars)
    progress.update(task, description=f"{spec.name}: done")
    return _info(spec, config, model_params(model), stats, seconds, tiny, seed, out_dir)


def model_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _info(spec: LmSpec, config: GptConfig, params: int, stats: dict[str, list[ExitStats]],
          seconds: float, tiny: bool, seed: int, out_dir: Path) -> ModelInfo:
    main = stats[spec.main_task]
    tokens = {"tokens": InputSpec(shape=(PROMPT_LEN,), dtype="int64")}
    common = {"max_new_tokens": MAX_NEW_TOKENS, "pad_id": PAD_ID, "tau": TAU}
    variants = [
        VariantInfo(
            name=f"depth{s.depth}", kind="lm-exit", artifacts=depth_artifacts(s.depth, spec.exits),
            inputs=tokens, metric="perplexity", quality=round(s.perplexity, 4),
            extra={"depth": s.depth, **common,
                   "perplexity": {t: round(st[j].perplexity, 4) for t, st in stats.items()},
                   "mean_confidence": round(float(s.mean_confidence), 4),
                   "agree_with_last": round(float(s.agree_with_last), 4)},
        )
        for j, s in enumerate(main)
    ]
    deepest = spec.exits[-1]
    variants.append(VariantInfo(
        name="early-exit", kind="lm-exit", artifacts=depth_artifacts(deepest, spec.exits), inputs=tokens,
        metric="perplexity", quality=variants[-1].quality,
        extra={"depth": deepest, "early_exit": True, **common},
    ))
    mix = ", ".join(f"{int(w * 100)} % {t}" for t, w in spec.mix)
    info = ModelInfo(
        name=spec.name, family=FAMILY, task="text-generation",
        description=(f"character-level GPT, {spec.n_layer} layers x {spec.n_embd}, an exit head after "
                     f"every {'layer' if spec.exit_every == 1 else f'{spec.exit_every} layers'}, trained "
                     f"on {mix}; variant depthK loads only the first K layers, early-exit all of them "
                     f"with per-token exits at tau ({params:,} parameters in all)"),
        labels=list(SHARED_VOCAB.chars), default_variant=f"depth{deepest}", variants=variants,
        train={"seed": seed, "tiny": tiny, "steps": spec.train.steps, "batch_size": spec.train.batch_size,
               "lr": spec.train.lr, "deep_weighted_exits": spec.train.deep_weighted,
               "mix": dict(spec.mix), "exits": list(spec.exits), "main_task": spec.main_task,
               "seconds": round(seconds, 1), "parameters": params,
               "config": config.to_dict(), "held_out_tokens": {t: st[0].tokens for t, st in stats.items()},
               "metrics": {f"depth{s.depth}": {f"perplexity_{t}": round(st[j].perplexity, 4)
                                               for t, st in stats.items()}
                           for j, s in enumerate(main)}},
        versions={"torch": torch.__version__, "safetensors": safetensors.__version__,
                  "numpy": np.__version__, "python": platform.python_version()},
        source=f"{SOURCE}; {PYTHON_SOURCE}; each split: first 90 % train, last 10 % held out",
    )
    info.hashes = artifact_hashes(out_dir, info)
    return info


def build_xs(out_dir: Path, *, tiny: bool, seed: int, progress: rich.progress.Progress) -> ModelInfo:
    """``ee-lm-xs``: 2 layers x 64, exits after layers 1 and 2."""
    return build_lm(XS, out_dir, tiny=tiny, seed=seed, progress=progress)


def build_s(out_dir: Path, *, tiny: bool, seed: int, progress: rich.progress.Progress) -> ModelInfo:
    """``ee-lm-s``: 4 layers x 128, exits after each of the 4 layers."""
    return build_lm(S, out_dir, tiny=tiny, seed=seed, progress=progress)


def build_code(out_dir: Path, *, tiny: bool, seed: int, progress: rich.progress.Progress) -> ModelInfo:
    """``ee-lm-code``: 8 layers x 96, exits after layers 2, 4, 6 and 8, mostly Python."""
    return build_lm(CODE, out_dir, tiny=tiny, seed=seed, progress=progress)
