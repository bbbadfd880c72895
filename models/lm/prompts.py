"""Real prompts from the held-out text, encoded and padded the way ``LmRunner`` expects."""

from __future__ import annotations

import numpy as np

from adaserve.models.lm.corpus import load_corpus

PAD_ID = -1


def pad_prompts(prompts: list[np.ndarray], length: int, pad_id: int = PAD_ID) -> np.ndarray:
    """Right-align token-id prompts in an int64 [N, length] array, left-padded with ``pad_id``.

    Prompts longer than ``length`` keep their last ``length`` tokens (the most recent context).
    """
    out = np.full((len(prompts), length), pad_id, dtype=np.int64)
    for i, p in enumerate(prompts):
        p = np.asarray(p, dtype=np.int64).ravel()[-length:]
        if p.size:
            out[i, length - p.size:] = p
    return out


def sample_prompts(n: int, length: int, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` prompts of ``length`` held-out characters and the character that follows each.

    Returns (tokens int64 [n, length], next int64 [n]); drawn without replacement when they fit.
    """
    if n < 1 or length < 1:
        raise ValueError(f"n and length must be at least 1, got {n} and {length}")
    val = load_corpus().val
    rng = np.random.default_rng(seed)
    starts = rng.choice(len(val) - length - 1, size=n, replace=n > len(val) - length - 1)
    tokens = np.stack([val[s:s + length] for s in starts]).astype(np.int64)
    return tokens, val[starts + length].astype(np.int64)
