"""A language model's vocabulary: its training text's characters, one per token id."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaserve.broker import InvalidMessage
from adaserve.models import Vocabulary
from adaserve.models.lm.corpus import load_corpus


def test_the_vocabulary_of_an_lm_is_its_training_text_characters(tmp_path: Path) -> None:
    vocab = Vocabulary.of("ee-lm-xs", tmp_path)
    assert vocab.chars == load_corpus().vocab.chars
    ids = vocab.encode("ROMEO:\nTo be")
    assert ids.dtype == np.int64 and vocab.decode(ids) == "ROMEO:\nTo be"
    assert vocab.decode(np.array([-1, -1, *ids[:5]])) == "ROMEO"  # padding is skipped


def test_text_the_model_cannot_read_is_refused(tmp_path: Path) -> None:
    vocab = Vocabulary.of("ee-lm-xs", tmp_path)
    with pytest.raises(InvalidMessage, match="'é' is not in the vocabulary of ee-lm-xs"):
        vocab.encode("no café")
    with pytest.raises(InvalidMessage, match="at least one character"):
        vocab.encode("")
    with pytest.raises(InvalidMessage, match="not a language model"):
        Vocabulary.of("fsdd-cnn", tmp_path)
    with pytest.raises(ValueError):
        Vocabulary(["a", "a"])
