"""The batching policies by name: ``make_scheduler("orloj", model=..., profile=...)``.

The live planner and the simulator both build their schedulers here, so a policy compared in
``adaserve sim`` is the object that serves live. A profile (when the model has one) seeds each
policy's latency model and execution-time distribution; without one they start from a cautious
prior and learn from ``observe``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from adaserve.broker.errors import ConfigError
from adaserve.broker.profiles import Profile
from adaserve.planner.config import DEFAULT_APP_RATIO
from adaserve.planner.core import Scheduler
from adaserve.planner.orloj.prior import Prior, prior_from_profile

__all__ = ["POLICIES", "make_scheduler", "orloj_sizes", "serving_options"]
log = logging.getLogger("adaserve.planner")

POLICIES = ("orloj", "fifo", "clipper", "nexus", "clockwork", "edf")

_ORLOJ_DIST = ("window", "reset_s", "nbins", "min_samples")


def _orloj(prior: Prior, opts: dict[str, Any]) -> Scheduler:
    from adaserve.planner.orloj import AppGroups, BatchLatencyFit, ExecDistributions, OrlojScheduler

    dist_kw = {k: opts.pop(k) for k in _ORLOJ_DIST if k in opts}
    ratio = opts.pop("app_ratio", None)
    model = opts.pop("model", "")

    def make() -> OrlojScheduler:
        dists = ExecDistributions.from_histogram(prior.edges_s, prior.counts, **dist_kw)
        fit = BatchLatencyFit(prior.c0, max(prior.c1, 1e-4))
        return OrlojScheduler(distributions=dists, latency=fit, **opts)
    return make() if ratio is None else AppGroups(make, ratio=ratio, model=model)


def _fifo(prior: Prior, opts: dict[str, Any]) -> Scheduler:
    from adaserve.planner.baselines import FifoScheduler

    return FifoScheduler(**opts)


def _clipper(prior: Prior, opts: dict[str, Any]) -> Scheduler:
    from adaserve.planner.baselines import ClipperScheduler

    return ClipperScheduler(**opts)


def _nexus(prior: Prior, opts: dict[str, Any]) -> Scheduler:
    from adaserve.planner.baselines import MeanLatency, NexusScheduler

    return NexusScheduler(MeanLatency(prior), **opts)


def _clockwork(prior: Prior, opts: dict[str, Any]) -> Scheduler:
    from adaserve.planner.baselines import ClockworkScheduler, MeanLatency

    return ClockworkScheduler(MeanLatency(prior), **opts)


def _edf(prior: Prior, opts: dict[str, Any]) -> Scheduler:
    from adaserve.planner.edf import EdfScheduler
    from adaserve.planner.latency import LinearLatency

    return EdfScheduler(LinearLatency(prior.line_c0, max(prior.line_c1, 1e-6), **opts))


_BUILDERS: dict[str, Callable[[Prior, dict[str, Any]], Scheduler]] = {
    "orloj": _orloj, "fifo": _fifo, "clipper": _clipper, "nexus": _nexus, "clockwork": _clockwork, "edf": _edf,
}


def orloj_sizes(max_batch: int) -> tuple[int, ...]:
    """ORLOJ's batch sizes up to ``max_batch``: every size to 16, then every fourth.

    Live, a batch's fixed cost in the pipeline (planning, encoding, two stream hops, the
    finaliser) is ~1 ms against ~0.05 ms per request for a small model, so under overload the
    largest batch is the throughput; a cap of 16 below the planner's ``--max-batch`` lost ORLOJ
    to EDF there. Sizes above 16 are sparse because every size is a row of scores per request.
    """
    if max_batch < 1:
        raise ConfigError(f"max_batch must be positive, got {max_batch}")
    return tuple(range(1, min(max_batch, 16) + 1)) + tuple(range(20, max_batch + 1, 4)) + (
        (max_batch,) if max_batch > 16 and max_batch % 4 else ())


def serving_options(policy: str, max_batch: int, app_ratio: float = DEFAULT_APP_RATIO) -> dict[str, Any]:
    """The options the live planner (and the simulator standing in for it) gives ``policy``:
    ORLOJ's sizes up to ``max_batch``, its tables rebuilt at most once a second (a rebuild
    holds the planner's loop for ~12 ms), and apps whose requests cost more than ``app_ratio``
    times each other's batched apart (``orloj.groups``; 0: never; with one app, or apps that
    cost alike, it is the plain ORLOJ)."""
    if policy != "orloj":
        return {}
    opts: dict[str, Any] = {"sizes": orloj_sizes(max_batch), "min_refresh_s": 1.0}
    if app_ratio:
        opts["app_ratio"] = app_ratio
    return opts


def make_scheduler(policy: str, *, model: str, profile: Profile | None = None, **opts: Any) -> Scheduler:
    """A fresh scheduler of ``policy`` for ``model``.

    ``variant`` and ``device`` pick which part of the profile to read; every other option goes to
    the policy's constructor (e.g. ``sizes`` and ``b`` for ORLOJ, ``batch`` for FIFO,
    ``action_window_s`` for Clockwork). Unknown policies or options raise ``ConfigError``.
    """
    builder = _BUILDERS.get(policy)
    if builder is None:
        raise ConfigError(f"unknown policy {policy!r} (choose from {', '.join(POLICIES)})")
    if profile is not None and profile.model != model:
        raise ConfigError(f"profile is for model {profile.model!r}, not {model!r}")
    variant, device = opts.pop("variant", None), opts.pop("device", None)
    try:
        prior = prior_from_profile(profile, variant=variant, device=device)
        # ORLOJ's app groups name the model in the events they publish
        return builder(prior, {**opts, "model": model} if "app_ratio" in opts else dict(opts))
    except TypeError as exc:
        raise ConfigError(f"bad options for policy {policy!r}: {exc}") from exc
    except ValueError as exc:
        raise ConfigError(f"bad options for policy {policy!r}: {exc}") from exc
