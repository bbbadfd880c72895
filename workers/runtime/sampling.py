"""Temperature sampling of generated tokens, one seeded generator per request.

Each request draws from its own ``numpy`` generator, so the tokens it samples depend only on its
own seed and logits, never on which other requests share its batch (nor on a redelivery).
"""

from __future__ import annotations

import numpy as np
import torch


class Samplers:
    """Replaces the greedy choice of the rows whose temperature is above 0 with a sampled token."""

    def __init__(self, temperature: np.ndarray, seeds: np.ndarray) -> None:
        self.rows = np.flatnonzero(temperature > 0)
        self.temperature = temperature[self.rows].astype(np.float64)[:, None]
        self._rngs = [np.random.default_rng(int(seeds[i])) for i in self.rows]

    @classmethod
    def maybe(cls, temperature: np.ndarray | None, seeds: np.ndarray | None, b: int) -> Samplers | None:
        """Samplers for a batch of ``b`` rows, or None when every row is greedy."""
        if temperature is None or not (temperature > 0).any():
            return None
        return cls(temperature, seeds if seeds is not None else np.zeros(b, np.int64))

    def choose(self, logits: torch.Tensor, greedy: torch.Tensor) -> torch.Tensor:
        """``greedy`` [B] with the sampling rows' tokens drawn from ``softmax(logits / T)``."""
        z = logits[torch.from_numpy(self.rows).to(logits.device)].double().cpu().numpy() / self.temperature
        p = np.exp(z - z.max(axis=1, keepdims=True))
        cdf = np.cumsum(p, axis=1)
        u = np.array([rng.random() for rng in self._rngs]) * cdf[:, -1]
        picks = np.minimum((cdf < u[:, None]).sum(axis=1), p.shape[1] - 1)
        out = greedy.clone()
        out[torch.from_numpy(self.rows).to(out.device)] = torch.from_numpy(picks).to(out.device, out.dtype)
        return out
