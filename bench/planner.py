"""`adaserve bench planner`."""

from __future__ import annotations

import typer


def register(bench_app: typer.Typer) -> None:
    """Add the `planner` benchmark to `adaserve bench`."""
