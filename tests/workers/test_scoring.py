"""A plan's scoring passes on the shipped lm models: another model reads the prompts a batch
served, its perplexities ride on each request's outcome, and nothing about it can fail a batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaserve.broker.messages import ScoreWith
from adaserve.models.lm.corpus import SHARED_VOCAB
from adaserve.models.lm.prompts import drifting_prompts, pad_prompts
from adaserve.workers.execute import ItemOutcome
from adaserve.workers.generate import Prompt
from adaserve.workers.runners import RunnerCache
from adaserve.workers.runtime import load_runner
from adaserve.workers.runtime.lm import LmRunner
from adaserve.workers.scoring import score_prompts

DATA = Path("/nonexistent")  # the shipped zoo only


@pytest.fixture(scope="module")
def prompts() -> list[np.ndarray]:
    stream = drifting_prompts(40, seed=3)
    return [np.asarray(SHARED_VOCAB.encode(p), np.int64) for _, p in stream[::10]]


def test_a_scoring_pass_reads_what_the_same_depth_reports_when_it_serves(prompts: list[np.ndarray]) -> None:
    runner = load_runner("ee-lm-code", "depth2", "cpu", DATA, threads=1)
    assert isinstance(runner, LmRunner)
    tokens = pad_prompts(prompts, max(len(p) for p in prompts))
    served = runner.run({"tokens": tokens}).outputs["prompt_ppl"]
    scored = runner.score(tokens)
    assert scored.shape == (len(prompts),) and np.allclose(scored, served, rtol=1e-4)
    # another depth of the same model reads them differently (the pass runs at its own depth)
    whole = load_runner("ee-lm-code", "depth8", "cpu", DATA, threads=1)
    assert not np.allclose(whole.score(tokens), scored, rtol=1e-3)  # type: ignore[attr-defined]


def test_passes_fill_the_first_rows_and_skip_what_cannot_score(prompts: list[np.ndarray]) -> None:
    cache = RunnerCache(load_runner, device="cpu", data_dir=DATA, threads=1)
    batch = [Prompt(p, 16, 0.0, 0, False) for p in prompts]
    items: list[ItemOutcome | None] = [ItemOutcome("completed"), None, ItemOutcome("failed", "x"),
                                       ItemOutcome("completed"), ItemOutcome("completed")]
    idx = [0, 2, 3, 4]  # item 1 never reached the runner
    plan = (ScoreWith(model="ee-lm-s", variant="depth2", rows=3), ScoreWith(model="no-such-model", variant="depth2",
                                                                           rows=4))
    score_prompts(cache, plan, batch[:4], idx, items)
    got = [it.scored if it is not None else None for it in items]
    assert got[1] is None and got[2] == () and got[4] == ()  # a failed request, and row 4 is past rows=3
    for it in (items[0], items[3]):
        assert it is not None and len(it.scored) == 1
        model, depth, ppl = it.scored[0]
        assert (model, depth) == ("ee-lm-s", 2) and ppl is not None and ppl > 1.0
