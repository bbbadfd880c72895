"""What the bench tests share: running one ``adaserve bench`` command as a user would."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
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


@pytest.fixture
def own_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bench that starts its own stack: no configured server, a fresh data folder (the shipped
    models still come from the zoo). The data folder."""
    monkeypatch.delenv("ADASERVE_REDIS_URL", raising=False)
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"
