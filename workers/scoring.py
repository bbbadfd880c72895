"""A plan's scoring passes (``Plan.score``): other models read the prompts a batch served.

HELIOS compares its candidates on the same prompts: after a generation batch has run, each model
the plan names reads the batch's first ``rows`` prompts in one prefill at its own variant's depth
(``LmRunner.score``), and each prompt's perplexity under it rides on that request's ``lm``
figures in ``batch.finished``. Only the prompt is read, not the answer: a model's confidence on
another model's tokens is not what it is on its own, and the perplexity needs the prompt alone.
A scoring pass is best effort: a model this worker cannot load or that cannot score is skipped,
and an error in it never fails the batch, whose answers are already made.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from adaserve.broker.errors import InvalidMessage, ModelLoadError, ModelNotFound
from adaserve.broker.messages import ScoreWith
from adaserve.workers.generate import Prompt, pack
from adaserve.workers.runners import RunnerCache

log = logging.getLogger(__name__)


class _Scorer(Protocol):
    pad_id: int
    depth: int

    def score(self, tokens: np.ndarray) -> np.ndarray: ...


def score_prompts(runners: RunnerCache, plan: Sequence[ScoreWith], prompts: Sequence[Prompt], idx: Sequence[int],
                  items: Sequence[Any]) -> None:
    """Add each scoring pass's perplexities to ``items`` (the outcomes, ``idx[j]`` the one of
    ``prompts[j]``): ``item.scored`` gets ``(model, depth, perplexity)`` per pass."""
    for want in plan:
        rows = min(want.rows, len(prompts))
        try:
            runner = runners.loaded(want.model, want.variant).generator
            if runner is None or not hasattr(runner, "score"):
                continue
            scorer: _Scorer = runner  # type: ignore[assignment]
            ppl = scorer.score(pack(prompts[:rows], scorer.pad_id)["tokens"])
        except (ModelNotFound, ModelLoadError, InvalidMessage, ValueError, RuntimeError) as exc:
            log.warning("scoring pass %s/%s skipped: %s", want.model, want.variant, exc)
            continue
        for j in range(rows):
            item = items[idx[j]]
            if item is None or item.status != "completed":
                continue
            v = float(ppl[j])
            item.scored = (*item.scored, (want.model, int(scorer.depth), v if math.isfinite(v) else None))
