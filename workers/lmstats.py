"""A language model's per-request token figures for ``batch.finished`` (HELIOS's PHT, see
``planner/helios/pht.py``): read from the request's own outputs, so the planner learns what
each candidate did without reading any reply stream."""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

TAU = 0.8  # the runners' default threshold, for outputs that carry no ``exit_at_tau``


class _Row(Protocol):
    def to_numpy(self) -> np.ndarray: ...


def lm_stats(outputs: dict[str, Any], depth: int | None) -> dict[str, Any] | None:
    """``{"tokens", "breaches", "exits", "prompt_ppl"}`` of one request, or None for a request that
    generated nothing. ``exits[k]`` counts tokens whose first exit confident at tau is ``k`` (0:
    none up to the loaded depth, a breach); without ``exit_at_tau`` (a runner that reads only the
    loaded exit) a token is a breach when its confidence is below tau, and ``exits`` is empty."""
    conf_row = outputs.get("confidence")
    if conf_row is None:
        return None
    conf = np.asarray(conf_row.to_numpy(), dtype=np.float64).reshape(-1)
    conf = conf[np.isfinite(conf)]
    if conf.size == 0:
        return None
    at = outputs.get("exit_at_tau")
    exits: list[int] = []
    if at is not None:
        e = np.asarray(at.to_numpy(), dtype=np.int64).reshape(-1)[:conf.size]
        e = np.clip(e, 0, 1023)
        exits = np.bincount(e, minlength=(depth or int(e.max(initial=0))) + 1).astype(int).tolist()
        breaches = int((e == 0).sum())
    else:
        breaches = int((conf < TAU).sum())
    ppl_row = outputs.get("prompt_ppl")
    ppl = None
    if ppl_row is not None:
        v = float(np.asarray(ppl_row.to_numpy()).reshape(-1)[0])
        ppl = v if math.isfinite(v) else None
    return {"tokens": int(conf.size), "breaches": breaches, "exits": exits, "prompt_ppl": ppl}
