"""LmRunner: reads only the first k layers, greedy generation with padding, per-token confidences."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from adaserve.broker.errors import InvalidMessage
from adaserve.models.lm.gpt import EarlyExitGpt, GptConfig
from adaserve.models.lm.prompts import pad_prompts
from adaserve.models.lm.weights import depth_artifacts, save_layers
from adaserve.models.manifest import InputSpec, ModelInfo, VariantInfo
from adaserve.workers.runtime.lm import LmRunner

LAYERS = 3
CHARS = tuple("abcdefghij \n")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lm")
    config = GptConfig(vocab_size=len(CHARS), block_size=32, n_layer=LAYERS, n_embd=16, n_head=2)
    model = EarlyExitGpt(config)
    model.init_weights(torch.Generator().manual_seed(3))
    with torch.no_grad():  # sharpen the random heads so greedy choices are not near-ties
        for p in model.parameters():
            p.mul_(20.0)
    save_layers(model, out, CHARS)
    return out


def _info() -> ModelInfo:
    variants = [VariantInfo(name=f"depth{k}", kind="lm-exit", artifacts=depth_artifacts(k),
                            inputs={"tokens": InputSpec(shape=(8,), dtype="int64")},
                            metric="perplexity", extra={"depth": k, "max_new_tokens": 5, "pad_id": -1})
                for k in range(1, LAYERS + 1)]
    return ModelInfo(name="toy-lm", family="ee-lm", task="text-generation", description="toy",
                     labels=list(CHARS), default_variant=f"depth{LAYERS}", variants=variants,
                     train={}, versions={}, source="random weights")


def _runner(model_dir: Path, k: int) -> LmRunner:
    info = _info()
    return LmRunner(model_dir, info, info.variant(f"depth{k}"), "cpu")


def test_loads_only_the_first_k_layers(model_dir: Path) -> None:
    runners = [_runner(model_dir, k) for k in range(1, LAYERS + 1)]
    for k, r in enumerate(runners, start=1):
        assert r.loaded_files == depth_artifacts(k)
        assert f"block{k + 1}.safetensors" not in r.loaded_files
        assert len(r.net.blocks) == k
    params = [r.parameters for r in runners]
    per_block = params[1] - params[0]
    assert per_block > 0
    assert params[2] - params[1] == per_block  # memory grows by exactly one block per depth
    assert runners[0].weight_bytes < runners[-1].weight_bytes


def test_missing_deeper_files_do_not_matter(model_dir: Path, tmp_path: Path) -> None:
    for name in depth_artifacts(1):
        (tmp_path / name).write_bytes((model_dir / name).read_bytes())
    r = _runner(tmp_path, 1)
    assert r.run({"tokens": np.zeros((1, 8), np.int64)}).outputs["tokens"].shape == (1, 5)
    with pytest.raises(Exception, match="block2"):
        _runner(tmp_path, 2)


def _reference_greedy(r: LmRunner, prompt: np.ndarray, n: int) -> list[int]:
    seq = torch.from_numpy(prompt.astype(np.int64))[None]
    out = []
    with torch.no_grad():
        for _ in range(n):
            nxt = r.net.train_logits(seq)[-1][:, -1].argmax(-1)
            out.append(int(nxt))
            seq = torch.cat([seq, nxt[None]], dim=1)
    return out


def test_greedy_generation_matches_full_recompute_and_ignores_padding(model_dir: Path) -> None:
    r = _runner(model_dir, 2)
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, len(CHARS), size=n) for n in (8, 3, 6)]
    out = r.run({"tokens": pad_prompts(prompts, 8)})
    ids, conf = out.outputs["tokens"], out.outputs["confidence"]
    assert ids.shape == conf.shape == (3, 5) and ids.dtype == np.int64
    for i, p in enumerate(prompts):
        assert ids[i].tolist() == _reference_greedy(r, p, 5)
    assert ((conf > 0) & (conf <= 1)).all()
    np.testing.assert_allclose(out.confidences, conf.mean(axis=1), rtol=1e-6)
    assert out.exits.tolist() == [2, 2, 2]
    assert out.request_exec_s.shape == (3,)


def test_max_new_tokens_per_request(model_dir: Path) -> None:
    r = _runner(model_dir, 1)
    tokens = np.ones((3, 8), np.int64)
    out = r.run({"tokens": tokens, "max_new_tokens": np.array([0, 2, 7])})
    ids, conf = out.outputs["tokens"], out.outputs["confidence"]
    assert ids.shape == (3, 7)
    assert (ids[0] == -1).all() and np.isnan(conf[0]).all() and np.isnan(out.confidences[0])
    assert (ids[1, 2:] == -1).all() and (ids[1, :2] >= 0).all()
    assert (ids[2] >= 0).all()


@pytest.mark.parametrize("tokens", [
    np.full((1, 8), -1, np.int64),                   # nothing but padding
    np.array([[0, 1, 2, 3, 4, 5, 6, 99]]),           # id outside the vocabulary
    np.zeros((8,), np.int64),                        # no batch axis
    np.zeros((1, 8), np.float32),                    # not token ids
])
def test_bad_prompts_are_rejected(model_dir: Path, tokens: np.ndarray) -> None:
    with pytest.raises(InvalidMessage):
        _runner(model_dir, 1).run({"tokens": tokens})


def test_perplexity_of_a_sequence(model_dir: Path) -> None:
    r = _runner(model_dir, 3)
    ppl, n = r.perplexity(np.arange(200) % len(CHARS))
    assert n == (199 // 32) * 32 and ppl > 1.0


def test_a_long_prompt_and_a_long_generation_share_a_batch(model_dir: Path) -> None:
    r = _runner(model_dir, 2)  # block_size 32: 28 + 4 and 2 + 29 both fit, 28 + 29 would not
    rng = np.random.default_rng(1)
    long, short = rng.integers(0, len(CHARS), 28), rng.integers(0, len(CHARS), 2)
    out = r.run({"tokens": pad_prompts([long, short], 28), "max_new_tokens": np.array([4, 29])})
    ids = out.outputs["tokens"]
    assert ids[0, :4].tolist() == _reference_greedy(r, long, 4)
    assert ids[1].tolist() == _reference_greedy(r, short, 29)


def test_sampling_depends_on_the_request_seed_only(model_dir: Path) -> None:
    r = _runner(model_dir, 1)
    rng = np.random.default_rng(2)
    p, q = rng.integers(0, len(CHARS), 6), rng.integers(0, len(CHARS), 3)

    def sample(prompts: list[np.ndarray], temps: list[float], seeds: list[int]) -> np.ndarray:
        return r.run({"tokens": pad_prompts(prompts, 6), "max_new_tokens": np.full(len(prompts), 12),
                      "temperature": np.array(temps), "seed": np.array(seeds)}).outputs["tokens"]

    alone = sample([p], [50.0], [5])[0]
    beside = sample([q, p], [0.0, 50.0], [9, 5])
    assert alone.tolist() == beside[1].tolist()  # same seed, same tokens, whatever the batch-mates
    assert beside[0].tolist() == _reference_greedy(r, q, 12)  # temperature 0 stays greedy
    assert sample([p], [50.0], [6])[0].tolist() != alone.tolist()
    with pytest.raises(InvalidMessage, match="temperature"):
        sample([p], [-1.0], [5])


def _all_exits(r: LmRunner, seq: torch.Tensor) -> list[torch.Tensor]:
    with torch.no_grad():
        return [lg[0, -1] for lg in r.net.train_logits(seq)]


def test_exit_at_tau_names_the_first_confident_exit_of_each_token(model_dir: Path) -> None:
    r = _runner(model_dir, 3)
    prompt = np.array([1, 4, 2, 7, 0, 3])
    seq = torch.from_numpy(prompt)[None]
    confs = []
    for tok in r.run({"tokens": prompt[None], "max_new_tokens": np.array([5])}).outputs["tokens"][0]:
        confs.append([float(torch.softmax(lg, -1).max()) for lg in _all_exits(r, seq)])
        seq = torch.cat([seq, torch.tensor([[int(tok)]])], dim=1)
    tau = float(np.median(confs))  # some tokens confident early, some late or never
    out = r.run({"tokens": prompt[None], "max_new_tokens": np.array([5]), "tau": np.float32(tau)})
    want = [next((k + 1 for k, c in enumerate(row) if c >= tau), 0) for row in confs]
    assert out.outputs["exit_at_tau"][0].tolist() == want
    assert out.exits.tolist() == [3]  # the result's exit is the loaded depth
    with pytest.raises(InvalidMessage, match="tau"):
        r.run({"tokens": prompt[None], "tau": np.array([1.5])})


def test_prompt_ppl_is_the_prompts_own_perplexity_at_the_loaded_depth(model_dir: Path) -> None:
    r = _runner(model_dir, 2)
    prompts = [np.array([1, 4, 2, 7, 0, 3, 5, 9]), np.array([2, 2, 3]), np.array([6])]
    got = r.run({"tokens": pad_prompts(prompts, 8), "max_new_tokens": np.array([2, 2, 2])}).outputs["prompt_ppl"]
    for p, ppl in zip(prompts[:2], got):
        with torch.no_grad():
            logp = torch.log_softmax(r.net.train_logits(torch.from_numpy(p)[None])[-1][0, :-1], -1)
        nll = -logp.gather(-1, torch.from_numpy(p[1:])[:, None]).mean()
        assert ppl == pytest.approx(float(nll.exp()), rel=1e-4)
    assert np.isnan(got[2])  # one token: nothing to score


def _early_info() -> ModelInfo:
    info = _info()
    early = VariantInfo(name="early-exit", kind="lm-exit", artifacts=depth_artifacts(LAYERS),
                        inputs={"tokens": InputSpec(shape=(8,), dtype="int64")},
                        extra={"depth": LAYERS, "max_new_tokens": 5, "pad_id": -1, "early_exit": True})
    return info.model_copy(update={"variants": [*info.variants, early]})


def test_early_exit_at_the_extremes_equals_the_fixed_depths(tmp_path: Path) -> None:
    config = GptConfig(vocab_size=len(CHARS), block_size=32, n_layer=LAYERS, n_embd=16, n_head=2)
    model = EarlyExitGpt(config)
    model.init_weights(torch.Generator().manual_seed(4))  # not sharpened: no exit is ever sure
    save_layers(model, tmp_path, CHARS)
    model_dir = tmp_path
    info = _early_info()
    early = LmRunner(model_dir, info, info.variant("early-exit"), "cpu")
    feed = {"tokens": pad_prompts([np.array([1, 4, 2, 7, 0, 3]), np.array([5, 9])], 6),
            "max_new_tokens": np.array([6, 6])}
    first = early.run({**feed, "tau": np.float32(0.0)})  # every token leaves at the first exit
    assert first.outputs["tokens"].tolist() == _runner(model_dir, 1).run(feed).outputs["tokens"].tolist()
    assert (first.outputs["exits"] == 1).all() and first.exits.tolist() == [LAYERS, LAYERS]
    last = early.run({**feed, "tau": np.float32(1.0)})  # (almost) never confident: the last exit
    deep = _runner(model_dir, LAYERS).run(feed).outputs["tokens"]
    assert (last.outputs["exits"] == LAYERS).all() and (last.outputs["exit_at_tau"] == 0).all()
    assert last.outputs["tokens"].tolist() == deep.tolist()


def test_early_exit_tokens_leave_at_their_first_confident_exit(model_dir: Path) -> None:
    info = _early_info()
    early = LmRunner(model_dir, info, info.variant("early-exit"), "cpu")
    prompts = pad_prompts([np.array([1, 4, 2, 7, 0, 3]), np.array([5, 9]), np.array([3, 3, 8])], 6)
    confs = _runner(model_dir, 3).run({"tokens": prompts, "max_new_tokens": np.full(3, 8)}).outputs["confidence"]
    tau = float(np.quantile(confs, 0.4))
    out = early.run({"tokens": prompts, "max_new_tokens": np.full(3, 8), "tau": np.float64(tau)})
    left, hit = out.outputs["exits"], out.outputs["exit_at_tau"]
    assert left.shape == hit.shape == (3, 8)
    assert np.array_equal(left, np.where(hit > 0, hit, LAYERS))  # first confident exit, else the last
    assert 1 < len(np.unique(left))  # a real mix of exits at this tau
    conf = out.outputs["confidence"]
    assert (conf[hit > 0] >= tau - 1e-6).all()  # a token that left early was confident there
