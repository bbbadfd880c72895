from __future__ import annotations

import numpy as np

from adaserve.workers.execute import WireRow
from adaserve.workers.lmstats import lm_stats


def row(a: np.ndarray) -> WireRow:
    return WireRow(str(a.dtype), list(a.shape), a.tobytes())


def test_exits_at_tau_make_a_histogram_and_breaches() -> None:
    out = {"confidence": row(np.array([0.9, 0.5, 0.95, 0.3], np.float32)),
           "exit_at_tau": row(np.array([1, 0, 2, 0], np.int64)), "prompt_ppl": row(np.array([4.5], np.float32))}
    assert lm_stats(out, 2) == {"tokens": 4, "breaches": 2, "exits": [2, 1, 1], "prompt_ppl": 4.5}


def test_without_exit_figures_a_breach_is_low_confidence_at_the_loaded_exit() -> None:
    out = {"confidence": row(np.array([0.9, 0.5, 0.85], np.float32))}
    assert lm_stats(out, 4) == {"tokens": 3, "breaches": 1, "exits": [], "prompt_ppl": None}
    assert lm_stats({"confidence": row(np.zeros(0, np.float32))}, 4) is None
    assert lm_stats({}, 4) is None
