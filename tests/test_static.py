"""Lint (ruff) and type checking (mypy) run with the tests, so CI holds the code to both.

Their settings are in pyproject.toml: mypy is strict on the broker, the SDK, the planner, the
workloads and the process plumbing, and checks every other annotation.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *cmd], cwd=REPO, capture_output=True, text=True, timeout=900)


def test_ruff_finds_nothing() -> None:
    done = _run("-m", "ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_nothing() -> None:
    done = _run("scripts/typecheck.py")
    assert done.returncode == 0, done.stdout + done.stderr
