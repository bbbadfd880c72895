"""Commands of adaserve.planner: ``adaserve planner`` (the service) and ``adaserve sim``."""

from __future__ import annotations

import typer

from adaserve.planner.sim import cli as sim_cli


def register(app: typer.Typer) -> None:
    sim_cli.register(app)
