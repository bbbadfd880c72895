"""What a user sees when the environment is wrong: one line on stderr, exit code 2, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from adaserve.cli import app

BAD_BLOCK = "error: invalid adaserve settings: ADASERVE_BLOCK_MS='abc': Input should be a valid integer"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> pytest.MonkeyPatch:
    for name in [n for n in os.environ if n.startswith("ADASERVE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "60")  # a narrow terminal must not wrap the line either
    return monkeypatch


def _one_line(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit)  # typer's exit, not an error escaping the command
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


@pytest.mark.parametrize("args", [["models", "list"], ["stats"], ["dead"], ["produce", "--duration", "1"],
                                  ["profile", "show"], ["bench", "broker"], ["top", "--once"]])
def test_a_bad_environment_variable_is_one_line(env: pytest.MonkeyPatch, args: list[str]) -> None:
    env.setenv("ADASERVE_REDIS_URL", "redis://127.0.0.1:1")
    env.setenv("ADASERVE_BLOCK_MS", "abc")
    assert _one_line(args).startswith(BAD_BLOCK)


@pytest.mark.parametrize("args", [["stats"], ["dead"], ["sim", "--calibrate", "r1"], ["bench", "broker"],
                                  ["top", "--once"]])
def test_a_server_that_cannot_be_reached_is_one_line(env: pytest.MonkeyPatch, args: list[str]) -> None:
    env.setenv("ADASERVE_REDIS_URL", "redis://127.0.0.1:1")  # nothing listens on port 1
    line = _one_line(args)
    assert line.startswith("error: cannot reach the server (ADASERVE_REDIS_URL)") and "127.0.0.1:1" in line, line


def test_a_user_value_that_names_nothing_is_one_line(env: pytest.MonkeyPatch) -> None:
    env.setenv("ADASERVE_REDIS_URL", "redis://127.0.0.1:1")
    assert _one_line(["tail", "--type", "job.nope"]).startswith("error: --type 'job.nope' matches no event type")
    assert _one_line(["top", "--window", "soon"]).startswith("error: window 'soon' is not a positive duration")
    assert _one_line(["produce", "--trace", "twitter"]) == (
        "error: invalid load options: trace must be one of conv, code")
    assert _one_line(["produce", "--form", "csv"]) == (
        "error: invalid load options: form: Input should be 'auto', 'rows' or 'columns'")
    assert _one_line(["produce", "--model", "ee-lm-xs", "--form", "columns"]) == (
        "error: invalid load options: generation requests are sent as rows: form must be rows or auto")


def test_the_installed_command_prints_one_line_for_a_bad_variable(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADASERVE_")}
    env.update(ADASERVE_DATA_DIR=str(tmp_path), ADASERVE_BLOCK_MS="abc")
    proc = subprocess.run([sys.executable, "-m", "adaserve", "models", "list"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().startswith(BAD_BLOCK) and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_version_and_short_help() -> None:
    from importlib.metadata import version

    done = CliRunner().invoke(app, ["--version"])
    assert done.exit_code == 0 and done.stdout.strip() == f"adaserve {version('adaserve')}"
    assert CliRunner().invoke(app, ["produce", "-h"]).exit_code == 0
