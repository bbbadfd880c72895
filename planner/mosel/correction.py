"""How much slower than profiled each modality subset runs on the live worker, learnt from feedback.

The profile is measured offline, one subset at a time, on a quiet machine; the live worker runs
each subset at its own multiple of it (on the 2-core development machine, 3-5x for the video
subset and 11-20x for audio, whose batches are so short that the per-batch cost outside the
model dominates; see docs/mosel.md). One scale for every subset, fed by both, sits between the
two and fits neither, so a plan packed to the deadline with it runs late whenever it leans on
the subset the scale underrates. Here each subset has its own scale, moved toward the ratio of
each of its batches (live time / profiled time of a batch of that size).

Pure: values in, values out. The selector holds one and the live scheduler feeds it.
"""

from __future__ import annotations

from .costs import SubsetCosts
from .strategy import Strategy

# One outlier batch may not move a scale past this range (a stalled or a pre-empted batch).
RATIO_CLIP = (0.1, 100.0)


class SubsetCorrection:
    """Per-subset latency scales over ``costs``; every scale starts at ``start`` (the profile)."""

    def __init__(self, costs: SubsetCosts, learn_rate: float, start: float = 1.0) -> None:
        if not 0.0 < learn_rate <= 1.0:
            raise ValueError("learn_rate must be within (0, 1]")
        self.costs, self.learn_rate = costs, learn_rate
        self.scales = [start] * len(costs.subsets)
        self.batches = [0] * len(costs.subsets)

    def observe(self, subset: str, size: int, actual_s: float) -> None:
        """A batch of ``size`` requests of ``subset`` ran for ``actual_s``."""
        m = self.costs.subsets.index(subset)
        predicted_s = self.costs.run_ms(m, size) / 1e3
        if predicted_s <= 0 or actual_s < 0:
            return
        ratio = min(max(actual_s / predicted_s, RATIO_CLIP[0]), RATIO_CLIP[1])
        # The first batch of a subset replaces the prior outright: the profile's 1.0 is known to be
        # off live, and averaging from it would take a dozen batches to forget.
        rate = 1.0 if not self.batches[m] else self.learn_rate
        self.scales[m] += rate * (ratio - self.scales[m])
        self.batches[m] += 1

    def batch_s(self, m: int, k: int) -> float:
        """Expected seconds of ``k`` requests of subset ``m`` (its cheapest batches)."""
        return self.costs.run_ms(m, k) / 1e3 * self.scales[m]

    def strategy_s(self, s: Strategy) -> float:
        """Expected seconds of a strategy run alone: one run of batches per subset it uses."""
        return sum(self.batch_s(m, k) for m, k in enumerate(s.counts) if k)

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.costs.subsets, self.scales))
