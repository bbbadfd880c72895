"""``adaserve sim --calibrate RUN`` / ``--calibration FILE``: the live pipeline, simulated.

``--calibrate RUN`` reads the telemetry of a live run (``adaserve produce`` or ``demo`` prints
its run id) from the configured server, measures the pipeline's costs (``calibrate``) and saves
them; with ``--calibration FILE`` a saved calibration is reused. Either way each ``--policy`` then
serves Poisson jobs at ``--rate`` through the simulated pipeline with those costs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import typer

from adaserve.planner.sim.calibrate import Calibration, calibrate
from adaserve.planner.sim.engine import SimResult

UNREPORTED_SLOTS = 2  # the worker's slots when a calibration predates the planner reporting them


def calibration_from_run(run: str, out: Path) -> Calibration:
    """Measure a live run's pipeline costs from the server's telemetry and save them to ``out``."""
    from adaserve.broker import connect
    from adaserve.broker.connection import shown_url
    from adaserve.broker.settings import load_connected_settings
    from adaserve.planner.overload import Overload
    from adaserve.telemetry import EventFilter, TelemetryReader, run_events

    horizon_s = Overload().horizon_s  # the planner's memory, not a setting of this command

    settings = load_connected_settings()
    r = connect(settings)
    try:
        reader = TelemetryReader(r, settings)
        events = run_events(reader, run)
        # What the planner's admission control remembered when the run began: the batches that
        # finished in its horizon before the run's first event.
        start = int(min((e.ts for e in events), default=0.0))
        before = [x.event for x in reader.history(since_ms=max(start - 1000 * horizon_s, 0), until_ms=start,
                                                  keep=EventFilter(types=("batch.finished",)))] if events else []
    finally:
        r.close()
    if not events:
        raise typer.BadParameter(f"no telemetry of run {run!r} on {shown_url(settings.redis_url)}")
    cal = calibrate(events, before=before, horizon_s=horizon_s)
    cal.save(out)
    return cal


def simulate_policy(cal: Calibration, policy: str, jobs_s: np.ndarray, *, requests_per_job: int,
                    deadline_ms: float, seed: int, max_batch: int, data_dir: Path, admission: bool | None = None,
                    max_queue: int | None = None) -> SimResult:
    """``policy`` as the live planner builds it (the same profile fallback, the same options, the
    same admission control: ``adaserve planner``'s defaults unless ``admission`` / ``max_queue``
    say otherwise) on jobs submitted at ``jobs_s``, through the calibrated pipeline."""
    from adaserve.planner.config import PlannerConfig, default_factory
    from adaserve.planner.overload import for_planner
    from adaserve.planner.profiles import fallback_profile
    from adaserve.planner.sim.pipeline import simulate_pipeline

    found = fallback_profile(data_dir, cal.model)
    sched = default_factory(policy, max_batch=max_batch)(cal.model, found[0] if found else None)
    planner = PlannerConfig(policy=policy, max_batch=max_batch)
    overload = for_planner(max_queue=planner.max_queue if max_queue is None else max_queue,
                           admission=planner.admission if admission is None else admission, max_batch=max_batch)
    return simulate_pipeline(sched, jobs_s, requests_per_job, deadline_ms / 1000.0, cal, max_batch=max_batch,
                             seed=seed, model=cal.model, overload=overload, slots=cal.slots or UNREPORTED_SLOTS,
                             queue_ms=cal.queue_ms or 0.0)


def simulate_policies(cal: Calibration, policies: list[str], *, rate: float, duration_s: float,
                      requests_per_job: int, deadline_ms: float, seed: int, max_batch: int,
                      data_dir: Path) -> list[dict[str, object]]:
    """Each policy on Poisson jobs through the calibrated pipeline."""
    from adaserve.workload.arrivals import arrivals

    jobs = np.asarray(arrivals("poisson", rate, duration_s, seed=seed))
    out = []
    for policy in policies:
        res = simulate_policy(cal, policy, jobs, requests_per_job=requests_per_job, deadline_ms=deadline_ms,
                              seed=seed, max_batch=max_batch, data_dir=data_dir)
        out.append({"policy": policy, "model": cal.model, "jobs_per_s": rate, "deadline_ms": deadline_ms,
                    "requests": res.requests, "finish_rate": round(res.finish_rate, 4), "met": res.met,
                    "late": res.late, "expired": res.expired, "rejected": res.rejected, "batches": res.batches,
                    "mean_batch": round(res.mean_batch, 3)})
    return out


def print_results(results: list[dict[str, object]], json_out: bool) -> None:
    from rich.console import Console

    if json_out:
        typer.echo(json.dumps({"results": results}))
        return
    for row in results:
        Console().print(row)
