"""Where to cut a model in two (StarONNX, Sec. 5.1): the tail that offloads 5-15 % of the GPU's time.

The rule is pure: it takes per-unit times in topological order (a unit is an ONNX node or a block
of them) and, per candidate cut, the bytes of the tensor that crosses it (per sample). A cut ``k``
puts units ``0..k-1`` in part 1 and the rest in part 2, the part the CPU may take.

Tie-breaks, in order (docs/staronnx-models.md says the same):

1. Cuts whose tail share lies in the band (``low <= share <= high``, both inclusive) win over the
   rest; among them the smallest crossing tensor wins, then the share nearest the band's middle,
   then the earlier cut.
2. With no cut in the band, the cut nearest the band wins (distance of the share to the band), then
   the smallest crossing tensor, then the earlier cut; ``in_band`` is then False.

Cuts where no single tensor crosses (``crossing_bytes`` None) are never candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

BAND = (0.05, 0.15)


@dataclass(frozen=True)
class Candidate:
    cut: int               # units in part 1
    tail_share: float      # part 2's share of the total time
    crossing_bytes: int    # per sample, of the one tensor part 1 hands to part 2


@dataclass(frozen=True)
class SplitChoice:
    cut: int
    tail_share: float
    crossing_bytes: int
    in_band: bool
    candidates: tuple[Candidate, ...] = field(repr=False)


def choose_split(times: Sequence[float], crossing_bytes: Sequence[int | None],
                 band: tuple[float, float] = BAND) -> SplitChoice:
    """The cut of the rule above; ``crossing_bytes[k]`` is the tensor crossing cut ``k`` (index 0 unused).

    ``ValueError`` when the inputs do not line up, a time is negative, all times are zero or no cut
    has a single crossing tensor.
    """
    n = len(times)
    if len(crossing_bytes) != n:
        raise ValueError(f"{n} unit times but {len(crossing_bytes)} crossing sizes (one per cut 0..n-1)")
    low, high = band
    if not 0.0 <= low <= high < 1.0:
        raise ValueError(f"the band must satisfy 0 <= low <= high < 1, got {band}")
    if any(t < 0 for t in times):
        raise ValueError("unit times must be >= 0")
    total = float(sum(times))
    if total <= 0:
        raise ValueError("the unit times sum to zero: nothing to share")
    candidates: list[Candidate] = []
    tail = total
    for k in range(1, n):
        tail -= times[k - 1]
        size = crossing_bytes[k]
        if size is not None:
            candidates.append(Candidate(k, max(tail, 0.0) / total, int(size)))
    if not candidates:
        raise ValueError("no cut has a single crossing tensor")
    mid = (low + high) / 2

    def distance(c: Candidate) -> float:
        return max(low - c.tail_share, c.tail_share - high, 0.0)

    inside = [c for c in candidates if distance(c) == 0.0]
    if inside:
        best = min(inside, key=lambda c: (c.crossing_bytes, abs(c.tail_share - mid), c.cut))
    else:
        best = min(candidates, key=lambda c: (distance(c), c.crossing_bytes, c.cut))
    return SplitChoice(best.cut, best.tail_share, best.crossing_bytes, bool(inside), tuple(candidates))

