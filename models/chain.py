"""A model as a chain of units, so that any unit boundary is a cut with one crossing tensor.

The split rule (``split_point``) needs per-unit times and the bytes crossing each boundary; the
build needs part 1 = units ``[:k]`` and part 2 = units ``[k:]``. ``Chain`` gives all three: its
ONNX export names every node ``/units.<i>/...``, which is how profiled node times are summed per
unit (``node_times``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn


class Chain(nn.Module):
    """``units`` applied one after the other; each takes and returns one tensor."""

    def __init__(self, units: Sequence[nn.Module]) -> None:
        super().__init__()
        self.units = nn.ModuleList(units)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for unit in self.units:
            x = unit(x)
        return x

    def split(self, k: int) -> tuple[Chain, Chain]:
        if not 1 <= k < len(self.units):
            raise ValueError(f"a cut must lie in 1..{len(self.units) - 1}, got {k}")
        return Chain(list(self.units[:k])).eval(), Chain(list(self.units[k:])).eval()


def crossing_bytes(chain: Chain, example: torch.Tensor) -> list[int | None]:
    """Per cut ``k`` (index 0 unused: None), the bytes per sample of the tensor crossing it."""
    sizes: list[int | None] = [None]
    x = example
    with torch.no_grad():
        for unit in chain.units[:-1]:
            x = unit(x)
            sizes.append(int(x[0].numel() * x.element_size()))
    return sizes


def export(module: nn.Module, example: torch.Tensor, path: Path, input_name: str, output_name: str,
           opset: int = 17) -> None:
    """ONNX with a dynamic batch axis, through the TorchScript exporter (no onnxscript needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (example,), str(path), input_names=[input_name],
                          output_names=[output_name], opset_version=opset, dynamo=False,
                          dynamic_axes={input_name: {0: "batch"}, output_name: {0: "batch"}})
