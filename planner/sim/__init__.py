"""Discrete-event simulator driving the planner's real scheduling code with a virtual clock.

``simulate`` is the event loop; ``Workload`` and ``PAPER_WORKLOADS`` say where execution times
come from; ``Setup``/``run`` put a workload, an SLO, a load and a policy together; ``run_table``
re-runs the ORLOJ paper's tables, whose published values are in ``PAPER``. ``simulate_pipeline``
runs the live planner's loop around a policy with the costs ``calibrate`` measured in a live run.
"""

from adaserve.planner.sim.bursty import bursty
from adaserve.planner.sim.calibrate import Calibration, calibrate
from adaserve.planner.sim.engine import SimResult, simulate
from adaserve.planner.sim.experiment import Setup, paper_load, run, saturation_rate, workload_profile
from adaserve.planner.sim.paper import PAPER, paper_value
from adaserve.planner.sim.pipeline import simulate_pipeline
from adaserve.planner.sim.table import Cell, run_table
from adaserve.planner.sim.workloads import PAPER_WORKLOADS, Workload, from_histogram, paper_workload

__all__ = [
    "PAPER", "PAPER_WORKLOADS", "Calibration", "Cell", "Setup", "SimResult", "Workload", "bursty", "calibrate",
    "from_histogram", "paper_load", "paper_value", "paper_workload", "run", "run_table", "saturation_rate", "simulate",
    "simulate_pipeline", "workload_profile",
]
