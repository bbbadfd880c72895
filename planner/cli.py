"""Commands of adaserve.planner: ``adaserve planner`` (the service) and ``adaserve sim``."""

from __future__ import annotations

import typer

from adaserve.planner.sim import cli as sim_cli


def planner(
    policy: str = typer.Option("orloj", help="Batching policy: orloj, edf, fifo, clipper, nexus, clockwork."),
    max_batch: int = typer.Option(32, min=1, max=1024, help="Largest batch the planner forms."),
    name: str = typer.Option("", help="Consumer name in the planners group (default: host-pid)."),
    log_level: str = typer.Option("INFO", help="Logging level."),
) -> None:
    """Run the planner: read jobs, plan and batch them, dispatch to worker pools."""
    from adaserve.broker import load_settings
    from adaserve.planner.service import Planner, PlannerConfig
    from adaserve.runtime import setup_logging, stop_on_signals

    setup_logging(log_level)
    stop = stop_on_signals()
    Planner(load_settings(), PlannerConfig(policy=policy, max_batch=max_batch, name=name)).run(stop)


def register(app: typer.Typer) -> None:
    app.command("planner")(planner)
    sim_cli.register(app)
