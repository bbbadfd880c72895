"""The planner: per-model schedulers (pure, driven by ``(state, now)``) behind a thin Redis loop.

``Planner(settings, PlannerConfig(policy="orloj")).run(stop_event)`` serves in-process; the
``adaserve planner`` command runs the same class and ``adaserve sim`` drives the same schedulers
with a virtual clock. Policies by name come from ``make_scheduler``.
"""

from adaserve.planner.config import PlannerConfig, SchedulerFactory, default_factory
from adaserve.planner.core import Decision, Feedback, Pending, Scheduler
from adaserve.planner.mosel.shell import make_modality_scheduler
from adaserve.planner.placement import Split, parse_split, place
from adaserve.planner.policies import POLICIES, make_scheduler
from adaserve.planner.service import Planner

__all__ = [
    "POLICIES", "Decision", "Feedback", "Pending", "Planner", "PlannerConfig", "Scheduler", "SchedulerFactory",
    "Split", "default_factory", "make_modality_scheduler", "make_scheduler", "parse_split", "place",
]
