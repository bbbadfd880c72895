"""compose.yaml cannot run here (no Docker engine), so it is checked against the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
import yaml

from adaserve.cli import app

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
CLI = typer.main.get_command(app)
ADASERVE = [n for n, s in COMPOSE["services"].items() if s.get("image", "").startswith("adaserve")]


def test_the_expected_services_exist() -> None:
    assert {"redis", "planner", "worker-cpu", "worker-gpu", "producer"} <= set(COMPOSE["services"])


@pytest.mark.parametrize("name", ADASERVE)
def test_every_service_runs_a_real_cli_command(name: str) -> None:
    args = list(COMPOSE["services"][name]["command"])
    cmd, path = CLI, "adaserve"
    while hasattr(cmd, "get_command"):  # walk sub-command groups down to the command itself
        sub = cmd.get_command(cmd.make_context(path, list(args), resilient_parsing=True), args[0])
        assert sub is not None, f"{name}: no `{path} {args[0]}`"
        cmd, path, args = sub, f"{path} {args[0]}", args[1:]
    cmd.make_context(path, args)  # raises on an unknown option or a bad value


def test_services_reach_redis_by_url_and_redis_keeps_an_aof() -> None:
    for name in ADASERVE:
        env = COMPOSE["services"][name]["environment"]
        assert env["ADASERVE_REDIS_URL"].startswith("redis://redis:")
    assert "--appendonly" in COMPOSE["services"]["redis"]["command"]


def test_gpu_worker_reserves_an_nvidia_device() -> None:
    svc = COMPOSE["services"]["worker-gpu"]
    (dev,) = svc["deploy"]["resources"]["reservations"]["devices"]
    assert dev["driver"] == "nvidia" and "gpu" in dev["capabilities"]
    assert svc["command"][:3] == ["worker", "--pool", "gpu"]


def test_dockerfile_copies_every_package() -> None:
    text = (ROOT / "Dockerfile").read_text()
    for folder in ("adaserve", "broker", "producers", "planner", "workers", "telemetry", "models", "bench", "workload"):
        assert f"COPY {folder} {folder}" in text
