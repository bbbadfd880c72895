"""Text prompts in, text out: a language model's vocabulary and generation jobs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaserve.broker import InvalidMessage, Tensor
from adaserve.broker.messages import Result, Timings
from adaserve.models.lm.corpus import load_corpus
from adaserve.producers import Vocabulary, completion, generation_job


def test_the_vocabulary_of_an_lm_is_its_training_text_characters(tmp_path: Path) -> None:
    vocab = Vocabulary.of("ee-lm-xs", tmp_path)
    assert vocab.chars == load_corpus().vocab.chars
    ids = vocab.encode("ROMEO:\nTo be")
    assert ids.dtype == np.int64 and vocab.decode(ids) == "ROMEO:\nTo be"
    assert vocab.decode(np.array([-1, -1, *ids[:5]])) == "ROMEO"  # padding is skipped


def test_text_the_model_cannot_read_is_refused(tmp_path: Path) -> None:
    vocab = Vocabulary.of("ee-lm-xs", tmp_path)
    with pytest.raises(InvalidMessage, match="'#' is not in the vocabulary of ee-lm-xs"):
        vocab.encode("no #hashtags")
    with pytest.raises(InvalidMessage, match="at least one character"):
        vocab.encode("")
    with pytest.raises(InvalidMessage, match="not a language model"):
        Vocabulary.of("fsdd-cnn", tmp_path)
    with pytest.raises(ValueError):
        Vocabulary(["a", "a"])


def test_generation_jobs_carry_the_prompts_and_settings() -> None:
    vocab = Vocabulary(list("abc "))
    job = generation_job("lm", ["ab", "c a"], 500, vocab=vocab, max_new_tokens=5, temperature=0.7, seed=3, app="x")
    assert job.app == "x" and [r.kind for r in job.requests] == ["generate", "generate"]
    assert job.requests[1].inputs["tokens"].to_numpy().tolist() == [2, 3, 0]
    assert job.requests[0].generation.model_dump() == {"max_new_tokens": 5, "temperature": 0.7, "seed": 3}
    defaults = generation_job("lm", ["a"], 500, vocab=vocab).requests[0].generation
    assert defaults is not None and defaults.max_new_tokens is None  # the model's own default


def test_completion_decodes_a_result() -> None:
    vocab = Vocabulary(list("abc "))
    t = Timings(submitted_ms=0, finished_ms=1, total_ms=1)
    done = Result(job_id="j", request_id="r", status="completed", timings=t,
                  outputs={"tokens": Tensor.from_numpy(np.array([0, 3, 1], np.int64))})
    assert completion(done, vocab) == "a b"
    assert completion(done.model_copy(update={"status": "expired"}), vocab) == ""
