"""Real prompts from the held-out text, encoded and padded the way ``LmRunner`` expects, and a
stream of them whose task drifts (``drifting_prompts``) for HELIOS."""

from __future__ import annotations

import numpy as np

from adaserve.models.lm.corpus import SHARED_VOCAB, load_corpus, load_task

PAD_ID = -1
NEWLINE_ID = SHARED_VOCAB.chars.index("\n")


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


def drifting_prompts(n: int, segments: tuple[tuple[str, int], ...] | None = None, seed: int = 0,
                     length: int = 32) -> list[tuple[str, str]]:
    """A prompt stream whose task changes over time: ``(task, prompt_text)`` in stream order.

    ``segments`` are ``(task, count)`` in order (default: Shakespeare for the first ``n // 2``,
    then Python for the rest); each prompt is ``length`` characters of that task's held-out tail
    starting at a line start (never trained on). The counts must add up to ``n``.
    """
    if n < 1 or length < 1:
        raise ValueError(f"n and length must be at least 1, got {n} and {length}")
    segments = segments or (("shakespeare", n // 2), ("python", n - n // 2))
    if sum(c for _, c in segments) != n or any(c < 0 for _, c in segments):
        raise ValueError(f"segment counts {[c for _, c in segments]} must be >= 0 and add up to {n}")
    rng = np.random.default_rng(seed)
    out: list[tuple[str, str]] = []
    for task, count in segments:
        corpus = load_task(task)
        val = corpus.val
        newline = np.flatnonzero(val[:-length - 1] == NEWLINE_ID) + 1
        starts = rng.choice(newline, size=count, replace=count > newline.size)
        out.extend((task, corpus.vocab.decode(val[s:s + length])) for s in starts)
    return out
