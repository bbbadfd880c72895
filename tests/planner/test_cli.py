"""``adaserve planner``'s options reach the planner it builds (the service itself is replaced:
what is tested is the command's parsing, not the loop)."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from adaserve.cli import app
from adaserve.planner import service


class Recorder:
    made: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, settings: object, config: object, *, limits: Any = None) -> None:
        Recorder.made.append({"config": config, "limits": limits})

    def run(self, stop: threading.Event) -> None:
        return None


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    monkeypatch.setattr(service, "Planner", Recorder)
    monkeypatch.setattr("adaserve.process.stop_on_signals", threading.Event)
    monkeypatch.setenv("ADASERVE_REDIS_URL", "redis://127.0.0.1:1")
    Recorder.made = []
    return Recorder.made


def test_allow_non_finite_adds_to_the_environments_models(recorded: list[dict[str, Any]],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADASERVE_LIMIT_ALLOW_NON_FINITE", "env-model")
    result = CliRunner().invoke(app, ["planner", "--allow-non-finite", "a", "--allow-non-finite", "b"])
    assert result.exit_code == 0, result.output
    assert recorded[0]["limits"].allow_non_finite == ("env-model", "a", "b")


def test_by_default_no_model_takes_non_finite_inputs(recorded: list[dict[str, Any]],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ADASERVE_LIMIT_ALLOW_NON_FINITE", raising=False)
    assert CliRunner().invoke(app, ["planner"]).exit_code == 0
    assert recorded[0]["limits"].allow_non_finite == ()


def test_the_planner_starts_its_loop_with_the_heap_settled(recorded: list[dict[str, Any]],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    seen: list[int] = []
    monkeypatch.setattr(Recorder, "run", lambda self, stop: seen.append(gc.get_freeze_count()))
    try:
        result = CliRunner().invoke(app, ["planner"])
        assert result.exit_code == 0, result.output
        assert seen and seen[0] > 0
    finally:
        gc.unfreeze()


@pytest.mark.parametrize(("env", "kept"), [(None, 64), ("0", 0), ("256", 256)])
def test_the_planner_keeps_freed_memory_as_the_setting_says(recorded: list[dict[str, Any]],
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            env: str | None, kept: int) -> None:
    calls: list[int] = []
    monkeypatch.setattr("adaserve.broker.heap.keep_freed_memory", calls.append)
    if env is None:
        monkeypatch.delenv("ADASERVE_HEAP_KEEP_MB", raising=False)
    else:
        monkeypatch.setenv("ADASERVE_HEAP_KEEP_MB", env)
    assert CliRunner().invoke(app, ["planner"]).exit_code == 0
    assert calls == [kept] and recorded
