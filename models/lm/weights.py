"""Per-layer weight files, so a runner reads only the layers it serves.

Layout of a model directory:
``config.json`` (architecture + vocabulary), ``embeddings.safetensors`` (token and position tables),
``block{i}.safetensors`` for i in 1..n_layer, ``exit{i}.safetensors`` for each exit head.
Depth ``k`` needs config, embeddings, blocks 1..k and exit k; nothing else is opened.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from adaserve.broker.errors import ModelNotFound
from adaserve.models.lm.gpt import EarlyExitGpt, GptConfig

CONFIG = "config.json"
EMBEDDINGS = "embeddings.safetensors"


def block_file(i: int) -> str:
    return f"block{i}.safetensors"


def exit_file(i: int) -> str:
    return f"exit{i}.safetensors"


def depth_artifacts(depth: int) -> list[str]:
    """Files that serving depth ``depth`` reads (relative to the model directory)."""
    return [CONFIG, EMBEDDINGS, *(block_file(i) for i in range(1, depth + 1)), exit_file(depth)]


def _strip(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: v.detach().contiguous().clone()
            for k, v in state.items() if k.startswith(prefix)}


def save_layers(model: EarlyExitGpt, out_dir: Path, chars: tuple[str, ...]) -> list[str]:
    """Write the model one file per layer; returns the written paths (relative)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    state = model.state_dict()
    files: dict[str, dict[str, torch.Tensor]] = {
        EMBEDDINGS: {**{"tok." + k: v for k, v in _strip(state, "tok.").items()},
                     **{"pos." + k: v for k, v in _strip(state, "pos.").items()}},
    }
    for i in range(1, model.depth + 1):
        files[block_file(i)] = _strip(state, f"blocks.{i - 1}.")
    for e in model.exit_depths:
        files[exit_file(e)] = _strip(state, f"exits.{e}.")
    for name, tensors in files.items():
        save_file(tensors, str(out_dir / name))
    cfg = {**model.config.to_dict(), "exits": list(model.exit_depths), "chars": list(chars)}
    (out_dir / CONFIG).write_text(json.dumps(cfg, indent=1, ensure_ascii=False) + "\n")
    return [CONFIG, *files]


def read_config(model_dir: Path) -> tuple[GptConfig, tuple[str, ...]]:
    path = model_dir / CONFIG
    if not path.is_file():
        raise ModelNotFound(f"no {CONFIG} in {model_dir}")
    raw = json.loads(path.read_text())
    return GptConfig.from_dict(raw), tuple(raw["chars"])


def load_depth(model_dir: Path, depth: int) -> tuple[EarlyExitGpt, list[str]]:
    """Build the model up to ``depth`` from its files alone; returns it and the files read."""
    config, _ = read_config(model_dir)
    model = EarlyExitGpt(config, depth=depth, exits=(depth,))
    files = depth_artifacts(depth)
    state: dict[str, torch.Tensor] = {}
    for name in files[1:]:
        path = model_dir / name
        if not path.is_file():
            raise ModelNotFound(f"missing weight file {path}")
        tensors = load_file(str(path))
        if name == EMBEDDINGS:
            state.update(tensors)
        elif name.startswith("block"):
            state.update({f"blocks.{int(name[5:-12]) - 1}.{k}": v for k, v in tensors.items()})
        else:
            state.update({f"exits.{depth}.{k}": v for k, v in tensors.items()})
    model.load_state_dict(state, strict=True)
    return model.eval(), files
