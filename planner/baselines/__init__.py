"""Baseline batching policies behind the planner's ``Scheduler`` interface, for comparison with ORLOJ."""

from adaserve.planner.baselines.clipper import ClipperScheduler
from adaserve.planner.baselines.clockwork import ClockworkScheduler
from adaserve.planner.baselines.fifo import FifoScheduler
from adaserve.planner.baselines.nexus import NexusScheduler
from adaserve.planner.baselines.point import MeanLatency

__all__ = ["ClipperScheduler", "ClockworkScheduler", "FifoScheduler", "MeanLatency", "NexusScheduler"]
