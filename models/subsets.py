"""Modality-subset variants of a late-fusion model (av-digits, av-video): the graph exported per
subset, the training mask that drops modalities, and the loop that measures and exports each.

A model here has ``subset(*inputs)``, taking its modalities in a fixed order with ``None`` for the
absent ones, and never runs an absent modality's encoder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import cast

import numpy as np
import torch
from torch import nn

from adaserve.models import training
from adaserve.models.manifest import InputSpec, VariantInfo


class SubsetGraph(nn.Module):
    """The graph exported for one modality subset; its inputs are exactly the subset's."""

    def __init__(self, net: nn.Module, names: tuple[str, ...], modalities: tuple[str, ...]) -> None:
        super().__init__()
        self.net, self.names, self.modalities = net, names, modalities

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        given = dict(zip(self.names, xs))
        # nn.Module types its attributes as tensors or modules: the model's ``subset`` is a method
        subset = cast(Callable[..., torch.Tensor], self.net.subset)
        return subset(*(given.get(m) for m in self.modalities))


def dropout_mask(rng: np.random.Generator, n: int, p: Mapping[str, float],
                 subsets: Mapping[str, tuple[str, ...]], modalities: tuple[str, ...]) -> np.ndarray:
    """A random subset per sample, drawn with the probabilities ``p``: one 0/1 column per modality."""
    names = list(p)
    picks = rng.choice(len(names), size=n, p=list(p.values()))
    return np.array([[m in subsets[names[k]] for m in modalities] for k in picks], dtype=np.float32)


def export_subsets(model: nn.Module, subsets: Mapping[str, tuple[str, ...]], modalities: tuple[str, ...],
                   feeds: Mapping[str, np.ndarray], labels: np.ndarray,
                   out_dir: Path) -> tuple[list[VariantInfo], dict[str, float]]:
    """Each subset's held-out accuracy and ONNX file (``audio_image.onnx`` for ``audio+image``):
    the manifest's variants and the metrics ``test_accuracy_<subset>``."""
    variants: list[VariantInfo] = []
    metrics: dict[str, float] = {}
    for name, names in subsets.items():
        wrapper = SubsetGraph(model, names, modalities)
        logits = training.predict(partial(_logits, wrapper, names), {k: feeds[k] for k in names})
        acc = training.accuracy(logits, labels)
        metrics[f"test_accuracy_{name}"] = acc
        artifact = f"{name.replace('+', '_')}.onnx"
        training.export_onnx(wrapper, {k: feeds[k][:2] for k in names}, out_dir / artifact, ["logits"])
        variants.append(VariantInfo(
            name=name, kind="modality-subset", artifacts=[artifact],
            inputs={k: InputSpec(shape=feeds[k].shape[1:], dtype="float32") for k in names},
            metric="accuracy", quality=acc, extra={"modalities": list(names)}))
    return variants, metrics


def _logits(wrapper: nn.Module, names: tuple[str, ...], b: dict[str, torch.Tensor]) -> torch.Tensor:
    out: torch.Tensor = wrapper(*(b[k] for k in names))
    return out
