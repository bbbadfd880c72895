"""Text in, text out for the character-level language models (``ee-lm-xs``, ``ee-lm-s``).

A prompt travels as its token ids (input ``tokens``, int64 [length]); a tokenizer — the model's
``adaserve.models.Vocabulary``, or anything with the same ``encode``/``decode`` — turns text into
ids and the generated ids of a result back into text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from adaserve.broker.messages import Job, Result


class Tokenizer(Protocol):
    """Text to token ids and back; ``adaserve.models.Vocabulary`` is one."""

    def encode(self, text: str) -> np.ndarray: ...

    def decode(self, ids: np.ndarray | Sequence[int]) -> str: ...


def generation_job(
    model: str, prompts: Sequence[str], deadline_ms: float, *, vocab: Tokenizer,
    max_new_tokens: int | None = None, temperature: float = 0.0, seed: int | None = None, **job: Any,
) -> Job:
    """A job of one ``generate`` request per text prompt; ``job`` takes ``make_job``'s options."""
    from adaserve.producers.jobs import make_job

    generation: dict[str, Any] = {"max_new_tokens": max_new_tokens, "temperature": temperature, "seed": seed}
    return make_job(model, [{"tokens": vocab.encode(p)} for p in prompts], deadline_ms, kind="generate",
                    generation=generation, **job)


def completion(result: Result, vocab: Tokenizer) -> str:
    """The text a completed generation result holds ("" for a request that did not complete)."""
    tokens = result.outputs.get("tokens")
    return vocab.decode(tokens.to_numpy()) if result.status == "completed" and tokens is not None else ""
