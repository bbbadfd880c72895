"""``adaserve sim``: one policy (or several) on a simulated workload, with a virtual clock."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add ``adaserve sim`` to the top-level app."""

    @app.command("sim")
    def sim_cmd(
        policy: str = typer.Option("orloj", help="Comma-separated policies: orloj, clipper, nexus, clockwork, fifo, edf."),
        workload: str = typer.Option("two-modal", help="A case of the ORLOJ paper (std-0.5 ... eight-modal, static)."),
        histogram: Path | None = typer.Option(None, help="A profile JSON: draw execution times from its first histogram."),
        slo: float = typer.Option(3.0, min=0.1, help="SLO as a multiple of the P99 time alone."),
        load: float | None = typer.Option(None, min=0.01, help="Arrival rate / saturation throughput (default: the paper's)."),
        arrivals: str = typer.Option("trace", help="trace (Azure, scaled), poisson, constant or bursty."),
        requests: int = typer.Option(5000, min=1),
        workers: int = typer.Option(1, min=1),
        max_batch: int | None = typer.Option(None, min=1, help="Largest batch (default 16 as in the ORLOJ paper; "
                                                               "pipeline mode: 32, the planner's default)."),
        seed: int = typer.Option(0),
        json_out: bool = typer.Option(False, "--json", help="One JSON object: {\"results\": [one row per policy]}."),
        calibrate_run: str | None = typer.Option(None, "--calibrate", help="Measure the pipeline's costs from this "
                                                                           "live run's telemetry (the server in "
                                                                           "ADASERVE_REDIS_URL), save them, and "
                                                                           "simulate the pipeline."),
        calibration: Path | None = typer.Option(None, help="A saved calibration: simulate the live pipeline with its "
                                                           "costs (with --calibrate: where to save; default "
                                                           "calibration-RUN.json)."),
        rate: float = typer.Option(100.0, min=0.01, help="Pipeline mode: Poisson jobs per second."),
        requests_per_job: int = typer.Option(4, "--requests-per-job", "-k", min=1, help="Pipeline mode: requests per job."),
        deadline_ms: float = typer.Option(30.0, "--deadline-ms", min=0.1, help="Pipeline mode: each job's deadline."),
        duration: float = typer.Option(10.0, min=0.1, help="Pipeline mode: seconds of arrivals."),
    ) -> None:
        """Serve a simulated workload with the planner's real scheduler objects; print finish rates.

        With --calibrate RUN or --calibration FILE: the live pipeline around the policy (ingress,
        the planner's loop, transfer, the worker) with costs measured in a live run."""
        if calibrate_run is not None or calibration is not None:
            _pipeline(calibrate_run, calibration, policy, rate, duration, requests_per_job, deadline_ms, seed,
                      max_batch or 32, json_out)
            return
        max_batch = max_batch or 16
        from rich.console import Console
        from rich.progress import Progress

        from adaserve.broker.errors import ConfigError
        from adaserve.broker.profiles import Profile
        from adaserve.planner.sim.experiment import Setup, paper_load, run, saturation_rate
        from adaserve.planner.sim.workloads import from_histogram, paper_workload

        try:
            if histogram is not None:
                prof = Profile.from_json(histogram.read_bytes())
                if not prof.exec_hist:
                    raise typer.BadParameter(f"{histogram} has no execution-time histogram")
                w = from_histogram(prof.exec_hist[0])
            else:
                w = paper_workload(workload)
            setup = Setup(w, slo, load=load, requests=requests, arrivals=arrivals, workers=workers,
                          max_batch=max_batch, seed=seed)
            offered = load if load is not None else paper_load(w, workers=workers, max_batch=max_batch)
            err = Console(stderr=True)
            rows: list[dict[str, object]] = []
            for name in [p for p in policy.split(",") if p]:
                with Progress(console=err, transient=True) as bar:
                    task = bar.add_task(f"{name} on {w.name}", total=requests)
                    res, secs = run(setup, name, progress=partial(bar.advance, task))
                out = {"policy": name, "workload": w.name, "slo": slo, "load": round(offered, 4),
                       "rate_per_s": round(offered * saturation_rate(w, workers=workers, max_batch=max_batch), 3),
                       "requests": res.requests, "finish_rate": round(res.finish_rate, 4), "met": res.met,
                       "late": res.late, "expired": res.expired, "batches": res.batches,
                       "mean_batch": round(res.mean_batch, 3), "utilisation": round(res.utilisation, 4),
                       "wall_s": round(secs, 3)}
                rows.append(out)
                if not json_out:
                    Console().print(out)
            if json_out:
                typer.echo(json.dumps({"results": rows}))
        except (ConfigError, ValueError) as exc:
            raise typer.BadParameter(str(exc)) from exc


def _pipeline(run: str | None, path: Path | None, policy: str, rate: float, duration: float, k: int,
              deadline_ms: float, seed: int, max_batch: int, json_out: bool) -> None:
    from rich.console import Console

    from adaserve.broker.errors import ConfigError
    from adaserve.broker.settings import load_settings
    from adaserve.planner.policies import POLICIES
    from adaserve.planner.sim.calibrate import Calibration
    from adaserve.planner.sim.pipeline_cli import calibration_from_run, print_results, simulate_policies

    policies = [p for p in policy.split(",") if p]
    bad = [p for p in policies if p not in POLICIES]
    if not policies or bad:
        raise typer.BadParameter(f"unknown policy {', '.join(bad) or '(none)'}; choose from {', '.join(POLICIES)}")
    try:
        if run is not None:
            out = path or Path(f"calibration-{run}.json")
            cal = calibration_from_run(run, out)
            Console(stderr=True).print(f"calibration of {run} ({cal.batches} batches of {cal.model}) saved to {out}")
        else:
            assert path is not None
            cal = Calibration.load(path)
        rows = simulate_policies(cal, policies, rate=rate, duration_s=duration, requests_per_job=k,
                                 deadline_ms=deadline_ms, seed=seed, max_batch=max_batch,
                                 data_dir=load_settings().data_dir)
    except (ConfigError, ValueError, OSError) as exc:
        raise typer.BadParameter(str(exc)) from exc
    print_results(rows, json_out)
