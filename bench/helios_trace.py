"""What the HELIOS benchmark measures on the real models before replaying policies.

For every candidate and every prompt of the drifting stream: the tokens the whole model
generates (greedy), and for each of those tokens, read off every exit head by one teacher-forced
pass over prompt + generation: the first exit whose top-1 probability reaches tau (0: none),
and whether that exit's own top-1 token is the whole model's (the paper's Insight 1); and the
prompt's perplexity at every exit (from the prefill logits). Per depth and batch size: prefill
and per-step seconds of the real runner, the seconds to load that depth from disk, weight and
KV-cache bytes. Medians of ``repeats`` timings, all on one thread, side by side in one process.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from adaserve.models.lm.gpt import EarlyExitGpt
from adaserve.models.lm.prompts import drifting_prompts, pad_prompts
from adaserve.models.lm.weights import EMBEDDINGS, block_file, exit_file, load_depth, read_config
from adaserve.models.registry import load_info

BATCHES = (1, 4, 16)


def drifting_stream(n: int, length: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` prompts of ``length`` held-out characters: Shakespeare, then Python source
    (``models.lm.prompts.drifting_prompts``, on the family's shared vocabulary)."""
    return drifting_prompts(n, seed=seed, length=length)


@dataclass(frozen=True)
class Trace:
    """One model on the stream: ``exit_at_tau`` [P, N], ``agree`` [P, N, E] (exit e's token is the
    whole model's), ``ppl`` [P, E] prompt perplexity per exit; ``exits`` the exit depths."""

    model: str
    exits: tuple[int, ...]
    exit_at_tau: np.ndarray
    agree: np.ndarray
    ppl: np.ndarray


@dataclass(frozen=True)
class Costs:
    """Measured seconds by depth and batch size; bytes by depth."""

    model: str
    prefill_s: dict[int, dict[int, float]]
    step_s: dict[int, dict[int, float]]
    load_s: dict[int, float]
    weight_bytes: dict[int, int]
    kv_bytes_per_token: dict[int, int]
    block_size: int
    # The ``early-exit`` variant (all layers, each token leaving at its first exit >= tau) at
    # batch 1, per task: seconds per prompt of ``new`` tokens and to its first token.
    early_exit_s: dict[str, float]
    early_exit_ttft_s: dict[str, float]


def _all_exits(model_dir: Path) -> EarlyExitGpt:
    config, _ = read_config(model_dir)
    import json

    exits = tuple(json.loads((model_dir / "config.json").read_text()).get("exits") or range(1, config.n_layer + 1))
    net = EarlyExitGpt(config, exits=exits)
    from safetensors.torch import load_file

    state = {**load_file(str(model_dir / EMBEDDINGS))}
    for i in range(1, config.n_layer + 1):
        state.update({f"blocks.{i - 1}.{k}": v for k, v in load_file(str(model_dir / block_file(i))).items()})
    for e in exits:
        state.update({f"exits.{e}.{k}": v for k, v in load_file(str(model_dir / exit_file(e))).items()})
    net.load_state_dict(state, strict=True)
    return net.eval()


