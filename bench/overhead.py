"""`adaserve bench overhead`."""

from __future__ import annotations

import typer


def register(bench_app: typer.Typer) -> None:
    """Add the `overhead` benchmark to `adaserve bench`."""
