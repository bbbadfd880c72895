"""ORLOJ: batching requests whose execution time is a random variable (the ORLOJ paper, Sec. 3-4).

Per-app execution-time histograms (``ExecDistributions``), batch latency from the expected
maximum of a batch (``order_stats``, ``BatchLatencyFit``, ``BatchTables``), the time-varying
priority score (``score``), Algorithm 1 over one queue per batch size (``OrlojScheduler``), and
apps of very different costs batched apart (``AppGroups``).
"""

from adaserve.planner.orloj.batch_latency import BatchLatencyFit
from adaserve.planner.orloj.distributions import POOLED, ExecDistributions, Snapshot
from adaserve.planner.orloj.groups import AppGroups, group_apps
from adaserve.planner.orloj.order_stats import expected_max_identical, expected_max_mixed, max_masses
from adaserve.planner.orloj.prior import Prior, prior_from_profile
from adaserve.planner.orloj.scheduler import OrlojScheduler
from adaserve.planner.orloj.score import ScoreSegments, priority_reference, score_segments
from adaserve.planner.orloj.tables import BatchTables

__all__ = [
    "POOLED", "AppGroups", "BatchLatencyFit", "BatchTables", "ExecDistributions", "OrlojScheduler", "Prior", "ScoreSegments",
    "Snapshot", "expected_max_identical", "expected_max_mixed", "group_apps", "max_masses", "prior_from_profile",
    "priority_reference", "score_segments",
]
