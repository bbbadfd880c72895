"""The lm family: the two corpora and their shared vocabulary, per-layer files, tiny builds, and the
shipped checkpoints' exits on each task."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rich.progress import Progress

from adaserve.models import lm
from adaserve.models.lm.corpus import SHARED_VOCAB, TASKS, VAL_FRACTION, Vocab, load_corpus, load_task
from adaserve.models.lm.prompts import pad_prompts, sample_prompts
from adaserve.models.lm.train import exit_weights
from adaserve.models.lm.weights import depth_artifacts
from adaserve.models.manifest import read_manifest, verify_hashes
from adaserve.models.registry import zoo_dir
from adaserve.workers.runtime.lm import LmRunner

ZOO = zoo_dir()


def test_corpus_is_tiny_shakespeare_split_90_10() -> None:
    c = load_corpus()
    assert c.vocab == SHARED_VOCAB and c.vocab.size == 97
    assert len(c.train) + len(c.val) == 1_115_394
    assert len(c.val) == pytest.approx(VAL_FRACTION * 1_115_394, abs=1)
    assert c.vocab.decode(c.train[:14]) == "First Citizen:"


def test_python_corpus_is_stdlib_source_in_the_shared_vocabulary() -> None:
    c = load_task("python")
    assert len(c.train) + len(c.val) == 1_100_000 and len(c.val) == 110_000
    head = c.vocab.decode(c.train[:20_000])
    assert "def " in head and "import " in head
    assert SHARED_VOCAB.chars[:3] == ("\t", "\n", " ") and SHARED_VOCAB.chars[-1] == "~"
    assert set(TASKS) == {"shakespeare", "python"}


def test_vocab_round_trip_and_unknown_characters() -> None:
    v = Vocab.from_text("hello world")
    assert v.decode(v.encode("low hole")) == "low hole"
    with pytest.raises(ValueError, match="'z'"):
        v.encode("z")


def test_prompts_are_right_aligned_and_left_padded() -> None:
    out = pad_prompts([np.array([1, 2, 3]), np.arange(10)], 5)
    assert out.tolist() == [[-1, -1, 1, 2, 3], [5, 6, 7, 8, 9]]
    tokens, nxt = sample_prompts(4, 16, seed=0)
    assert tokens.shape == (4, 16) and nxt.shape == (4,) and tokens.dtype == np.int64
    assert np.array_equal(tokens, sample_prompts(4, 16, seed=0)[0])


def test_exit_loss_weights() -> None:
    assert exit_weights((1, 2), False) == [0.5, 0.5]
    assert exit_weights((1, 2, 3, 4), True) == [0.1, 0.2, 0.3, 0.4]


def test_tiny_build_writes_one_file_per_layer(tmp_path: Path) -> None:
    with Progress(disable=True) as progress:
        info = lm.build_xs(tmp_path, tiny=True, seed=0, progress=progress)
    assert info.name == "ee-lm-xs" and info.train["tiny"] is True and info.family == "lm"
    assert [v.name for v in info.variants] == ["depth1", "depth2", "early-exit"]
    for k, v in enumerate(info.variants[:2], start=1):
        assert v.kind == "lm-exit" and v.extra["depth"] == k and v.metric == "perplexity"
        assert v.artifacts == depth_artifacts(k)
        assert 1.0 < v.quality < 97.0  # better than uniform over the 97 characters
        assert set(v.extra["perplexity"]) == {"shakespeare", "python"} and v.extra["tau"] == 0.8
    early = info.variants[-1]
    assert early.kind == "lm-exit" and early.extra == {**early.extra, "depth": 2, "early_exit": True}
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["block1.safetensors", "block2.safetensors", "config.json",
                     "embeddings.safetensors", "exit1.safetensors", "exit2.safetensors"]
    assert verify_hashes(tmp_path, info) == []
    assert tuple(info.labels) == SHARED_VOCAB.chars


def test_tiny_code_build_has_an_exit_every_two_layers(tmp_path: Path) -> None:
    with Progress(disable=True) as progress:
        info = lm.build_code(tmp_path, tiny=True, seed=0, progress=progress)
    assert [v.name for v in info.variants] == ["depth2", "depth4", "depth6", "depth8", "early-exit"]
    assert info.variant("depth4").artifacts == [
        "config.json", "embeddings.safetensors", *(f"block{i}.safetensors" for i in range(1, 5)),
        "exit2.safetensors", "exit4.safetensors"]
    assert info.train["exits"] == [2, 4, 6, 8] and info.train["main_task"] == "python"
    assert verify_hashes(tmp_path, info) == []


def test_tiny_builds_are_reproducible(tmp_path: Path) -> None:
    with Progress(disable=True) as progress:
        a = lm.build_s(tmp_path / "a", tiny=True, seed=0, progress=progress)
        b = lm.build_s(tmp_path / "b", tiny=True, seed=0, progress=progress)
    assert a.hashes == b.hashes


@pytest.mark.parametrize("name", ["ee-lm-xs", "ee-lm-s", "ee-lm-code"])
def test_shipped_checkpoint_improves_with_depth(name: str) -> None:
    """The deepest exit predicts held-out text better than the first (perplexity, lower is better)."""
    model_dir = ZOO / name
    if not (model_dir / "manifest.json").is_file():
        pytest.skip(f"{name} is not shipped in this checkout")
    info = read_manifest(model_dir)
    assert verify_hashes(model_dir, info) == []
    assert not info.train["tiny"]
    assert info.family == "lm" and tuple(info.labels) == SHARED_VOCAB.chars
    first, last = info.variants[0], info.variant(info.default_variant)
    assert last.quality < first.quality
    held_out = load_task(info.train["main_task"]).val[:6000]
    ppl = {v.name: LmRunner(model_dir, info, v, "cpu").perplexity(held_out)[0] for v in (first, last)}
    assert ppl[last.name] < ppl[first.name]
    assert ppl[last.name] < 10.0


def _shipped(name: str) -> dict[str, dict[str, float]]:
    model_dir = ZOO / name
    if not (model_dir / "manifest.json").is_file():
        pytest.skip(f"{name} is not shipped in this checkout")
    return {v.name: v.extra["perplexity"] for v in read_manifest(model_dir).variants if "perplexity" in v.extra}


def test_each_task_has_its_own_best_model_at_equal_depth() -> None:
    """At depth 4 (four blocks per token: 128 wide in ee-lm-s, 96 in ee-lm-code), ee-lm-s is the
    better Shakespeare model and ee-lm-code the better Python model: which candidate suits a prompt
    depends on its task."""
    s, code = _shipped("ee-lm-s")["depth4"], _shipped("ee-lm-code")["depth4"]
    assert s["shakespeare"] < code["shakespeare"]
    assert code["python"] < s["python"]


def test_the_per_token_block_path_equals_the_module_path() -> None:
    """``Block.step`` / ``kv_step`` (functional, 2-D, no mask without padding) are the serving
    path's per-token block; they must give exactly what ``forward`` / ``kv_only`` give."""
    import torch

    from adaserve.models.lm.gpt import EarlyExitGpt, GptConfig

    net = EarlyExitGpt(GptConfig(vocab_size=11, block_size=16, n_layer=1, n_embd=16, n_head=2))
    net.init_weights(torch.Generator().manual_seed(3))
    block = net.blocks[0]
    gen = torch.Generator().manual_seed(4)
    cache = (torch.randn(3, 2, 5, 8, generator=gen), torch.randn(3, 2, 5, 8, generator=gen))
    x = torch.randn(3, 16, generator=gen)
    valid = torch.ones(3, 6, dtype=torch.bool)
    valid[0, :2] = False  # a padded row: the mask path
    with torch.no_grad():
        for mask in (None, valid[:, None, None, :]):
            want, (wk, wv) = block(x[:, None, :], torch.ones(3, 1, 1, 6, dtype=torch.bool) if mask is None else mask,
                                   cache)
            got, (gk, gv) = block.step(x, mask, cache)
            assert torch.equal(got, want[:, 0]) and torch.equal(gk, wk) and torch.equal(gv, wv)
        _, (wk, wv) = block.kv_only(x[:, None, :], cache)
        _, (gk, gv) = block.kv_step(x, cache)
        assert torch.allclose(gk, wk, atol=1e-6) and torch.allclose(gv, wv, atol=1e-6)
