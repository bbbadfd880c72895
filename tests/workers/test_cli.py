"""``adaserve worker`` as a process: clean exit on SIGTERM, a clear refusal without a GPU."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from adaserve.broker import Keys, Settings
from adaserve.broker.codec import decode
from adaserve.workers.runtime.base import gpu_present


def worker_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(ADASERVE_REDIS_URL=settings.redis_url, ADASERVE_NAMESPACE=settings.namespace,
               ADASERVE_DATA_DIR=str(settings.data_dir), ADASERVE_HEARTBEAT_S="0.2",
               ADASERVE_BLOCK_MS="50", **extra)
    return env


def test_sigterm_leaves_cleanly(settings: Settings, r) -> None:
    keys = Keys(settings.namespace)
    proc = subprocess.Popen([sys.executable, "-m", "adaserve", "worker", "--pool", "cpu", "--name", "w-term"],
                            env=worker_env(settings, ADASERVE_WORKER_MEMORY_MB="48"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 60
        while r.hget(keys.workers, "w-term") is None:
            assert proc.poll() is None, proc.stdout.read().decode()  # type: ignore[union-attr]
            assert time.monotonic() < end, "the worker never sent a heartbeat"
            time.sleep(0.05)
        assert decode(r.hget(keys.workers, "w-term")).memory_mb == 48  # the budget from the environment
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out.decode()
    assert r.hget(keys.workers, "w-term") is None


@pytest.mark.skipif(gpu_present(), reason="this host has a GPU")
def test_gpu_pool_without_a_gpu_is_refused(settings: Settings) -> None:
    proc = subprocess.run([sys.executable, "-m", "adaserve", "worker", "--pool", "gpu"], env=worker_env(settings),
                          capture_output=True, timeout=60)
    assert proc.returncode == 2
    assert b"needs a CUDA-enabled onnxruntime and a visible GPU" in proc.stdout + proc.stderr


def test_the_worker_keeps_freed_memory_as_the_setting_says(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc
    import threading

    from typer.testing import CliRunner

    from adaserve.cli import app
    from adaserve.workers import service

    class Quiet:  # the service replaced: what is tested is the command
        def __init__(self, settings: object, config: object) -> None: ...
        def start(self, on_load: object, stop: object) -> None: ...
        def run(self, stop: object) -> None: ...

    calls: list[int] = []
    monkeypatch.setattr(service, "Worker", Quiet)
    monkeypatch.setattr("adaserve.process.stop_on_signals", lambda **_: threading.Event())
    monkeypatch.setattr("adaserve.broker.heap.keep_freed_memory", calls.append)
    monkeypatch.setenv("ADASERVE_REDIS_URL", "redis://127.0.0.1:1")
    try:
        for env, kept in (("0", 0), ("128", 128)):
            monkeypatch.setenv("ADASERVE_HEAP_KEEP_MB", env)
            result = CliRunner().invoke(app, ["worker", "--pool", "cpu"])
            assert result.exit_code == 0, result.output
            assert calls[-1] == kept
    finally:
        gc.unfreeze()  # the command settles the heap it serves from: this one is the suite's
