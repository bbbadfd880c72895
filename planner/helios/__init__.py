"""HELIOS (paper 003): run-time choice of language model and exit depth for a task family.

Pure: ``repository`` (the candidates' offline figures), ``pht`` (the Performance History Table),
``cbc`` (the Confidence Breach Counter), ``decide`` (shortlist, greedy depth, load more or
switch, memory to batch size), ``controller`` (Algorithm 1 as a state machine), ``scheduler``
(the planner's policy for a job that names a family), ``family`` (admission). Shell: ``store``
(reads the profiles and manifests). See docs/helios.md.
"""

from adaserve.planner.helios.controller import Helios, HeliosParams
from adaserve.planner.helios.family import servable
from adaserve.planner.helios.pht import BatchObs, ItemStats, PerformanceHistory, ScoredObs
from adaserve.planner.helios.repository import Candidate, DepthFigures, Repository
from adaserve.planner.helios.scheduler import HeliosScheduler
from adaserve.planner.helios.store import load_repository

__all__ = [
    "BatchObs",
    "Candidate",
    "DepthFigures",
    "Helios",
    "HeliosParams",
    "HeliosScheduler",
    "ItemStats",
    "PerformanceHistory",
    "Repository",
    "ScoredObs",
    "load_repository",
    "servable",
]
