from __future__ import annotations

import numpy as np
import pytest

from adaserve.models.data.logmel import LogMelConfig, log_mel, mel_filterbank


def tone(freq: float, seconds: float, cfg: LogMelConfig = LogMelConfig()) -> np.ndarray:
    t = np.arange(int(seconds * cfg.sample_rate)) / cfg.sample_rate
    return (np.sin(2 * np.pi * freq * t) * 8000).astype(np.int16)


def test_shape_dtype_and_range() -> None:
    cfg = LogMelConfig()
    out = log_mel(tone(440.0, 0.4))
    assert out.shape == (cfg.n_mels, cfg.frames)
    assert out.dtype == np.uint8
    assert out.max() == 255  # the peak is 0 dB relative to itself


def test_a_higher_tone_lands_in_a_higher_band() -> None:
    low = log_mel(tone(300.0, 1.5)).astype(float).mean(axis=1).argmax()
    high = log_mel(tone(2500.0, 1.5)).astype(float).mean(axis=1).argmax()
    assert high > low


def test_short_recordings_are_centred_in_silence() -> None:
    out = log_mel(tone(800.0, 0.2)).astype(float)
    energy = out.mean(axis=0)
    assert energy[len(energy) // 2] > energy[0] and energy[len(energy) // 2] > energy[-1]


def test_filterbank_covers_the_spectrum() -> None:
    bank = mel_filterbank(LogMelConfig())
    assert bank.shape == (32, 129)
    assert (bank.sum(axis=1) > 0).all()


def test_stereo_is_refused() -> None:
    with pytest.raises(ValueError):
        log_mel(np.zeros((100, 2), dtype=np.int16))
