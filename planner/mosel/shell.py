"""The live planner's way to a MOSEL scheduler: I/O the scheduler itself never does.

It finds the model's profile (Redis, ``<data_dir>/profiles``, the shipped ones), reads or builds
the strategy matrix cached on disk, and gives the scheduler the monitor thread to run its
re-selection on. Everything here is part of the planner's I/O shell; ``MoselScheduler`` gets
values and a ``Tasks`` object, never a connection, a path or a thread of its own.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from adaserve.broker.errors import ConfigError
from adaserve.broker.profiles import Profile
from adaserve.broker.settings import Settings
from adaserve.planner.core import Scheduler

from .costs import SubsetCosts
from .monitor import Monitor
from .scheduler import MoselScheduler
from .store import build_cached_matrix, cached_matrix, serving_profile

__all__ = ["CORRECTION_ENV", "make_modality_scheduler"]
CORRECTION_ENV = "ADASERVE_MOSEL_CORRECTION"
log = logging.getLogger("adaserve.planner")


def make_modality_scheduler(model: str, profile: Profile | None, policy: str, settings: Settings, *,
                            max_size: int = 32, step: float = 0.01, **opts: Any) -> Scheduler | None:
    """MOSEL's scheduler for ``model`` when a profile with modality subsets is at hand (Redis,
    then ``<data_dir>/profiles``, then the profiles shipped with adaserve), else ``None`` with a
    log line saying why: the model is then served at its default variant by the batching policy.

    The strategy matrix (``max_size`` requests, floors every ``step``) comes from the cache next
    to the profile or under ``<data_dir>/mosel``; when absent it is solved on the monitor thread
    while jobs run at their most accurate subset. ``opts`` go to ``MoselScheduler``.
    """
    for device in ("cpu", "gpu"):
        src = serving_profile(settings, model, profile, device)
        if src is not None:
            break
    else:
        log.info("%s: no profile with modality subsets (in Redis, %s or the shipped ones); served without "
                 "modality selection", model, settings.data_dir / "profiles")
        return None
    cache = settings.data_dir / "mosel"
    matrix = cached_matrix(src, cache, max_size=max_size, step=step, device=device)
    log.info("%s: modality selection (%s) over %s, profile %s", model, policy,
             ", ".join(SubsetCosts.from_profile(src.profile, device).subsets), src.source)

    def build() -> Any:
        return build_cached_matrix(src, cache, max_size=max_size, step=step, device=device)

    # The live bench's before/after switch: "shared" learns one latency scale for every subset.
    mode = os.environ.get(CORRECTION_ENV, "subset")
    if mode not in ("subset", "shared"):
        raise ConfigError(f"{CORRECTION_ENV} must be 'subset' or 'shared', not {mode!r}")
    opts.setdefault("per_subset", mode == "subset")
    try:
        return MoselScheduler(SubsetCosts.from_profile(src.profile, device), matrix, policy, model=model,
                              build=None if matrix is not None else build, tasks=Monitor(f"mosel-monitor-{model}"),
                              **opts)
    except ValueError as exc:
        raise ConfigError(f"bad options for modality policy {policy!r}: {exc}") from exc
