"""Workloads both sides draw from: arrival processes as pure functions of their arguments, and the
bundled Azure LLM inference traces they can replay.

Neutral ground between the load generator (``producers``) and the simulators (``planner.sim``,
``planner.mosel``), so that neither imports the other and both draw the same arrivals.
"""

from adaserve.workload.arrivals import PATTERNS, arrivals, constant, gaps_of, poisson, replay
from adaserve.workload.trace import TRACES, Trace, load_trace

__all__ = ["PATTERNS", "TRACES", "Trace", "arrivals", "constant", "gaps_of", "load_trace", "poisson", "replay"]
