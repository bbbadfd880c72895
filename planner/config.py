"""The planner's settings (validated at construction) and how it builds a scheduler per model."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass

from adaserve.broker.errors import ConfigError
from adaserve.broker.profiles import Profile
from adaserve.broker.settings import Settings
from adaserve.planner.core import Scheduler
from adaserve.planner.placement import parse_splits

PLACEMENTS = ("static", "heft")
# ms of batches queued at a worker beyond the one it runs (``pools.slot_limit``). Eight slots beat
# four for the small models at overload (docs/orloj.md, "Ninth session"): seven 3.5 ms batches of
# 32 (ee-audio's, fsdd-cnn's), so their workers keep every slot; a language model's 20-30 ms
# batches get two or three.
DEFAULT_QUEUE_MS = 25.0
# ORLOJ batches apart the apps whose requests cost more than this many times each other's
# (planner/orloj/groups.py); 0: every app in one batch (the paper's Sec. 4.3).
DEFAULT_APP_RATIO = 3.0
SchedulerFactory = Callable[[str, "Profile | None"], Scheduler]


@dataclass(frozen=True)
class PlannerConfig:
    policy: str = "orloj"
    max_batch: int = 32
    read_count: int = 256
    name: str = ""
    # Operator-chosen split placements, "model=first_pool:second_pool" (see planner/placement.py).
    split: tuple[str, ...] = ()
    # MOSEL's policy for models whose profile has modality subsets (planner/mosel/scheduler.py).
    modality: str = "optimized"
    # ORLOJ's long-term feedback (planner/orloj/feed.py): auto = while an rq profiler worker runs.
    online_feedback: str = "auto"
    # Admission control (planner/overload.py): refuse a job the queue cannot serve by its deadline,
    # and bound each model's queue (requests; 0: no fixed bound).
    admission: bool = True
    max_queue: int = 0
    # Batches a pool holds (planner/pools.py: slot_limit): ms of its recent batches queued beyond
    # the running one per worker; 0: every slot.
    queue_ms: float = DEFAULT_QUEUE_MS
    # StarONNX placement (planner/heft): "static" (the pool with a free slot, --split as given) or
    # "heft" (per batch, earliest finish from performance histories); histories seeded from a
    # `bench gpu --json` report; pools' device kinds beyond the default (gpu* -> gpu, else cpu).
    placement: str = "static"
    heft_profile: str = ""
    pool_kind: tuple[str, ...] = ()
    app_ratio: float = DEFAULT_APP_RATIO

    def __post_init__(self) -> None:
        # Imported here: the policy modules pull in the schedulers, which a config need not load.
        from adaserve.planner.mosel.selector import MODALITY_POLICIES
        from adaserve.planner.orloj.feed import MODES
        from adaserve.planner.policies import POLICIES

        if self.policy not in POLICIES:
            raise ConfigError(f"unknown policy {self.policy!r}; choose one of {', '.join(POLICIES)}")
        if self.modality not in MODALITY_POLICIES:
            raise ConfigError(f"unknown modality policy {self.modality!r}; "
                              f"choose one of {', '.join(MODALITY_POLICIES)}")
        if self.online_feedback not in MODES:
            raise ConfigError(f"unknown online feedback mode {self.online_feedback!r}; choose one of {', '.join(MODES)}")
        if not 1 <= self.max_batch <= 1024:
            raise ConfigError(f"max_batch must be within 1..1024, got {self.max_batch}")
        if not 1 <= self.read_count <= 100_000:
            raise ConfigError(f"read_count must be within 1..100000, got {self.read_count}")
        if self.max_queue < 0:
            raise ConfigError(f"max_queue must be >= 0 (0: no bound), got {self.max_queue}")
        if not 0.0 <= self.queue_ms <= 10_000.0:
            raise ConfigError(f"queue_ms must be within 0..10000 (0: every slot), got {self.queue_ms}")
        if not (self.app_ratio == 0.0 or 1.0 < self.app_ratio <= 1000.0):
            raise ConfigError(f"app_ratio must be 0 (off) or within 1..1000 (above 1), got {self.app_ratio}")
        parse_splits(tuple(self.split))  # a bad --split stops the planner here, with a clear error
        if self.placement not in PLACEMENTS:
            raise ConfigError(f"unknown placement {self.placement!r}; choose one of {', '.join(PLACEMENTS)}")
        from adaserve.planner.heft.live import parse_kinds

        parse_kinds(tuple(self.pool_kind))
        if self.heft_profile and not os.path.isfile(self.heft_profile):
            raise ConfigError(f"heft profile {self.heft_profile!r} is not a file (a `bench gpu --json` report)")

    def consumer(self) -> str:
        return self.name or f"planner-{socket.gethostname()}-{os.getpid()}"


def default_factory(policy: str, modality: str = "optimized", settings: Settings | None = None, *,
                    max_batch: int = 32, app_ratio: float = DEFAULT_APP_RATIO) -> SchedulerFactory:
    """Schedulers by model: MOSEL (``modality`` policy) for a model whose profile has modality
    subsets (the stored one, else a profile file, see ``serving_profile``), ``policy`` otherwise,
    with the batch sizes the planner's ``max_batch`` allows and ORLOJ's ``app_ratio``."""
    from adaserve.planner.mosel.shell import make_modality_scheduler
    from adaserve.planner.policies import POLICIES, make_scheduler, serving_options

    if policy not in POLICIES:
        raise ConfigError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")

    def make(model: str, profile: Profile | None) -> Scheduler:
        if settings is not None:
            sched = make_modality_scheduler(model, profile, modality, settings)
            if sched is not None:
                return sched
        return make_scheduler(policy, model=model, profile=profile, **serving_options(policy, max_batch, app_ratio))

    return make
