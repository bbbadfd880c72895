"""Training and held-out evaluation of the early-exit GPTs (pure torch, fixed seeds)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from adaserve.models.lm.gpt import EarlyExitGpt, GptConfig


@dataclass(frozen=True)
class TrainConfig:
    steps: int
    batch_size: int
    lr: float
    weight_decay: float = 0.01
    warmup: int = 50
    deep_weighted: bool = False  # weight exit k's loss by k instead of equally


def exit_weights(depths: tuple[int, ...], deep_weighted: bool) -> list[float]:
    """Loss weights of the exits (summing to 1)."""
    raw = [float(d) if deep_weighted else 1.0 for d in depths]
    return [w / sum(raw) for w in raw]


@dataclass(frozen=True)
class ExitStats:
    """Held-out figures of one exit: perplexity, mean top-1 confidence, agreement with the last exit."""

    depth: int
    perplexity: float
    mean_confidence: float
    agree_with_last: float
    tokens: int


Sources = Sequence[tuple[np.ndarray, float]]


def train(model: EarlyExitGpt, ids: np.ndarray | Sources, cfg: TrainConfig, seed: int,
          on_step: Callable[[int, float], None] | None = None) -> float:
    """Train all exits jointly (weighted mean of their losses); returns the wall time in seconds.

    ``ids`` is one token sequence or several ``(ids, weight)``: then each training window is drawn
    from a source chosen with probability proportional to its weight (a mixture of corpora).
    """
    rng = np.random.default_rng(seed)
    block = model.config.block_size
    sources = [(ids, 1.0)] if isinstance(ids, np.ndarray) else list(ids)
    p = np.array([w for _, w in sources], dtype=np.float64)
    p /= p.sum()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay,
                            betas=(0.9, 0.99))
    weights = exit_weights(model.exit_depths, cfg.deep_weighted)
    model.train()
    t0 = time.perf_counter()
    for step in range(cfg.steps):
        which = rng.choice(len(sources), size=cfg.batch_size, p=p) if len(sources) > 1 else \
            np.zeros(cfg.batch_size, dtype=np.int64)
        wins = []
        for src in which:
            data = sources[int(src)][0]
            s0 = int(rng.integers(0, len(data) - block - 1))
            wins.append(data[s0:s0 + block + 1])
        win = np.stack(wins)
        x, y = torch.from_numpy(win[:, :-1].copy()), torch.from_numpy(win[:, 1:].copy())
        for group in opt.param_groups:
            group["lr"] = _lr(step, cfg)
        logits = model.train_logits(x)
        loss = torch.stack([w * F.cross_entropy(lg.reshape(-1, lg.shape[-1]), y.reshape(-1))
                            for w, lg in zip(weights, logits)]).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if on_step is not None:
            on_step(step, loss.item())
    model.eval()
    return time.perf_counter() - t0


def _lr(step: int, cfg: TrainConfig) -> float:
    # Linear warm-up then cosine decay to a tenth: stable for these small models at a high peak rate.
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    frac = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def windows(ids: np.ndarray, block: int, max_windows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Non-overlapping (input, target) windows over ``ids``: every held-out token scored once."""
    n = (len(ids) - 1) // block
    if max_windows is not None:
        n = min(n, max_windows)
    if n < 1:
        raise ValueError(f"need more than {block} tokens to evaluate, got {len(ids)}")
    x = ids[:n * block].reshape(n, block)
    y = ids[1:n * block + 1].reshape(n, block)
    return x, y


@torch.no_grad()
def evaluate_exits(model: EarlyExitGpt, ids: np.ndarray, max_windows: int | None = None,
                   batch: int = 64) -> list[ExitStats]:
    """Perplexity (exp of mean NLL per character) of every exit on held-out ids."""
    x, y = windows(ids, model.config.block_size, max_windows)
    depths = model.exit_depths
    nll = np.zeros(len(depths))
    conf = np.zeros(len(depths))
    agree = np.zeros(len(depths))
    for i in range(0, len(x), batch):
        xb, yb = torch.from_numpy(x[i:i + batch]), torch.from_numpy(y[i:i + batch])
        logits = model.train_logits(xb)
        last = logits[-1].argmax(-1)
        for j, lg in enumerate(logits):
            logp = F.log_softmax(lg, dim=-1)
            nll[j] += float(-logp.gather(-1, yb[..., None]).sum())
            conf[j] += float(logp.max(-1).values.exp().sum())
            agree[j] += float((lg.argmax(-1) == last).sum())
    n = x.size
    return [ExitStats(d, math.exp(nll[j] / n), conf[j] / n, agree[j] / n, int(n))
            for j, d in enumerate(depths)]


def new_gpt(config: GptConfig, seed: int, exits: tuple[int, ...] | None = None) -> EarlyExitGpt:
    torch.manual_seed(seed)
    model = EarlyExitGpt(config, exits=exits)
    model.init_weights(torch.Generator().manual_seed(seed))
    return model
