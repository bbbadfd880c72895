"""What the bench tests share: running one ``adaserve bench`` command as a user would."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from typer.testing import CliRunner

from adaserve.bench.cli import register


def bench_command(name: str) -> Callable[..., Any]:
    """``adaserve bench NAME ARGS...`` through the CLI, in this process: its ``Result``."""
    def invoke(*args: str) -> Any:
        app = typer.Typer()
        register(app)
        return CliRunner().invoke(app, ["bench", name, *args])
    return invoke
