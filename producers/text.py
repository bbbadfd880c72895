"""Text in, text out for the character-level language models (``ee-lm-xs``, ``ee-lm-s``).

A prompt travels as its token ids (input ``tokens``, int64 [length]); a model's vocabulary (the
``labels`` of its manifest, one character per id) turns text into ids and the generated ids of a
result back into text::

    vocab = Vocabulary.of("ee-lm-xs")
    job = generation_job("ee-lm-xs", ["ROMEO:\\n", "To be, or"], 5_000, vocab=vocab, max_new_tokens=24)
    res = client.submit(job).result(10)
    print([completion(r, vocab) for r in res.results])
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adaserve.broker.errors import InvalidMessage
from adaserve.broker.messages import Job, Result


class Vocabulary:
    """Characters by token id."""

    def __init__(self, chars: Sequence[str], *, model: str = "") -> None:
        if not chars or any(len(c) != 1 for c in chars) or len(set(chars)) != len(chars):
            raise ValueError("a vocabulary is a sequence of distinct single characters")
        self.chars = tuple(chars)
        self.model = model
        self._index = {c: i for i, c in enumerate(self.chars)}

    @classmethod
    def of(cls, model: str, data_dir: Path | None = None) -> "Vocabulary":
        """The vocabulary of ``model`` as built in ``data_dir`` (default: the settings'), or as shipped."""
        from adaserve.broker.settings import load_settings
        from adaserve.models.registry import load_info

        _, info = load_info(model, data_dir if data_dir is not None else load_settings().data_dir)
        if not info.labels or info.task != "text-generation":
            raise InvalidMessage("unsupported", f"model {model!r} is not a language model with a vocabulary")
        return cls(info.labels, model=model)

    def encode(self, text: str) -> np.ndarray:
        """Token ids (int64) of ``text``; ``InvalidMessage`` naming a character the model lacks."""
        if not text:
            raise InvalidMessage("schema", "a prompt needs at least one character")
        try:
            return np.fromiter((self._index[c] for c in text), dtype=np.int64, count=len(text))
        except KeyError as exc:
            where = f" of {self.model}" if self.model else ""
            raise InvalidMessage("schema", f"character {exc.args[0]!r} is not in the vocabulary{where}") from None

    def decode(self, ids: np.ndarray | Sequence[int]) -> str:
        """Text of ``ids``; padding (ids outside the vocabulary, -1) is skipped."""
        n = len(self.chars)
        return "".join(self.chars[int(i)] for i in np.asarray(ids).ravel() if 0 <= int(i) < n)


def generation_job(
    model: str, prompts: Sequence[str], deadline_ms: float, *, vocab: Vocabulary,
    max_new_tokens: int | None = None, temperature: float = 0.0, seed: int | None = None, **job: Any,
) -> Job:
    """A job of one ``generate`` request per text prompt; ``job`` takes ``make_job``'s options."""
    from adaserve.producers.jobs import make_job

    generation: dict[str, Any] = {"max_new_tokens": max_new_tokens, "temperature": temperature, "seed": seed}
    return make_job(model, [{"tokens": vocab.encode(p)} for p in prompts], deadline_ms, kind="generate",
                    generation=generation, **job)


def completion(result: Result, vocab: Vocabulary) -> str:
    """The text a completed generation result holds ("" for a request that did not complete)."""
    tokens = result.outputs.get("tokens")
    return vocab.decode(tokens.to_numpy()) if result.status == "completed" and tokens is not None else ""
