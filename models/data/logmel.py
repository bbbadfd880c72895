"""Log-mel spectrograms of 8 kHz speech in numpy/scipy, quantised to one byte per value.

The features are fixed-size images (``n_mels`` x ``frames``) so that a CNN can take a batch of
them; a recording longer than the window keeps its loudest stretch, a shorter one is centred in
silence. Values are dB relative to the recording's own peak, clipped at ``-floor_db``, which
removes loudness differences between speakers and makes byte quantisation lossless enough
(``floor_db / 255`` dB steps).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.signal import get_window


@dataclass(frozen=True)
class LogMelConfig:
    sample_rate: int = 8000
    n_fft: int = 256
    hop: int = 192
    n_mels: int = 32
    frames: int = 32
    floor_db: float = 80.0

    @property
    def window_samples(self) -> int:
        return self.n_fft + self.hop * (self.frames - 1)


def _hz_to_mel(f: np.ndarray) -> np.ndarray:
    return 2595.0 * np.log10(1.0 + f / 700.0)


def _mel_to_hz(m: np.ndarray) -> np.ndarray:
    return 700.0 * (10.0 ** (m / 2595.0) - 1.0)


def mel_filterbank(cfg: LogMelConfig) -> np.ndarray:
    """Triangular filters on the HTK mel scale, shape ``(n_mels, n_fft // 2 + 1)``."""
    n_bins = cfg.n_fft // 2 + 1
    freqs = np.linspace(0.0, cfg.sample_rate / 2, n_bins)
    edges = _mel_to_hz(np.linspace(0.0, _hz_to_mel(np.array(cfg.sample_rate / 2)), cfg.n_mels + 2))
    bank = np.zeros((cfg.n_mels, n_bins))
    for m in range(cfg.n_mels):
        lo, mid, hi = edges[m], edges[m + 1], edges[m + 2]
        rising = (freqs - lo) / (mid - lo)
        falling = (hi - freqs) / (hi - mid)
        bank[m] = np.clip(np.minimum(rising, falling), 0.0, None)
    return bank


def _fit_window(x: np.ndarray, n: int) -> np.ndarray:
    if len(x) >= n:
        # Keep the loudest stretch: long recordings are mostly leading or trailing silence.
        energy = np.concatenate([[0.0], np.cumsum(x.astype(np.float64) ** 2)])
        start = int(np.argmax(energy[n:] - energy[:-n]))
        return x[start:start + n]
    pad = n - len(x)
    return np.pad(x, (pad // 2, pad - pad // 2))


def log_mel(samples: np.ndarray, cfg: LogMelConfig = LogMelConfig()) -> np.ndarray:
    """Quantised log-mel of one mono recording: ``uint8`` array of shape ``(n_mels, frames)``."""
    if samples.ndim != 1:
        raise ValueError(f"expected mono samples, got shape {samples.shape}")
    x = samples.astype(np.float64)
    if samples.dtype == np.int16:
        x /= 32768.0
    x = _fit_window(x, cfg.window_samples)
    window = get_window("hann", cfg.n_fft)
    idx = np.arange(cfg.n_fft)[None, :] + cfg.hop * np.arange(cfg.frames)[:, None]
    spectrum = np.abs(np.fft.rfft(x[idx] * window, axis=1)) ** 2
    mel = mel_filterbank(cfg) @ spectrum.T
    db = 10.0 * np.log10(np.maximum(mel, 1e-12))
    db = np.clip(db - db.max(), -cfg.floor_db, 0.0)
    return np.round((db + cfg.floor_db) * (255.0 / cfg.floor_db)).astype(np.uint8)
