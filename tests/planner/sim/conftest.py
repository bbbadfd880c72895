"""A live run's events, built here as the planner and a worker would publish them."""

from __future__ import annotations

import pytest

from adaserve.broker.events import BatchDispatched, BatchFinished, JobAccepted, RequestTiming


@pytest.fixture
def synthetic_run() -> list[object]:
    """40 jobs submitted every 10 ms, accepted 2 ms later (jobs 0 mod 5: 12 ms), dispatched at 3 ms,
    started 1 ms after dispatch, served in 0.5 + 0.25 k ms of which 0.2 + 0.1 k in the runner."""
    evs: list[object] = []
    for j in range(40):
        sub = 1000.0 + 10.0 * j
        lag = 12.0 if j % 5 == 0 else 2.0
        evs.append(JobAccepted(ts=sub + lag, job_id=f"j{j}", app="a", model="m", run="r1", requests=1, deadline_ms=50,
                               submitted_ms=sub))
        if j % 5 == 0:
            continue  # this job expired: no batch
        k = 1 + j % 4
        disp = sub + 3.0
        start = disp + 1.0
        fin = start + 0.5 + 0.25 * k
        evs.append(BatchDispatched(ts=disp, batch_id=f"b{j}", pool="cpu", model="m", size=k))
        items = [RequestTiming(job_id=f"j{j}", request_id=str(i), app="a", run="r1", status="completed",
                               queue_ms=start - sub, exec_ms=0.2 + 0.1 * k, total_ms=fin - sub) for i in range(k)]
        evs.append(BatchFinished(ts=fin, batch_id=f"b{j}", pool="cpu", worker="w", model="m", size=k,
                                 exec_ms=0.2 + 0.1 * k, items=items))
    return evs
