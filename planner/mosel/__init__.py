"""MOSEL modality selection: the offline strategy matrix and online re-selection.

The decisions are pure: ``MoselScheduler`` and ``ModalitySelector`` take the queue and ``now``
and touch no connection, file or thread of their own; their slow work goes through a ``Tasks``
object (``InlineTasks`` by default, the live planner's ``Monitor`` thread in service). Bounded:
the integer program gets a wall-clock budget, because a solver's time limit is wall time
(``ilp.py``, ``selector.py``). The I/O shell is ``store.py`` (profiles and cached matrices in
files and Redis), ``monitor.py`` (the thread) and ``shell.py`` (the live scheduler built from
them); ``tests/planner/test_purity.py`` holds every other module to that.
"""

from adaserve.planner.mosel.costs import SubsetCosts
from adaserve.planner.mosel.matrix import StrategyMatrix, build_matrix, floor_grid, matrix_path
from adaserve.planner.mosel.offline import cheapest_mix, cheapest_row
from adaserve.planner.mosel.queue import Change, QueuedJob, QueueState
from adaserve.planner.mosel.selector import MODALITY_POLICIES, ModalitySelector, SelectorStats
from adaserve.planner.mosel.sim import Outcome, simulate
from adaserve.planner.mosel.strategy import ACC_TOL, Strategy
from adaserve.planner.mosel.synthetic import is_synthetic, synthetic_av_digits_profile
from adaserve.planner.mosel.workload import WorkloadSpec

__all__ = [
    "ACC_TOL",
    "MODALITY_POLICIES",
    "Change",
    "ModalitySelector",
    "Outcome",
    "QueueState",
    "QueuedJob",
    "SelectorStats",
    "Strategy",
    "StrategyMatrix",
    "SubsetCosts",
    "WorkloadSpec",
    "build_matrix",
    "cheapest_mix",
    "cheapest_row",
    "floor_grid",
    "is_synthetic",
    "matrix_path",
    "simulate",
    "synthetic_av_digits_profile",
]
