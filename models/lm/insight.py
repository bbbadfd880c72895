"""What every exit would say about each held-out token: exit shares at tau and HELIOS's Insight 1.

HELIOS loads a model only up to a partial depth and still emits the tokens that are not confident
there (a *confidence breach*); its Insight 1 is that most of those tokens would not have changed
with the whole model (92.1 % unchanged on its data). Here that is measured teacher-forced on the
held-out text of a task: for each position, the top-1 token and its probability at every exit of
the full model, the same prefix for all of them.

The array functions (``first_exit``, ``exit_share``, ``unchanged_share``) are pure numpy so a
planner can apply them to figures it already holds; ``verdicts``/``insight1`` run a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Verdicts:
    """Per exit (rows, in ``depths`` order) and held-out position (columns): the top-1
    probability ``conf`` and the top-1 token ``pred``; ``target`` is the true next token."""

    depths: tuple[int, ...]
    conf: np.ndarray  # float32 [E, N]
    pred: np.ndarray  # int64 [E, N]
    target: np.ndarray  # int64 [N]


def first_exit(conf: np.ndarray, depths: tuple[int, ...], tau: float) -> np.ndarray:
    """Per position, the first exit depth whose confidence is >= ``tau``; 0 where none is."""
    ok = np.asarray(conf) >= tau
    first = np.asarray(depths)[ok.argmax(axis=0)]
    return np.where(ok.any(axis=0), first, 0)


def exit_share(conf: np.ndarray, depths: tuple[int, ...], tau: float) -> dict[int, float]:
    """Per exit K: the share of positions whose first confident exit is <= K (the tokens a model
    loaded up to K serves without a breach)."""
    first = first_exit(conf, depths, tau)
    hit = first > 0
    return {int(k): float(np.mean(hit & (first <= k))) for k in depths}


def unchanged_share(conf_k: np.ndarray, pred_k: np.ndarray, pred_full: np.ndarray,
                    tau: float) -> tuple[float, int]:
    """Insight 1 at one partial depth: among positions that breach ``tau`` there (``conf_k < tau``),
    the share whose top-1 token equals the whole model's; and how many breached (NaN share if none)."""
    breach = np.asarray(conf_k) < tau
    n = int(breach.sum())
    if n == 0:
        return float("nan"), 0
    return float(np.mean(np.asarray(pred_k)[breach] == np.asarray(pred_full)[breach])), n


def verdicts(model_dir: Path, ids: np.ndarray, max_windows: int | None = 64) -> Verdicts:
    """Run the whole model in ``model_dir`` (every exit) over non-overlapping windows of ``ids``."""
    import torch

    from adaserve.models.lm.train import windows
    from adaserve.models.lm.weights import load_depth, read_exits

    model, _ = load_depth(Path(model_dir), read_exits(Path(model_dir))[-1])
    x, y = windows(np.asarray(ids, np.int64), model.config.block_size, max_windows)
    confs, preds = [], []
    with torch.no_grad():
        for i in range(0, len(x), 32):
            logits = model.train_logits(torch.from_numpy(x[i:i + 32]))
            probs = [torch.softmax(lg.float(), -1).max(-1) for lg in logits]
            confs.append(np.stack([p.values.reshape(-1).numpy() for p in probs]))
            preds.append(np.stack([p.indices.reshape(-1).numpy() for p in probs]))
    return Verdicts(model.exit_depths, np.concatenate(confs, 1), np.concatenate(preds, 1).astype(np.int64),
                    y.reshape(-1).astype(np.int64))


def insight1(name: str, task: str, tau: float = 0.8, *, data_dir: Path | None = None,
             max_windows: int | None = 64) -> dict[int, dict[str, float]]:
    """Per partial depth K of model ``name`` on ``task``'s held-out text: ``breach_share`` (tokens
    below tau at K), ``unchanged`` (of those, the share the whole model would have emitted too),
    ``breaches`` (their count) and ``exit_share`` (tokens whose first confident exit is <= K)."""
    from adaserve.broker.settings import load_settings
    from adaserve.models.lm.corpus import load_task
    from adaserve.models.registry import find_model

    model_dir = find_model(name, data_dir if data_dir is not None else load_settings().data_dir)
    v = verdicts(model_dir, load_task(task).val, max_windows)
    shares = exit_share(v.conf, v.depths, tau)
    out: dict[int, dict[str, float]] = {}
    for j, k in enumerate(v.depths):
        same, n = unchanged_share(v.conf[j], v.pred[j], v.pred[-1], tau)
        out[int(k)] = {"breach_share": float(np.mean(v.conf[j] < tau)), "unchanged": same,
                       "breaches": float(n), "exit_share": shares[int(k)]}
    return out


def covering_depth(first: np.ndarray, depths: tuple[int, ...], share: float) -> int:
    """The shallowest exit K at which at least ``share`` of the tokens that are confident somewhere
    (``first`` > 0, e.g. results' ``exit_at_tau`` gathered at the deepest depth) have exited; the
    deepest exit when none covers it or no token was confident. HELIOS's greedy partial loading
    loads a model up to this depth."""
    first = np.asarray(first).ravel()
    sure = first[first > 0]
    if sure.size:
        for k in depths:
            if np.mean(sure <= k) >= share:
                return int(k)
    return int(depths[-1])
