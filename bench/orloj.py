"""`adaserve bench orloj`."""

from __future__ import annotations

import typer


def register(bench_app: typer.Typer) -> None:
    """Add the `orloj` benchmark to `adaserve bench`."""
