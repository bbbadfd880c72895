"""``ee-lm-s-split``: the character GPT ``ee-lm-s`` as ONNX, whole and cut in two (StarONNX's
transformer case, as the paper's ViT).

Built from the shipped ``ee-lm-s`` weights (nothing is trained): the input is a window of
``PROMPT_LEN`` token ids, the output the logits of the next character. The chain's units are the
embeddings, each block's attention half and MLP half (both end on the residual stream, so one
``[T, C]`` tensor crosses every boundary) and the last exit head; the cut is the split rule's on
the recorded per-unit times (``node_times.json``).
"""

from __future__ import annotations

import json
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import rich.progress
import torch
from torch import nn
from torch.nn import functional as F

from adaserve.broker.errors import BuildError
from adaserve.models.chain import Chain
from adaserve.models.lm.gpt import Block, EarlyExitGpt
from adaserve.models.manifest import InputSpec, ModelInfo, artifact_hashes
from adaserve.models.node_times import NODE_TIMES, choice_of, shipped
from adaserve.models.split_export import export_and_check, split_variants

NAME = "ee-lm-s-split"
SOURCE_MODEL = "ee-lm-s"
PROMPT_LEN = 32
SPLIT_TOLERANCE = 1e-4
HELD_OUT = 256  # windows of the held-out text for the checks


class Embed(nn.Module):
    def __init__(self, gpt: EarlyExitGpt) -> None:
        super().__init__()
        self.tok, self.pos = gpt.tok, gpt.pos

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))


class Attention(nn.Module):
    """``x + attention(ln1(x))`` of one block, causal (the windows are unpadded)."""

    def __init__(self, block: Block) -> None:
        super().__init__()
        self.n_head, self.ln1, self.qkv, self.proj = block.n_head, block.ln1, block.qkv, block.proj

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.proj(y.transpose(1, 2).reshape(b, t, c))


class Mlp(nn.Module):
    def __init__(self, block: Block) -> None:
        super().__init__()
        self.ln2, self.fc, self.out = block.ln2, block.fc, block.out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class LastHead(nn.Module):
    """The deepest exit head on the last position: the next character's logits."""

    def __init__(self, gpt: EarlyExitGpt) -> None:
        super().__init__()
        self.head = gpt.exits[str(gpt.depth)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x[:, -1])


def _gpt() -> tuple[EarlyExitGpt, Path]:
    from adaserve.models.lm.weights import load_depth, read_config
    from adaserve.models.registry import zoo_dir

    src = zoo_dir() / SOURCE_MODEL
    config, _ = read_config(src)
    gpt, _ = load_depth(src, config.n_layer)
    return gpt, src


def units(gpt: EarlyExitGpt) -> tuple[list[nn.Module], list[str]]:
    modules: list[nn.Module] = [Embed(gpt)]
    names = ["embed"]
    for i, block in enumerate(gpt.blocks, start=1):
        modules += [Attention(block), Mlp(block)]  # type: ignore[arg-type]
        names += [f"block{i}.attn", f"block{i}.mlp"]
    return [*modules, LastHead(gpt)], [*names, "head"]


def held_out(n: int = HELD_OUT) -> np.ndarray:
    """``n`` windows of ``PROMPT_LEN`` token ids from the held-out tail of the corpus, evenly spaced."""
    from adaserve.models.lm.corpus import load_corpus

    val = np.asarray(load_corpus().val, dtype=np.int64)
    starts = np.linspace(0, len(val) - PROMPT_LEN - 1, n).astype(np.int64)
    return np.stack([val[s:s + PROMPT_LEN] for s in starts])


def chain() -> tuple[Chain, list[str], Any, str, str]:
    gpt, _ = _gpt()
    modules, names = units(gpt)
    windows = held_out()

    def feed(b: int) -> np.ndarray:
        return np.ascontiguousarray(np.resize(windows, (b, PROMPT_LEN)))

    return Chain(modules).eval(), names, feed, "tokens", "logits"


def build(out_dir: Path, *, tiny: bool, seed: int, progress: rich.progress.Progress) -> ModelInfo:
    """Export whole + parts and check them; nothing is trained (``seed`` unused, ``tiny`` checks fewer windows)."""
    t0 = time.perf_counter()
    task = progress.add_task(f"{NAME}: exporting", total=3)
    torch.manual_seed(seed)
    gpt, src = _gpt()
    modules, names = units(gpt)
    whole_net = Chain(modules).eval()
    times = shipped(NAME)
    if [u["name"] for u in times["units"]] != names:
        raise BuildError("node_times.json does not list this model's units; re-run `adaserve profile nodes`")
    cut = choice_of(times)
    p1, p2 = whole_net.split(cut)
    tokens = held_out(64 if tiny else HELD_OUT)
    progress.update(task, advance=1, description=f"{NAME}: exporting and checking split = whole")
    check = export_and_check(whole_net, p1, p2, tokens, "tokens", out_dir, SPLIT_TOLERANCE)
    whole, split_diff, torch_diff = check.whole, check.split_diff, check.torch_diff
    # Next-character accuracy on the held-out windows: the variant's quality.
    from adaserve.models.lm.corpus import load_corpus

    corpus = load_corpus()
    val = np.asarray(corpus.val, dtype=np.int64)
    starts = np.linspace(0, len(val) - PROMPT_LEN - 1, len(tokens)).astype(np.int64)
    accuracy = round(float((whole.argmax(1) == val[starts + PROMPT_LEN]).mean()), 4)
    progress.update(task, advance=1, description=f"{NAME}: writing manifest")
    tok_spec = {"tokens": InputSpec(shape=(PROMPT_LEN,), dtype="int64")}
    common = {"cut": cut, "units": len(names), "split_after": names[cut - 1],
              "tail_share": times["split"]["tail_share"],
              "node_times": {"device": times["device"], "batch": times["batch"]}}
    variants = split_variants(check, tok_spec, accuracy, common, out_dir)
    config = json.loads((src / "config.json").read_text())
    info = ModelInfo(
        name=NAME, family="lm-split", task="next-character",
        description=(f"{SOURCE_MODEL} (character GPT, {gpt.config.n_layer} layers x {gpt.config.n_embd}) as ONNX: "
                     f"{PROMPT_LEN} token ids -> next-character logits, whole and cut after {names[cut - 1]}"),
        labels=list(config["chars"]), default_variant="whole", variants=variants,
        train={"seed": seed, "tiny": tiny, "from": SOURCE_MODEL, "seconds": round(time.perf_counter() - t0, 1),
               "metrics": {"split_max_abs_diff": split_diff, "onnx_vs_torch_max_abs_diff": torch_diff,
                           "next_char_accuracy": accuracy, "windows": len(tokens)}},
        versions={"torch": torch.__version__, "onnx": metadata.version("onnx"), "python": platform.python_version()},
        source=f"weights of the shipped {SOURCE_MODEL} (trained here on tiny-shakespeare); held-out windows: its last 10 %",
    )
    info.hashes = artifact_hashes(out_dir, info)
    (out_dir / NODE_TIMES).write_text(json.dumps(times, indent=1) + "\n")
    progress.update(task, advance=1, description=f"{NAME}: done")
    return info
