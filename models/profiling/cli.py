"""``adaserve profile`` and ``adaserve profiler``."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the profiler's commands to the top-level app."""
