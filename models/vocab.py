"""A character-level language model's vocabulary: its manifest's ``labels``, one character per
token id, turning prompt text into ids and generated ids back into text::

    from adaserve.models import Vocabulary
    from adaserve.producers import completion, generation_job

    vocab = Vocabulary.of("ee-lm-xs")
    job = generation_job("ee-lm-xs", ["ROMEO:\\n", "To be, or"], 5_000, vocab=vocab, max_new_tokens=24)
    res = client.submit(job).result(10)
    print([completion(r, vocab) for r in res.results])

It belongs to the model zoo (it is a model's data); the SDK takes any object with the same
``encode``/``decode`` (``producers.Tokenizer``), so producers never import model code.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from adaserve.broker.errors import InvalidMessage
from adaserve.broker.settings import load_settings
from adaserve.models.registry import load_info


class Vocabulary:
    """Characters by token id."""

    def __init__(self, chars: Sequence[str], *, model: str = "") -> None:
        if not chars or any(len(c) != 1 for c in chars) or len(set(chars)) != len(chars):
            raise ValueError("a vocabulary is a sequence of distinct single characters")
        self.chars = tuple(chars)
        self.model = model
        self._index = {c: i for i, c in enumerate(self.chars)}

    @classmethod
    def of(cls, model: str, data_dir: Path | None = None) -> Vocabulary:
        """The vocabulary of ``model`` as built in ``data_dir`` (default: the settings'), or as shipped."""
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
