"""A modality selection strategy: how many of a job's requests use each modality subset."""

from __future__ import annotations

from dataclasses import dataclass

# Accuracy sums are compared with this slack so that an exact tie (a floor equal to a subset's
# accuracy) is not lost to float rounding; every guard and test uses the same value.
ACC_TOL = 1e-9


@dataclass(frozen=True, slots=True)
class Strategy:
    """Counts per subset (aligned with ``subsets``), the predicted latency and the job's accuracy.

    ``latency_s`` is the time to run the whole job alone on one worker: one run of batches per
    subset, back to back. ``accuracy`` is the effective accuracy, the mean of the requests'
    subset accuracies.
    """

    subsets: tuple[str, ...]
    counts: tuple[int, ...]
    latency_s: float
    accuracy: float

    @property
    def size(self) -> int:
        return sum(self.counts)

    def by_subset(self) -> dict[str, int]:
        """Counts keyed by subset name, subsets with no request left out."""
        return {s: k for s, k in zip(self.subsets, self.counts) if k}

    def label(self) -> str:
        """Compact text for events and logs, e.g. ``audio+image:12,image:4``."""
        return ",".join(f"{s}:{k}" for s, k in self.by_subset().items()) or "empty"

    def meets(self, floor: float) -> bool:
        return self.accuracy >= floor - ACC_TOL

    def assign(self, request_ids: list[str]) -> dict[str, str]:
        """Map request ids to subsets: the first ``counts[0]`` to ``subsets[0]``, and so on.

        Which request gets which subset does not change the job's expected accuracy (it is the
        mean of per-subset accuracies), so a stable order keeps plans reproducible.
        """
        if len(request_ids) != self.size:
            raise ValueError(f"strategy covers {self.size} requests, job has {len(request_ids)}")
        out: dict[str, str] = {}
        it = iter(request_ids)
        for subset, k in zip(self.subsets, self.counts):
            for _ in range(k):
                out[next(it)] = subset
        return out
