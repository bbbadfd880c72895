from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from adaserve.broker.errors import ModelNotFound
from adaserve.models import datasets


def test_official_split() -> None:
    train, test = datasets.load_fsdd("train"), datasets.load_fsdd("test")
    assert len(train.labels) == 2700 and len(test.labels) == 300
    assert test.takes.max() == 4 and train.takes.min() == 5
    assert test.audio.shape[1:] == (1, 32, 32) and test.audio.dtype == np.float32
    assert 0.0 <= test.audio.min() and test.audio.max() <= 1.0
    assert np.bincount(test.labels).tolist() == [30] * 10
    assert len(np.unique(test.speakers)) == 6


def test_bad_split() -> None:
    with pytest.raises(ValueError, match="split"):
        datasets.load_fsdd("validation")


def test_image_pools_are_disjoint() -> None:
    train, _ = datasets.digit_pool("train")
    test, _ = datasets.digit_pool("test")
    flat_train = {bytes(x.tobytes()) for x in train}
    # The sklearn digits contain a few exact duplicates; nearly all test images must be unseen.
    unseen = np.mean([x.tobytes() not in flat_train for x in test])
    assert unseen > 0.99
    assert len(train) + len(test) == 1797


def test_av_pairs_match_labels_and_are_fixed() -> None:
    a, b = datasets.load_av_digits("test"), datasets.load_av_digits("test")
    assert np.array_equal(a.image, b.image)
    assert a.image.shape == (300, 1, 8, 8)
    clean, labels = datasets.digit_pool("test")
    # Each noisy image is closest (on average) to clean images of its own label.
    centroids = np.stack([clean[labels == d].mean(axis=0) for d in range(10)])
    dist = ((a.image[:, 0, None] - centroids[None]) ** 2).sum(axis=(2, 3))
    assert np.mean(dist.argmin(axis=1) == a.labels) > 0.5


@pytest.mark.parametrize("model,keys", [("fsdd-cnn", {"audio"}), ("ee-audio", {"audio"}),
                                        ("av-digits", {"audio", "image"})])
def test_sample_inputs(model: str, keys: set[str]) -> None:
    rows, labels = datasets.sample_inputs(model, 20, seed=3)
    again, labels2 = datasets.sample_inputs(model, 20, seed=3)
    assert len(rows) == 20 and labels.shape == (20,)
    assert set(rows[0]) == keys
    assert rows[0]["audio"].shape == (1, 32, 32)
    assert all(np.array_equal(r["audio"], q["audio"]) for r, q in zip(rows, again))
    assert np.array_equal(labels, labels2)
    other, _ = datasets.sample_inputs(model, 20, seed=4)
    assert not all(np.array_equal(r["audio"], q["audio"]) for r, q in zip(rows, other))


def test_sample_inputs_without_replacement_then_with() -> None:
    rows, _ = datasets.sample_inputs("fsdd-cnn", 300, seed=0)
    assert len({r["audio"].tobytes() for r in rows}) == 300
    rows, _ = datasets.sample_inputs("fsdd-cnn", 500, seed=0)
    assert len(rows) == 500


def test_sample_inputs_errors() -> None:
    with pytest.raises(ModelNotFound):
        datasets.sample_inputs("nope", 3, seed=0)
    with pytest.raises(ValueError):
        datasets.sample_inputs("fsdd-cnn", 0, seed=0)


def test_no_torch_or_onnxruntime_import() -> None:
    code = ("import sys, adaserve.models.datasets as d; d.sample_inputs('av-digits', 2, seed=0); "
            "print('torch' in sys.modules or 'onnxruntime' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_effnet_samples_are_real_photos_with_imagenet_labels() -> None:
    inputs, labels = datasets.sample_inputs("effnet-lite0", 6, seed=0)
    assert len(inputs) == 6 and inputs[0]["image"].shape == (3, 224, 224)
    assert inputs[0]["image"].dtype == np.float32 and labels.dtype == np.int64
    assert all(0 <= int(v) < 1000 for v in labels)


def test_the_split_gpt_gets_fixed_windows_of_held_out_text() -> None:
    inputs, labels = datasets.sample_inputs("ee-lm-s-split", 5, seed=0)
    assert [x["tokens"].shape for x in inputs] == [(32,)] * 5 and inputs[0]["tokens"].dtype == np.int64
    assert labels.shape == (5,)


def test_language_models_get_held_out_prompts_of_varied_length() -> None:
    from adaserve.models.lm.corpus import load_corpus

    inputs, labels = datasets.sample_inputs("ee-lm-xs", 50, seed=3)
    lengths = [x["tokens"].size for x in inputs]
    lo, hi = datasets.PROMPT_LENGTHS
    assert min(lengths) >= lo and max(lengths) <= hi and len(set(lengths)) > 5
    assert all(x["tokens"].dtype == np.int64 and x["tokens"].ndim == 1 for x in inputs)
    val = load_corpus().val
    text = val.tobytes()
    for x, nxt in zip(inputs[:10], labels[:10]):  # each prompt is held-out text, its label what follows
        assert np.append(x["tokens"], nxt).astype(val.dtype).tobytes() in text
    again, _ = datasets.sample_inputs("ee-lm-xs", 50, seed=3)
    assert all((a["tokens"] == b["tokens"]).all() for a, b in zip(inputs, again))
