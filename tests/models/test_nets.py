from __future__ import annotations

import numpy as np
import torch

from adaserve.models.nets import audio_encoder, conv_block, shift_audio


def test_conv_block_halves_each_side() -> None:
    assert conv_block(1, 4)(torch.zeros(2, 1, 8, 8)).shape == (2, 4, 4, 4)


def test_audio_encoder_embeds() -> None:
    assert audio_encoder((4, 8), 16)(torch.zeros(3, 1, 32, 32)).shape == (3, 16)


def test_shift_audio_rolls_time_only() -> None:
    audio = np.random.default_rng(0).random((5, 1, 4, 10)).astype(np.float32)
    out = shift_audio({"audio": audio, "other": np.arange(5)}, np.random.default_rng(1))
    assert out["audio"].shape == audio.shape and list(out["other"]) == list(range(5))
    # Each row is a roll of the original along the last axis, band sums unchanged.
    assert np.allclose(out["audio"].sum(axis=-1), audio.sum(axis=-1), atol=1e-5)
    assert not np.array_equal(out["audio"], audio)
