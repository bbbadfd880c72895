"""`adaserve bench mosel`."""

from __future__ import annotations

import typer


def register(bench_app: typer.Typer) -> None:
    """Add the `mosel` benchmark to `adaserve bench`."""
