"""Text prompts in, text out: generation jobs and completions through any tokenizer."""

from __future__ import annotations

import numpy as np

from adaserve.broker import Tensor
from adaserve.broker.messages import Result, Timings
from adaserve.models import Vocabulary
from adaserve.producers import completion, generation_job


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
