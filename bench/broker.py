"""`adaserve bench broker`."""

from __future__ import annotations

import typer


def register(bench_app: typer.Typer) -> None:
    """Add the `broker` benchmark to `adaserve bench`."""
