"""Whether a split model's intermediate tensor may travel as float16 (half the bytes on the wire).

The check runs part 2 on the float16-rounded intermediate of held-out inputs and compares with
part 2 on the float32 one: the largest difference of the softmax probabilities and the share of
inputs whose top-1 class stays the same. Both figures are stored in the part's manifest entry
(``extra["fp16_ok"]``) whatever the verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

MAX_PROB_DIFF = 1e-2   # on probabilities, which are bounded, unlike logits
MIN_TOP1_AGREEMENT = 1.0


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max(axis=-1, keepdims=True))
    return np.asarray(z / z.sum(axis=-1, keepdims=True))


def fp16_check(part2: Callable[[np.ndarray], np.ndarray], mid: np.ndarray, ref_logits: np.ndarray) -> dict[str, Any]:
    """``part2`` on ``mid`` rounded to float16 against ``ref_logits`` (part 2 on the float32 ``mid``)."""
    half = part2(mid.astype(np.float16).astype(np.float32))
    p_half, p_ref = _softmax(half), _softmax(ref_logits)
    prob_diff = float(np.abs(p_half - p_ref).max())
    agree = float((half.argmax(-1) == ref_logits.argmax(-1)).mean())
    return {"ok": bool(prob_diff <= MAX_PROB_DIFF and agree >= MIN_TOP1_AGREEMENT),
            "max_abs_diff_logits": round(float(np.abs(half - ref_logits).max()), 6),
            "max_abs_diff_probs": round(prob_diff, 6), "top1_agreement": round(agree, 4),
            "samples": len(mid), "max_prob_diff_allowed": MAX_PROB_DIFF,
            "min_top1_agreement": MIN_TOP1_AGREEMENT}
