"""Small MOSEL fixtures: the synthetic av-digits costs cut to batches of 4, a 1..6 matrix, and
``live_job``, which makes jobs as the live scheduler gathers them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from adaserve.broker.messages import Job, Request, Slo, Tensor
from adaserve.planner.core import Pending
from adaserve.planner.mosel import StrategyMatrix, SubsetCosts, build_matrix, synthetic_av_digits_profile
from adaserve.planner.mosel.held import MoselJob
from adaserve.planner.state import HeldJob

MakeJob = Callable[..., MoselJob]


@pytest.fixture(scope="session")
def costs() -> SubsetCosts:
    return SubsetCosts.from_profile(synthetic_av_digits_profile(max_batch=4))


@pytest.fixture(scope="session")
def matrix(costs: SubsetCosts) -> StrategyMatrix:
    return build_matrix(costs, 6, step=0.05, model="av-digits")


def _live_job(key: str, n: int, deadline: float, *, floor: float = 0.62, arrival: float = 0.0,
              inputs: tuple[str, ...] = ("audio", "image")) -> MoselJob:
    """A job of ``n`` real requests carrying ``inputs``; ``key`` may carry a ``/n`` repeat suffix.
    The planner's record of it (``HeldJob``) is every item's ``payload[0]``."""
    jid = key.split("/")[0]
    t = Tensor.from_numpy(np.zeros(2, np.float32))
    job = Job(id=jid, model="av-digits", reply_to="c", slo=Slo(deadline_ms=1000, min_accuracy=floor),
              requests=[Request(id=f"{jid}-{i}", inputs={m: t for m in inputs}) for i in range(n)])
    held = HeldJob(job, "0-1", arrival * 1000, n)
    items = [Pending(jid, r.id, "app", "av-digits", arrival, deadline, payload=(held, r), floor=floor,
                     job_size=n) for r in job.requests]
    return MoselJob(key, jid, floor, arrival, deadline, items)


@pytest.fixture(scope="session")
def live_job() -> MakeJob:
    return _live_job
