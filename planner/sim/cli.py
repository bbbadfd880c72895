"""``adaserve sim``."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add ``adaserve sim`` to the top-level app."""
