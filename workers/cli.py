"""Commands of adaserve.workers, added to the `adaserve` CLI by `register`."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this package's commands (and sub-command groups) to the top-level app."""
