"""Early-exit character-level GPTs (``ee-lm-xs``, ``ee-lm-s``, ``ee-lm-code``) for HELIOS serving.

``build_xs``/``build_s``/``build_code`` are the zoo builders; ``corpus`` holds the data, ``gpt`` the network,
``weights`` the per-layer files, ``prompts`` real held-out prompts for producers and the profiler
(and HELIOS's drifting stream), ``insight`` what every exit says about each token (exit shares,
Insight 1), ``helios_profile`` the offline per-depth profile planners read.
Builders are imported lazily so that reading prompts does not import torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_code", "build_s", "build_xs"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from adaserve.models.lm import build

        return getattr(build, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
