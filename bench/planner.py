"""`adaserve bench planner`: how long ORLOJ's scheduler takes per insertion and per batch decision.

For each queue depth the scheduler (with the four-modal workload's profile) is filled to that
many pending requests, apps mixed, then timed while it stays at that depth: each ``next_batch``
takes a batch out and as many new requests are inserted. Two scenarios:

* ``service`` (default): the clock moves as in service. Requests arrive at the rate a worker
  serves full batches of 16 (one batch latency per 16 arrivals), so the backlog of ``depth``
  takes ``horizon = depth x gap`` to drain, and each request's SLO is 1-2 horizons: milestones,
  drops and expiries happen near deadlines, as they would.
* ``overload``: every SLO is 0.5-1 s whatever the depth, i.e. 10,000 pending means 20,000
  arrivals per second against one worker: nearly every request passes through every size's
  drop and every milestone before it expires. A stress test, not a service.

Times are per call, as percentiles over all timed calls: wall clock by default
(``perf_counter_ns``: includes being preempted on a busy machine) or the thread's CPU time
(``--clock cpu``: the scheduler's own work).
"""

from __future__ import annotations

import json
import time

import numpy as np
import typer

from adaserve.broker.errors import InvalidArgument
from adaserve.planner.core import Feedback, Pending, Scheduler

DEPTHS = (100, 1000, 10000)
CLOCKS = {"wall": time.perf_counter_ns, "cpu": time.thread_time_ns}
SCENARIOS = ("service", "overload")


def _scheduler(policy: str) -> tuple[Scheduler, float]:
    """A scheduler seeded with the four-modal profile, and that workload's batch-of-16 latency."""
    from adaserve.planner.policies import make_scheduler
    from adaserve.planner.sim.experiment import mean_batch_s, workload_profile
    from adaserve.planner.sim.workloads import paper_workload

    w = paper_workload("four-modal")
    return make_scheduler(policy, model=w.name, profile=workload_profile(w, w.name)), mean_batch_s(w, 16)


def measure(depth: int, *, policy: str = "orloj", rounds: int = 400, seed: int = 0,
            clock: str = "wall", scenario: str = "service") -> dict[str, float]:
    """Insert and ``next_batch`` latencies (ms) at ``depth`` pending requests."""
    if scenario not in SCENARIOS:
        raise InvalidArgument(f"scenario must be one of {', '.join(SCENARIOS)}")
    _clock = CLOCKS[clock]
    rng = np.random.default_rng(seed)
    sched, batch16 = _scheduler(policy)
    apps = [f"app{i}" for i in range(4)]
    now, n = 1000.0, 0
    if scenario == "service":
        gap = batch16 / 16
        slo = depth * gap
    else:
        slo = 0.5
        gap = slo / depth

    def make(t: float) -> Pending:
        nonlocal n
        n += 1
        deadline = t + slo * (1.0 + rng.random())
        return Pending(str(n), "0", apps[n % 4], "m", t, deadline, seq=n)

    for _ in range(depth):
        sched.add(make(now), now)
        now += gap
    sched.next_batch(now, 1)  # settle drops, milestones and the first query before timing
    insert_ns: list[int] = []
    batch_ns: list[int] = []
    for _ in range(rounds):
        t0 = _clock()
        d = sched.next_batch(now, 16)
        batch_ns.append(_clock() - t0)
        while len(sched) < depth:
            item = make(now)
            t0 = _clock()
            sched.add(item, now)
            len(sched)  # ORLOJ places staged requests at its next query: time the placement too
            insert_ns.append(_clock() - t0)
            now += gap
        if d.batch:
            sched.observe(Feedback("m", len(d.batch), d.predicted_s or 0.05, tuple(p.app for p in d.batch),
                                   tuple(0.04 + 0.06 * rng.random() for _ in d.batch)))
    ins = np.asarray(insert_ns) / 1e6
    nb = np.asarray(batch_ns) / 1e6
    return {"pending": depth, "insert_p50_ms": round(float(np.percentile(ins, 50)), 4),
            "insert_p99_ms": round(float(np.percentile(ins, 99)), 4),
            "next_batch_p50_ms": round(float(np.percentile(nb, 50)), 4),
            "next_batch_p99_ms": round(float(np.percentile(nb, 99)), 4)}


def register(bench_app: typer.Typer) -> None:
    """Add the `planner` benchmark to `adaserve bench`."""

    @bench_app.command("planner")
    def planner_cmd(
        json_out: bool = typer.Option(False, "--json", help="Print one JSON object ({\"depths\": [...]}) and nothing else."),
        policy: str = typer.Option("orloj", help="Policy to time (any of adaserve.planner.policies)."),
        rounds: int = typer.Option(400, min=10, help="Timed next_batch calls per depth."),
        clock: str = typer.Option("wall", help="wall (perf_counter) or cpu (this thread's CPU time)."),
        scenario: str = typer.Option("service", help="service (the clock moves as in service) or overload."),
    ) -> None:
        """Per-call latency of the scheduler's insert and next_batch at 100, 1,000 and 10,000 pending."""
        from rich.console import Console
        from rich.progress import Progress
        from rich.table import Table

        if clock not in CLOCKS:
            raise typer.BadParameter(f"clock must be one of {', '.join(CLOCKS)}")
        if scenario not in SCENARIOS:
            raise typer.BadParameter(f"scenario must be one of {', '.join(SCENARIOS)}")
        err = Console(stderr=True)
        rows = []
        with Progress(console=err, transient=True) as bar:
            task = bar.add_task(f"timing {policy}", total=len(DEPTHS))
            for depth in DEPTHS:
                rows.append(measure(depth, policy=policy, rounds=rounds, clock=clock, scenario=scenario))
                bar.advance(task)
        if json_out:
            typer.echo(json.dumps({"depths": rows}))
            return
        table = Table(title=f"{policy}: per-call latency (ms)")
        for col in rows[0]:
            table.add_column(col, justify="right")
        for r in rows:
            table.add_row(*(str(v) for v in r.values()))
        Console().print(table)
