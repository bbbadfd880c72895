"""Per-layer weight files, so a runner reads only the layers it serves.

Layout of a model directory:
``config.json`` (architecture + vocabulary), ``embeddings.safetensors`` (token and position tables),
``block{i}.safetensors`` for i in 1..n_layer, ``exit{i}.safetensors`` for each exit head.
Depth ``k`` (an exit) needs config, embeddings, blocks 1..k and every exit head up to k (a few
kilobytes each: a runner reads all of them to tell at which exit each token would have been
confident); nothing deeper is opened.
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


def depth_artifacts(depth: int, exits: tuple[int, ...] | None = None) -> list[str]:
    """Files that serving depth ``depth`` reads (relative to the model directory); ``exits`` are
    the model's exit depths (default: one after every layer)."""
    heads = [e for e in (exits or range(1, depth + 1)) if e <= depth]
    return [CONFIG, EMBEDDINGS, *(block_file(i) for i in range(1, depth + 1)), *(exit_file(e) for e in heads)]


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


def read_exits(model_dir: Path) -> tuple[int, ...]:
    """The exit depths the model was trained with (``config.json``)."""
    config, _ = read_config(model_dir)
    raw = json.loads((model_dir / CONFIG).read_text())
    return tuple(int(e) for e in raw.get("exits", range(1, config.n_layer + 1)))


def load_depth(model_dir: Path, depth: int) -> tuple[EarlyExitGpt, list[str]]:
    """Build the model up to ``depth`` (one of its exits) from its files alone, with every exit
    head up to ``depth``; returns it and the files read."""
    config, _ = read_config(model_dir)
    all_exits = read_exits(model_dir)
    if depth not in all_exits:
        raise ModelNotFound(f"{model_dir.name} has no exit at depth {depth} (exits: {list(all_exits)})")
    exits = tuple(e for e in all_exits if e <= depth)
    model = EarlyExitGpt(config, depth=depth, exits=exits)
    files = depth_artifacts(depth, exits)
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
            state.update({f"exits.{int(name[4:-12])}.{k}": v for k, v in tensors.items()})
    model.load_state_dict(state, strict=True)
    return model.eval(), files
