"""Prompts of a generation batch: each request checked on its own, then packed into one batch.

A language-model runner (a ``GenerativeRunner``, ``runtime.lm.LmRunner``) takes ``tokens`` int64
[B, P], right-aligned and left-padded with its pad id, plus per-row ``max_new_tokens``,
``temperature`` and ``seed``. Here each request's prompt is validated alone (a bad prompt fails
only its own request), and prompts of any length are packed into that one array, so they run in
one batch instead of one per length.

A ``forward`` request on a language model is next-token prediction: one greedy token, reported
as the result's ``prediction`` and ``confidence`` like a classifier's answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from adaserve.broker.messages import BatchItem
from adaserve.workers.inputs import InputError
from adaserve.workers.runtime.base import GenerativeRunner


@dataclass(frozen=True, slots=True)
class Prompt:
    tokens: np.ndarray  # int64 [length]
    new: int  # tokens to generate
    temperature: float
    seed: int
    forward: bool  # next-token prediction (kind "forward")
    tau: float = float("nan")  # the request's confidence threshold; NaN: the variant's


def default_seed(job_id: str, request_id: str) -> int:
    """A seed fixed by the request's identity: a redelivered batch samples the same tokens."""
    digest = hashlib.blake2b(f"{job_id}\x00{request_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def prompt_of(item: BatchItem, runner: GenerativeRunner) -> Prompt:
    """The request's prompt and generation settings; ``InputError`` saying why it cannot run."""
    t = item.inputs.get("tokens")
    if t is None:
        have = ", ".join(sorted(item.inputs)) or "none"
        raise InputError(f"missing input 'tokens' (request has: {have})")
    shape = tuple(t.shape)
    if len(shape) == 2 and shape[0] == 1:
        shape = shape[1:]  # a producer that kept a batch axis of one
    dtype = np.dtype(t.dtype)
    if len(shape) != 1 or shape[0] < 1 or dtype.kind not in "iu":
        raise InputError(f"'tokens' must be the integer ids of one prompt, shape [length >= 1]; "
                         f"got {t.dtype} {list(t.shape)}")
    ids = np.frombuffer(t.data, dtype=dtype.newbyteorder("<")).astype(np.int64)
    vocab = runner.vocab_size
    if (ids < 0).any() or (ids >= vocab).any():
        raise InputError(f"token ids must lie in 0..{vocab - 1}")
    block = runner.block_size
    if item.kind == "forward":
        new, temperature, seed = 1, 0.0, 0
    else:
        g = item.generation
        new = g.max_new_tokens if g is not None and g.max_new_tokens is not None else runner.max_new_tokens
        temperature = g.temperature if g is not None else 0.0
        seed = g.seed if g is not None and g.seed is not None else default_seed(item.job_id, item.request_id)
    if new > block - 1:
        raise InputError(f"max_new_tokens {new} is more than the {block - 1} this model can generate")
    if ids.size + new > block:
        raise InputError(f"a prompt of {ids.size} tokens plus {new} new tokens exceeds the model's "
                         f"context of {block} tokens")
    return Prompt(ids, new, float(temperature), int(seed), item.kind == "forward", _tau(item))


def _tau(item: BatchItem) -> float:
    """The request's optional ``tau`` input (float32 [1], advertised in the runner's specs; any one
    float is taken), NaN when it names none."""
    t = item.inputs.get("tau")
    if t is None:
        return float("nan")
    dtype = np.dtype(t.dtype)
    if dtype.kind != "f" or len(t.data) != dtype.itemsize:
        raise InputError(f"'tau' must be one float; got {t.dtype} {list(t.shape)}")
    tau = float(np.frombuffer(t.data, dtype=dtype.newbyteorder("<"))[0])
    if not 0.0 <= tau <= 1.0:
        raise InputError(f"'tau' must lie in 0..1, got {tau}")
    return tau


def pack(prompts: Sequence[Prompt], pad_id: int) -> dict[str, np.ndarray]:
    """The runner's inputs for ``prompts``: right-aligned, left-padded tokens and per-row settings."""
    width = max(p.tokens.size for p in prompts)
    tokens = np.full((len(prompts), width), pad_id, dtype=np.int64)
    for i, p in enumerate(prompts):
        tokens[i, width - p.tokens.size:] = p.tokens
    return {
        "tokens": tokens,
        "max_new_tokens": np.array([p.new for p in prompts], dtype=np.int64),
        "temperature": np.array([p.temperature for p in prompts], dtype=np.float64),
        "seed": np.array([p.seed for p in prompts], dtype=np.uint64),
        "tau": np.array([p.tau for p in prompts], dtype=np.float64),
    }
