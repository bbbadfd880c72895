"""Workloads both sides draw from: arrival processes as pure functions of their arguments.

Neutral ground between the load generator (``producers``) and the simulators (``planner.sim``,
``planner.mosel``), so that neither imports the other and both draw the same arrivals.
"""

from adaserve.workload.arrivals import PATTERNS, arrivals, constant, gaps_of, poisson, replay

__all__ = ["PATTERNS", "arrivals", "constant", "gaps_of", "poisson", "replay"]