@torch.no_grad()
def trace(model: str, data_dir: Path, prompts: list[str], new: int, tau: float) -> Trace:
    from adaserve.workers.runtime.lm import LmRunner

    model_dir, info = load_info(model, data_dir)
    net = _all_exits(model_dir)
    chars = read_config(model_dir)[1]
    index = {c: i for i, c in enumerate(chars)}
    ids = [np.array([index.get(c, index.get(" ", 0)) for c in p], np.int64) for p in prompts]
    full = max((v for v in info.variants if v.kind == "lm-exit" and not v.extra.get("early_exit")),
               key=lambda v: int(v.extra["depth"]))
    runner = LmRunner(model_dir, info, full, "cpu", threads=1)
    gen = np.concatenate([runner.generate(pad_prompts(ids[i:i + 64], len(prompts[0])), new)[0]
                          for i in range(0, len(ids), 64)])
    seq = torch.from_numpy(np.concatenate([np.stack(ids), gen], axis=1))
    plen = len(prompts[0])
    logits = net.train_logits(seq)  # one [P, T, V] per exit
    probs = [torch.softmax(lg.float(), -1) for lg in logits]
    target = seq[:, plen:]
    conf = torch.stack([p[:, plen - 1:-1].max(-1).values for p in probs], -1)       # [P, N, E]
    top = torch.stack([p[:, plen - 1:-1].argmax(-1) for p in probs], -1)            # [P, N, E]
    exits = net.exit_depths
    ok = conf >= tau
    first = torch.where(ok.any(-1), ok.float().argmax(-1), torch.full(ok.shape[:2], -1))
    exit_at = torch.tensor([0, *exits])[first + 1]
    agree = top == target[..., None]
    nll = torch.stack([-torch.log_softmax(lg[:, :plen - 1].float(), -1).gather(-1, seq[:, 1:plen, None])[..., 0]
                       .mean(-1) for lg in logits], -1)
    return Trace(model, tuple(exits), exit_at.numpy(), agree.numpy(), torch.exp(nll).numpy())


def costs(model: str, data_dir: Path, prompts: list[str], new: int, repeats: int = 3, *,
          tasks: list[str] | None = None, tau: float = 0.8, per_task: int = 8) -> Costs:
    from adaserve.workers.runtime.lm import LmRunner

    model_dir, info = load_info(model, data_dir)
    config, chars = read_config(model_dir)
    index = {c: i for i, c in enumerate(chars)}
    ids = [np.array([index.get(c, 0) for c in p], np.int64) for p in prompts[:max(BATCHES)]]
    prefill: dict[int, dict[int, float]] = {}
    step: dict[int, dict[int, float]] = {}
    load: dict[int, float] = {}
    weight: dict[int, int] = {}
    ee_s: dict[str, float] = {}
    ee_ttft: dict[str, float] = {}
    for v in info.variants:
        if v.kind == "lm-exit" and v.extra.get("early_exit"):
            runner = LmRunner(model_dir, info, v, "cpu", threads=1)
            labels = tasks or ["all"] * len(prompts)
            for t in dict.fromkeys(labels):
                idx = [i for i, x in enumerate(labels) if x == t]
                pick = [idx[j * len(idx) // per_task] for j in range(min(per_task, len(idx)))]
                whole, first = [], []
                for i in pick:
                    toks = pad_prompts([np.array([index.get(c, 0) for c in prompts[i]], np.int64)], len(prompts[0]))
                    whole.append(statistics.median(_timed(runner, toks, new, tau) for _ in range(repeats)))
                    first.append(statistics.median(_timed(runner, toks, 1, tau) for _ in range(repeats)))
                ee_s[t], ee_ttft[t] = float(np.mean(whole)), float(np.mean(first))
            continue
        if v.kind != "lm-exit":
            continue
        d = int(v.extra["depth"])
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            load_depth(model_dir, d)
            times.append(time.perf_counter() - t0)
        load[d] = statistics.median(times)
        runner = LmRunner(model_dir, info, v, "cpu", threads=1)
        weight[d] = runner.weight_bytes
        prefill[d], step[d] = {}, {}
        for b in BATCHES:
            toks = pad_prompts(ids[:b], len(prompts[0]))
            one = statistics.median(_timed(runner, toks, 1) for _ in range(repeats))
            many = statistics.median(_timed(runner, toks, new) for _ in range(repeats))
            prefill[d][b] = one
            step[d][b] = max(many - one, 0.0) / max(new - 1, 1)
    kv = {d: 2 * d * config.n_embd * 4 for d in weight}
    return Costs(model, prefill, step, load, weight, kv, config.block_size, ee_s, ee_ttft)


def _timed(runner: object, toks: np.ndarray, n: int, tau: float | None = None) -> float:
    t0 = time.perf_counter()
    runner.decode(toks, n, tau=None if tau is None else np.full(len(toks), tau))  # type: ignore[attr-defined]
    return time.perf_counter() - t0
