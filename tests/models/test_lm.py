"""ee-lm: corpus, per-layer files, a tiny build, and the shipped checkpoints' exits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rich.progress import Progress

from adaserve.models import lm
from adaserve.models.lm.corpus import VAL_FRACTION, Vocab, load_corpus
from adaserve.models.lm.prompts import pad_prompts, sample_prompts
from adaserve.models.lm.train import exit_weights
from adaserve.models.lm.weights import depth_artifacts
from adaserve.models.manifest import read_manifest, verify_hashes
from adaserve.models.registry import zoo_dir
from adaserve.workers.runtime.lm import LmRunner

ZOO = zoo_dir()


def test_corpus_is_tiny_shakespeare_split_90_10() -> None:
    c = load_corpus()
    assert c.vocab.size == 65
    assert len(c.train) + len(c.val) == 1_115_394
    assert len(c.val) == pytest.approx(VAL_FRACTION * 1_115_394, abs=1)
    assert c.vocab.decode(c.train[:14]) == "First Citizen:"


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
    assert info.name == "ee-lm-xs" and info.train["tiny"] is True
    assert [v.name for v in info.variants] == ["depth1", "depth2"]
    for k, v in enumerate(info.variants, start=1):
        assert v.kind == "lm-exit" and v.extra["depth"] == k and v.metric == "perplexity"
        assert v.artifacts == depth_artifacts(k)
        assert 1.0 < v.quality < 65.0  # better than uniform over the 65 characters
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["block1.safetensors", "block2.safetensors", "config.json",
                     "embeddings.safetensors", "exit1.safetensors", "exit2.safetensors"]
    assert verify_hashes(tmp_path, info) == []
    assert len(info.labels) == 65


@pytest.mark.parametrize("name", ["ee-lm-xs", "ee-lm-s"])
def test_shipped_checkpoint_improves_with_depth(name: str) -> None:
    """The deepest exit predicts held-out text better than the first (perplexity, lower is better)."""
    model_dir = ZOO / name
    if not (model_dir / "manifest.json").is_file():
        pytest.skip(f"{name} is not shipped in this checkout")
    info = read_manifest(model_dir)
    assert verify_hashes(model_dir, info) == []
    assert not info.train["tiny"]
    first, last = info.variants[0], info.variants[-1]
    assert last.quality < first.quality
    held_out = load_corpus().val[:6000]
    ppl = {v.name: LmRunner(model_dir, info, v, "cpu").perplexity(held_out)[0] for v in (first, last)}
    assert ppl[last.name] < ppl[first.name]
    assert ppl[last.name] < 10.0
