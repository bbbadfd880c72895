"""compose.yaml cannot run here (no Docker engine), so it is checked against the real CLI (and by
``docker compose config`` where a compose plugin is installed)."""

from __future__ import annotations

import fnmatch
import importlib.util
import re
import shutil
import subprocess
import sys
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


def parse(name: str, argv: list[str]) -> None:
    """Walk ``adaserve ARGV`` down to its command through the real CLI; raises on a bad option."""
    args = list(argv)
    cmd, path = CLI, "adaserve"
    while hasattr(cmd, "get_command"):  # walk sub-command groups down to the command itself
        sub = cmd.get_command(cmd.make_context(path, list(args), resilient_parsing=True), args[0])
        assert sub is not None, f"{name}: no `{path} {args[0]}`"
        cmd, path, args = sub, f"{path} {args[0]}", args[1:]
    cmd.make_context(path, args)  # raises on an unknown option or a bad value


@pytest.mark.parametrize("name", ADASERVE)
def test_every_service_runs_a_real_cli_command(name: str) -> None:
    parse(name, COMPOSE["services"][name]["command"])


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


ONE_SHOT = {"stats", "dead", "produce", "report", "bench", "sim", "profile", "models", "tail"}


def test_telemetry_is_a_long_running_exporter_with_its_port_published() -> None:
    svc = COMPOSE["services"]["telemetry"]
    assert svc["command"][0] == "exporter" and svc["restart"] in ("unless-stopped", "always")
    assert "profiles" not in svc  # on by default
    port = svc["command"][svc["command"].index("--port") + 1]
    assert any(p.endswith(f":{port}") for p in svc["ports"])
    probe = svc["healthcheck"]["test"]
    assert probe[:3] == ["CMD", "python", "-c"] and f":{port}/metrics" in probe[3]
    compile(probe[3], "healthcheck", "exec")


def test_no_one_shot_command_runs_under_a_restart_policy() -> None:
    for name in ADASERVE:
        svc = COMPOSE["services"][name]
        if svc["command"][0] in ONE_SHOT:
            assert svc.get("restart") == "no", f"{name} would restart `{svc['command'][0]}` in a loop"


def test_redis_is_published_on_the_host_loopback() -> None:
    (port,) = COMPOSE["services"]["redis"]["ports"]
    assert re.fullmatch(r"127\.0\.0\.1:\$\{ADASERVE_REDIS_PORT:-6379\}:6379", port)


@pytest.mark.parametrize("name", ["planner", "worker-cpu", "worker-gpu"])
def test_planner_and_workers_have_healthchecks_through_the_real_cli(name: str) -> None:
    check = COMPOSE["services"][name]["healthcheck"]
    test = check["test"]
    assert test[:2] == ["CMD", "adaserve"]
    parse(name, test[2:])
    assert ("--planner" in test) == (name == "planner") and ("--worker" in test) == (name != "planner")
    assert check["start_period"] and check["retries"] >= 1


def test_cpu_workers_size_their_threads_from_a_cpu_limit() -> None:
    svc = COMPOSE["services"]["worker-cpu"]
    assert float(svc["deploy"]["resources"]["limits"]["cpus"]) > 0
    assert "--threads" not in svc["command"]  # 0, the default, reads the cgroup quota


def _requirements() -> object:
    spec = importlib.util.spec_from_file_location("requirements", ROOT / "deploy" / "requirements.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_only_the_gpu_worker_uses_the_cuda_image() -> None:
    for name in ADASERVE:
        svc = COMPOSE["services"][name]
        flavour = svc["build"]["args"]["FLAVOUR"]
        assert flavour == ("gpu" if name == "worker-gpu" else "cpu"), name
        assert svc["image"] == f"adaserve:{flavour}"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="deploy/requirements.py reads pyproject.toml with tomllib (3.11+)")
def test_the_cpu_image_installs_no_cuda_packages() -> None:
    reqs = _requirements()
    cpu, gpu = reqs.requirements("cpu"), reqs.requirements("gpu")  # type: ignore[attr-defined]
    assert not any(r.startswith("onnxruntime-gpu") for r in cpu) and "onnxruntime>=1.18" in cpu
    assert any(r.startswith("onnxruntime-gpu") for r in gpu)
    assert "torch==2.13.*" in cpu and "torch==2.13.*" in gpu
    text = (ROOT / "Dockerfile").read_text()
    assert "ARG FLAVOUR=cpu" in text and re.search(r"ARG TORCH_INDEX_URL=https://download\.pytorch\.org/whl/cpu\b", text)
    assert '--index-url "$TORCH_INDEX_URL" "torch==2.13.*"' in text
    out = subprocess.run([sys.executable, str(ROOT / "deploy" / "requirements.py"), "cpu"], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out == cpu


def test_dockerignore_keeps_environments_out_and_what_is_copied_in() -> None:
    patterns = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    for must in (".git", ".venv", "**/__pycache__", ".adaserve"):
        assert must in patterns
    lines = [ln.split()[1:-1] for ln in (ROOT / "Dockerfile").read_text().splitlines() if ln.startswith("COPY ")]
    for src in (s for sources in lines for s in sources):
        assert not any(fnmatch.fnmatch(src, p) or fnmatch.fnmatch(src.split("/")[0], p) for p in patterns), src


def _compose_plugin() -> bool:
    docker = shutil.which("docker")
    return docker is not None and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _compose_plugin(), reason="no docker compose plugin here; the file is checked by parsing above")
def test_docker_compose_config_accepts_the_file() -> None:
    for profile in ([], ["--profile", "gpu", "--profile", "load", "--profile", "monitoring"]):
        done = subprocess.run(["docker", "compose", "-f", str(ROOT / "compose.yaml"), *profile, "config", "-q"],
                              capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stderr
