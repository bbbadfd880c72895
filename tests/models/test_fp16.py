"""The float16 check of an intermediate tensor: figures always, ``ok`` only when both thresholds hold."""

from __future__ import annotations

import numpy as np

from adaserve.models.fp16 import fp16_check


def test_a_part_that_tolerates_rounding_passes() -> None:
    rng = np.random.default_rng(0)
    w = rng.normal(size=(16, 5)).astype(np.float32)
    mid = rng.normal(size=(40, 16)).astype(np.float32)
    r = fp16_check(lambda m: m @ w, mid, mid @ w)
    assert r["ok"] and r["top1_agreement"] == 1.0 and 0 < r["max_abs_diff_logits"] < 1e-2
    assert r["samples"] == 40


def test_a_part_that_amplifies_rounding_fails() -> None:
    mid = np.array([[1.0, 1.0001], [2.0, 2.0002]], np.float32)  # float16 rounds both columns alike
    r = fp16_check(lambda m: (m - m[:, :1]) * 1e4, mid, (mid - mid[:, :1]) * 1e4)
    assert not r["ok"] and r["top1_agreement"] < 1.0 and r["max_abs_diff_probs"] > 0.01
