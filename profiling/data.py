"""Validation inputs of every model family, and how to score a variant's outputs on them.

Audio and image models take theirs from ``adaserve.models.datasets.sample_inputs`` (held-out
split); the language models from the held-out tail of tiny-shakespeare; effnet-lite0 from its
labelled scikit-image photos (part 2 receives part 1's real intermediate tensors).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from adaserve.models.manifest import ModelInfo, VariantInfo
from adaserve.workers.runtime.base import Runner, RunOutput

RunnerFactory = Callable[[str], Runner]  # variant name -> runner on the profiled device


@dataclass(frozen=True)
class Validation:
    """Stacked validation inputs and a per-sample correctness check (None: no accuracy)."""

    inputs: dict[str, np.ndarray]
    correct: Callable[[RunOutput, np.ndarray], np.ndarray] | None = None

    @property
    def size(self) -> int:
        return len(next(iter(self.inputs.values())))

    def take(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        return {k: v[idx] for k, v in self.inputs.items()}

    def batch(self, n: int) -> dict[str, np.ndarray]:
        """``n`` samples, cycling through the pool when ``n`` exceeds it."""
        return self.take(np.arange(n) % self.size)


def validation(info: ModelInfo, variant: VariantInfo, n: int, *, seed: int,
               runner_for: RunnerFactory) -> Validation:
    """Up to ``n`` validation samples for ``variant``, shaped as its manifest says."""
    if variant.kind == "lm-exit":
        from adaserve.models.lm.prompts import sample_prompts

        length = int(variant.inputs["tokens"].shape[0])
        tokens, _ = sample_prompts(n, length, seed=seed)
        return Validation({"tokens": tokens})
    if info.family == "effnet":
        return _effnet(variant, runner_for)
    if variant.kind == "part":
        return _part(info, variant, n, seed=seed, runner_for=runner_for)
    from adaserve.models.datasets import sample_inputs

    samples, labels = sample_inputs(info.name, n, seed=seed)
    names = list(variant.inputs)
    stacked = {k: np.stack([s[k] for s in samples]).astype(variant.inputs[k].dtype) for k in names}
    return Validation(stacked, _label_check(labels))


def _label_check(labels: np.ndarray) -> Callable[[RunOutput, np.ndarray], np.ndarray]:
    def check(out: RunOutput, idx: np.ndarray) -> np.ndarray:
        if out.predictions is None:
            raise ValueError("the runner returned no predictions to score")
        return np.asarray(out.predictions).reshape(-1) == labels[idx]
    return check


def _effnet(variant: VariantInfo, runner_for: RunnerFactory) -> Validation:
    from adaserve.models.effnet.photos import validation_set

    # Every labelled view once (20 images); larger batches cycle through them.
    images, records = validation_set()
    accepted = [r.accepted for r in records]

    def check(out: RunOutput, idx: np.ndarray) -> np.ndarray:
        preds = np.asarray(out.predictions).reshape(-1)
        return np.array([int(p) in accepted[i] for p, i in zip(preds, idx)])

    if "image" in variant.inputs:
        last = variant.kind != "part" or variant.extra.get("next") is None
        return Validation({"image": images}, check if last else None)
    # A later part: feed it what the first part really hands on.
    first = runner_for("part1")
    return Validation({"intermediate": first.run({"image": images}).outputs["intermediate"]}, check)


def _part(info: ModelInfo, variant: VariantInfo, n: int, *, seed: int, runner_for: RunnerFactory) -> Validation:
    """A part of another split model (ee-lm-s-split): part 1 takes the model's samples, a later
    part what part 1 really hands on; only the last part is scored."""
    from adaserve.models.datasets import sample_inputs

    samples, labels = sample_inputs(info.name, n, seed=seed)
    first = info.variant("part1")
    stacked = {k: np.stack([s[k] for s in samples]).astype(spec.dtype) for k, spec in first.inputs.items()}
    last = variant.extra.get("next") is None
    if variant.name == first.name:
        return Validation(stacked, _label_check(labels) if last else None)
    return Validation({"intermediate": runner_for(first.name).run(stacked).outputs["intermediate"]}, _label_check(labels))
