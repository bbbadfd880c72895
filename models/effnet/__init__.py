"""``effnet-lite0``: pretrained EfficientNet-Lite0, whole and split in two ONNX parts (StarONNX).

``build`` is the zoo builder (imported lazily: it pulls in torch); ``photos`` holds the labelled
scikit-image photos, the preprocessing and the ImageNet class names.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build"]


def __getattr__(name: str) -> Any:
    if name == "build":
        from adaserve.models.effnet.builder import build

        return build
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
