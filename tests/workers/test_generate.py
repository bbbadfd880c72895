"""Generation batches: each prompt checked alone, prompts of any length packed into one run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adaserve.broker import ServerClock, Tensor
from adaserve.broker.messages import Batch, BatchItem, Generation, Plan
from adaserve.models.lm.prompts import pad_prompts
from adaserve.workers import Executor, RunnerCache
from adaserve.workers.generate import default_seed, pack, prompt_of
from adaserve.workers.inputs import InputError
from adaserve.workers.runtime import GenerativeRunner, RunOutput, load_runner
from adaserve.workers.runtime.lm import LmRunner

LM = "ee-lm-xs"


class Spy(LmRunner):
    """The real runner (its loaded state shared, not loaded again), counting its calls."""

    def __init__(self, runner: LmRunner) -> None:
        self.__dict__.update(vars(runner))
        self.calls: list[dict[str, np.ndarray]] = []

    def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
        self.calls.append(inputs)
        return super().run(inputs)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return load_runner(LM, "default", "cpu", tmp_path_factory.mktemp("lm"))


def _item(tokens: np.ndarray, rid: str = "r", kind: str = "generate", new: int | None = None,
          temperature: float = 0.0) -> BatchItem:
    plain = kind == "forward" or (new is None and not temperature)
    gen = None if plain else Generation(max_new_tokens=new, temperature=temperature)
    return BatchItem(job_id="j", request_id=rid, app="a", reply_to="c", inputs={"tokens": Tensor.from_numpy(tokens)},
                     submitted_ms=0.0, deadline_ms=1e12, kind=kind, generation=gen)


def test_the_lm_runner_is_a_generator_and_advertises_its_limits(runner: Any) -> None:
    assert isinstance(runner, GenerativeRunner)
    assert runner.specs["tokens"].shape == (-1,)
    assert runner.input_limits["tokens"] == {"max_length": 63, "context": 64, "max_new_tokens": 63,
                                             "default_new_tokens": 16, "vocab_size": 97, "pad_id": -1}


def test_a_prompt_takes_its_request_settings(runner: Any) -> None:
    p = prompt_of(_item(np.array([[5, 6, 7]]), new=9, temperature=0.5), runner)  # a kept batch axis of one
    assert p.tokens.tolist() == [5, 6, 7] and (p.new, p.temperature, p.forward) == (9, 0.5, False)
    assert p.seed == default_seed("j", "r") == prompt_of(_item(np.array([1]), new=2, temperature=0.5), runner).seed
    assert prompt_of(_item(np.array([1, 2], np.int32)), runner).new == 16  # the model's default
    assert prompt_of(_item(np.array([1]), kind="forward"), runner).new == 1


@pytest.mark.parametrize(("tokens", "new", "says"), [
    (np.array([1.0, 2.0]), None, "integer ids of one prompt"),
    (np.zeros((2, 3), np.int64), None, "integer ids of one prompt"),
    (np.zeros(0, np.int64), None, "integer ids of one prompt"),
    (np.array([1, 97]), None, "token ids must lie in 0..96"),
    (np.array([-1, 3]), None, "token ids must lie in 0..96"),
    (np.ones(50, np.int64), None, "50 tokens plus 16 new tokens exceeds the model's context of 64"),
    (np.ones(2, np.int64), 64, "max_new_tokens 64 is more than the 63"),
])
def test_a_prompt_that_does_not_fit_says_why(runner: Any, tokens: np.ndarray, new: int | None, says: str) -> None:
    with pytest.raises(InputError, match=says.replace(".", r"\.")):
        prompt_of(_item(tokens, new=new), runner)


def test_missing_tokens_are_an_input_error(runner: Any) -> None:
    item = _item(np.ones(2, np.int64)).model_copy(update={"inputs": {"audio": Tensor.from_numpy(np.ones(2))}})
    with pytest.raises(InputError, match="missing input 'tokens'"):
        prompt_of(item, runner)


def test_pack_right_aligns_and_pads(runner: Any) -> None:
    prompts = [prompt_of(_item(np.array(t), new=n), runner) for t, n in (([1, 2, 3], 4), ([7], 2))]
    feed = pack(prompts, -1)
    assert feed["tokens"].tolist() == [[1, 2, 3], [-1, -1, 7]]
    assert feed["max_new_tokens"].tolist() == [4, 2] and feed["seed"].dtype == np.uint64


def test_one_run_for_the_batch_and_a_bad_prompt_fails_alone(runner: Any) -> None:
    spy = Spy(runner)
    executor = Executor(RunnerCache(lambda *a: spy, device="cpu", data_dir=Path(".")), ServerClock())
    rng = np.random.default_rng(0)
    long_prompt = rng.integers(0, 65, 60)
    rows = [(rng.integers(0, 65, 5), 40, "generate"), (np.array([3, 99]), 4, "generate"),
            (long_prompt, 4, "generate"), (np.ones(50, np.int64), 20, "generate"), (rng.integers(0, 65, 9), None, "forward")]
    items = [_item(t, f"r{i}", kind, n) for i, (t, n, kind) in enumerate(rows)]
    out = executor.run(Batch(id="b", model=LM, plan=Plan(), items=items, dispatched_ms=0.0))
    assert [i.status for i in out.items] == ["completed", "failed", "completed", "failed", "completed"]
    assert "token ids must lie in 0..96" in out.items[1].reason
    assert "50 tokens plus 20 new tokens" in out.items[3].reason
    (call,) = spy.calls  # a 60-token prompt and a 40-token generation share one run
    assert call["tokens"].shape == (3, 60) and call["max_new_tokens"].tolist() == [40, 4, 1]
    for i in (0, 2):
        tokens, n = rows[i][0], rows[i][1]
        alone = runner.run({"tokens": pad_prompts([tokens], len(tokens)), "max_new_tokens": np.array([n])})
        got = out.items[i]
        assert got.outputs["tokens"].to_numpy().tolist() == alone.outputs["tokens"][0].tolist()
        assert got.exit == 2 and got.prediction is None
        assert got.confidence == pytest.approx(float(alone.confidences[0]), rel=1e-4)
    fwd = out.items[4]
    assert fwd.prediction == fwd.outputs["tokens"].to_numpy()[0] and fwd.outputs["tokens"].shape == [1]


def test_a_request_may_carry_its_own_tau(runner: Any) -> None:
    assert runner.specs["tau"].shape == (1,) and runner.specs["tau"].dtype == "float32"
    item = _item(np.array([5, 6, 7]), new=4)
    plain = prompt_of(item, runner)
    assert np.isnan(plain.tau)
    own = item.model_copy(update={"inputs": {**item.inputs, "tau": Tensor.from_numpy(np.array([0.3], np.float32))}})
    assert prompt_of(own, runner).tau == pytest.approx(0.3)
    feed = pack([plain, prompt_of(own, runner)], -1)
    out = runner.run(feed)
    hit = out.outputs["exit_at_tau"]
    assert hit.shape == (2, 4) and set(np.unique(hit)) <= {0, 1, 2}
    bad = item.model_copy(update={"inputs": {**item.inputs, "tau": Tensor.from_numpy(np.array([1.5], np.float32))}})
    with pytest.raises(InputError, match="tau"):
        prompt_of(bad, runner)
