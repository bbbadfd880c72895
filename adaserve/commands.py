"""``adaserve up`` and ``adaserve demo``: the whole pipeline on this machine."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from adaserve.embedded import DEFAULT_PORT
from adaserve.workers.config import DEFAULT_SLOTS

if TYPE_CHECKING:
    from adaserve.loadgen import LoadOptions
    from adaserve.stack import Stack

err = Console(stderr=True)


def up(
    workers: int = typer.Option(1, "--workers", "-w", min=0, help="CPU workers to start."),
    gpu: bool | None = typer.Option(None, "--gpu/--no-gpu", help="Start a GPU worker (default: when a GPU is visible)."),
    policy: str = typer.Option("orloj", help="Planner policy: orloj, edf, fifo, clipper, nexus, clockwork."),
    slots: int = typer.Option(DEFAULT_SLOTS, min=1, help="Batches each worker accepts at once."),
    split: list[str] | None = typer.Option(None, "--split", help="Planner split placement MODEL=FIRST:SECOND, e.g. "
                                                                 "effnet-lite0=gpu:cpu (repeatable)."),
    modality: str = typer.Option("optimized", help="MOSEL modality policy for av-digits: optimized, random, aggressive, none."),
    port: int = typer.Option(DEFAULT_PORT, "--port", min=0, max=65535,
                             help="Port of the embedded server on 127.0.0.1 (0: any free port); "
                                  "ignored with ADASERVE_REDIS_URL."),
) -> None:
    """Start the pipeline (embedded server unless ADASERVE_REDIS_URL is set) until Ctrl-C or SIGTERM."""
    from adaserve.broker import ConfigError, load_settings
    from adaserve.planner.placement import parse_splits
    from adaserve.process import stop_on_signals
    from adaserve.stack import Stack

    try:
        parse_splits(tuple(split or ()))
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--split") from None
    settings = load_settings()
    stop = stop_on_signals()
    stack = Stack(settings, cpu_workers=workers, gpu_worker=gpu, policy=policy, slots=slots, split=tuple(split or ()),
                  modality=modality, server_port=port or None)
    with stack:
        _announce(stack)
        stack.wait_ready()
        err.print(f"[green]ready[/]: {workers} CPU worker(s); Ctrl-C stops everything")
        while not stop.is_set():
            stack.check()
            stop.wait(0.5)
        err.print("stopping…")


def _announce(stack: Stack) -> None:
    url = stack.settings.redis_url
    if stack.server is not None:
        url = stack.server.url  # the stable address; the socket file is this machine's faster way in
        local = f", and {stack.server.local_url} for this machine's processes" if stack.server.socket_path else ""
        err.print(f"[yellow]embedded server[/] at {url}{local} (data in {stack.settings.data_dir / 'server'}, AOF "
                  "on). It is for one machine: set ADASERVE_REDIS_URL to use a real Redis or Valkey.",
                  soft_wrap=True)  # addresses to copy: never broken across lines
    err.print(f"your apps and the CLI: export ADASERVE_REDIS_URL={url}   logs: {stack.log_dir}", soft_wrap=True)
    err.print(f"the CLI is {Path(sys.executable).parent / 'adaserve'} (or `source .venv/bin/activate` in a checkout); "
              "then `adaserve tail`, `adaserve stats`")


def demo(
    duration: float = typer.Option(30.0, "--duration", "-d", min=1, help="Seconds of load (per policy)."),
    rate: float = typer.Option(40.0, "--rate", "-r", min=0.1, help="Jobs per second offered."),
    requests_per_job: int = typer.Option(4, "--requests-per-job", "-k", min=1, help="Requests in each job."),
    deadline_ms: float = typer.Option(250.0, "--deadline-ms", min=1, help="Deadline of each job."),
    pattern: str = typer.Option("poisson", help="Arrivals: constant, poisson or trace (Azure LLM trace, scaled)."),
    model: str = typer.Option("fsdd-cnn", help="Model to serve (ee-audio: the early-exit model)."),
    workers: int = typer.Option(1, "--workers", "-w", min=1, help="CPU workers."),
    policy: str = typer.Option("orloj", help="Planner policy, or a comma-separated list to compare (same arrivals and inputs)."),
    seed: int = typer.Option(0, help="Seed of the arrivals and of the inputs drawn."),
    modality: str = typer.Option("optimized", help="MOSEL modality policy for av-digits: optimized, random, aggressive, none."),
) -> None:
    """Start the pipeline, drive real held-out jobs through it, and report (last line: JSON)."""
    from adaserve.broker import ConfigError
    from adaserve.loadgen import load_options
    from adaserve.planner.policies import POLICIES

    policies = [p.strip() for p in policy.split(",") if p.strip()]
    bad = [p for p in policies if p not in POLICIES]
    if not policies or bad:
        raise typer.BadParameter(f"unknown policy {', '.join(bad) or '(none)'}; choose from {', '.join(POLICIES)}")
    try:
        opts = load_options(model=model, rate=rate, duration_s=duration, requests_per_job=requests_per_job,
                            deadline_ms=deadline_ms, pattern=pattern, seed=seed)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from None
    reports = [_demo_run(opts.model_copy(update={"run": f"{opts.run}-{p}"}), p, workers, modality) for p in policies]
    report = {**reports[0]}
    if len(reports) > 1:
        keys = ("finish_rate", "completed", "expired", "p50_ms", "p99_ms", "throughput_rps", "accuracy")
        report["by_policy"] = {r["policy"]: {k: r[k] for k in keys} for r in reports}
    for r in reports:
        _print_report(r)
    print(json.dumps(report))


def _demo_run(opts: LoadOptions, policy: str, workers: int, modality: str = "optimized") -> dict[str, object]:
    """One fresh pipeline with ``policy``, the load, and the producer's and telemetry's counts."""
    from adaserve.broker import connect, load_settings
    from adaserve.loadgen import run_load
    from adaserve.stack import Stack
    from adaserve.telemetry import TelemetryReader, aggregate

    stack = Stack(load_settings(), cpu_workers=workers, policy=policy, modality=modality)
    with stack:
        _announce(stack)
        t0 = time.monotonic()
        n = stack.wait_ready()
        err.print(f"[bold]{policy}[/]: {n} worker(s) ready in {time.monotonic() - t0:.1f} s; sending {opts.rate:g} jobs/s "
                  f"x {opts.requests_per_job} requests for {opts.duration_s:g} s ({opts.pattern})")
        summary = run_load(stack.settings, opts)
        stack.check()
        r = connect(stack.settings)
        stats = aggregate((x.event for x in TelemetryReader(r, stack.settings).history()), run=opts.run)
        r.close()
    # The producer's own count and the telemetry's must agree; both go into the report.
    return {**summary.model_dump(), "policy": policy, "workers": workers,
            "telemetry": {"submitted": stats.total.submitted, "completed": stats.total.completed,
                          "finish_rate": stats.total.finish_rate}}


def _print_report(report: dict[str, object]) -> None:
    from rich.table import Table

    table = Table(title=f"adaserve demo: {report['policy']}", show_header=False)
    for key in ("model", "policy", "workers", "pattern", "offered_jobs_per_s", "submitted", "completed",
                "expired", "rejected", "failed", "unfinished", "finish_rate", "p50_ms", "p99_ms",
                "throughput_rps", "accuracy"):
        value = report.get(key)
        table.add_row(key, f"{value:.4g}" if isinstance(value, float) else str(value))
    Console().print(table)


def register(app: typer.Typer) -> None:
    app.command("up")(up)
    app.command("demo")(demo)
