"""Generation requests through the real pipeline: text prompts of different lengths in one batch,
each request's own token budget, text back, the exit depth; too-long prompts rejected at admission."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
import redis

from adaserve.broker import Job, Keys, Request, Settings, Slo, Tensor, decode
from adaserve.broker.events import BatchFinished
from adaserve.broker.messages import Generation
from adaserve.models import Vocabulary
from adaserve.models.lm.prompts import pad_prompts
from adaserve.producers import Client, completion, generation_job, make_job
from adaserve.workers.runtime import load_runner

LM = "ee-lm-xs"
PROMPTS = ["ROMEO:\n", "To be, or not to be", "K", "First Citizen:\nBefore we proceed any further, hear"]
BUDGETS = [12, 3, 20, 7]


def _job(vocab: Vocabulary, prompts: list[str], budgets: list[int | None], kind: str = "generate",
         temperature: float = 0.0, seed: int | None = None) -> Job:
    reqs = [Request(id=f"r{i}", kind=kind, inputs={"tokens": Tensor.from_numpy(vocab.encode(p))},
                    generation=None if kind == "forward" else Generation(max_new_tokens=n, temperature=temperature, seed=seed))
            for i, (p, n) in enumerate(zip(prompts, budgets))]
    return Job(id=f"gen-{uuid.uuid4().hex[:12]}",
               model=LM, reply_to="x", slo=Slo(deadline_ms=30_000), requests=reqs)


def _alone(settings: Settings, vocab: Vocabulary, prompt: str, n: int) -> str:
    """The reference: the runtime on this one prompt, no pipeline, no batch-mates."""
    runner = load_runner(LM, "default", "cpu", settings.data_dir)
    out = runner.run({"tokens": pad_prompts([vocab.encode(prompt)], len(prompt)), "max_new_tokens": np.array([n])})
    return vocab.decode(out.outputs["tokens"][0])


def _batches(r: redis.Redis[bytes], settings: Settings, job_id: str) -> list[BatchFinished]:
    evs = (decode(f[b"m"]) for _, f in r.xrange(Keys(settings.namespace).telemetry))
    return [e for e in evs if isinstance(e, BatchFinished) and any(i.job_id == job_id for i in e.items)]


def test_prompts_of_different_lengths_run_in_one_batch_and_come_back_as_text(
        settings: Settings, r: redis.Redis[bytes], pipeline) -> None:
    vocab = Vocabulary.of(LM, settings.data_dir)
    with pipeline({"cpu": (LM,)}), Client(settings) as c:
        job = _job(vocab, PROMPTS, BUDGETS)
        res = c.submit(job).result(60)
    assert res.ok, res.reasons
    for prompt, n, out in zip(PROMPTS, BUDGETS, res.results):
        tokens, conf = out.outputs["tokens"].to_numpy(), out.outputs["confidence"].to_numpy()
        assert tokens.shape == conf.shape == (n,)  # each request's own budget, no padding
        text = completion(out, vocab)
        assert len(text) == n and text == _alone(settings, vocab, prompt, n)
        assert out.exit == 2 and out.prediction is None  # depth2: the default variant of ee-lm-xs
        assert out.confidence == pytest.approx(float(conf.mean()), rel=1e-5)
        assert ((conf > 0) & (conf <= 1)).all()
    (batch,) = _batches(r, settings, job.id)
    assert batch.size == len(PROMPTS) and batch.variant == "depth2"


def test_a_forward_request_predicts_the_next_character(settings: Settings, pipeline) -> None:
    vocab = Vocabulary.of(LM, settings.data_dir)
    with pipeline({"cpu": (LM,)}), Client(settings) as c:
        res = c.submit(_job(vocab, PROMPTS, [None] * len(PROMPTS), kind="forward")).result(60)
    assert res.ok, res.reasons
    for prompt, out in zip(PROMPTS, res.results):
        assert vocab.decode([out.prediction]) == _alone(settings, vocab, prompt, 1)
        assert out.outputs["tokens"].to_numpy().tolist() == [out.prediction]


def test_sampling_is_seeded_per_request(settings: Settings, pipeline) -> None:
    vocab = Vocabulary.of(LM, settings.data_dir)
    with pipeline({"cpu": (LM,)}), Client(settings) as c:
        alone, mixed, other = (c.submit(j).result(60) for j in (
            _job(vocab, ["ROMEO:\n"], [30], temperature=1.0, seed=7),
            _job(vocab, ["ROMEO:\n", "K"], [30, 5], temperature=1.0, seed=7),
            _job(vocab, ["ROMEO:\n"], [30], temperature=1.0, seed=8)))
    greedy = _alone(settings, vocab, "ROMEO:\n", 30)
    a, m, o = (completion(x.results[0], vocab) for x in (alone, mixed, other))
    assert a == m  # the same seed samples the same text, whatever shares the batch
    assert a != o and a != greedy


def test_admission_rejects_prompts_and_budgets_that_do_not_fit(settings: Settings, pipeline) -> None:
    vocab = Vocabulary.of(LM, settings.data_dir)
    with pipeline({"cpu": (LM, "fsdd-cnn")}), Client(settings) as c:
        cases = {
            "too_long": generation_job(LM, ["a" * 64], 30_000, vocab=vocab),
            "no_room": generation_job(LM, ["a" * 40], 30_000, vocab=vocab, max_new_tokens=30),
            "too_many": generation_job(LM, ["abc"], 30_000, vocab=vocab, max_new_tokens=100),
            "bad_ids": make_job(LM, [{"tokens": np.array([1, 2, 99], np.int64)}], 30_000, kind="generate"),
            "not_an_lm": make_job("fsdd-cnn", [{"audio": np.zeros((1, 32, 32), np.float32)}], 30_000, kind="generate"),
        }
        handles = {k: c.submit(j) for k, j in cases.items()}
        ok = c.submit(generation_job(LM, ["a" * 40], 30_000, vocab=vocab, max_new_tokens=24)).result(60)
        reasons = {k: h.result(60).results[0] for k, h in handles.items()}
    assert ok.ok  # 40 + 24 = 64 fits exactly
    assert all(res.status == "rejected" for res in reasons.values()), reasons
    assert "takes 1 to 63" in reasons["too_long"].reason
    assert "40 tokens plus 30 new tokens exceeds the context of 64" in reasons["no_room"].reason
    assert "max_new_tokens 100 is more than the 63" in reasons["too_many"].reason
    assert "token ids must lie in 0..96" in reasons["bad_ids"].reason
    assert reasons["not_an_lm"].reason.startswith("unsupported:")


def test_the_load_generator_sends_held_out_prompts_as_generation_requests(settings: Settings, pipeline) -> None:
    from adaserve.loadgen import load_options, run_load

    opts = load_options(model=LM, rate=40, duration_s=0.5, pattern="constant", deadline_ms=10_000, grace_s=30)
    with pipeline({"cpu": (LM,)}):
        s = run_load(settings, opts, progress=False)
    assert s.submitted == 20 and s.completed == 20, s.reasons
    assert s.generated_tokens == 20 * 16  # the model's default budget per request
    assert s.accuracy is None  # a generation has no single right answer
