"""``adaserve up`` as a user runs it: embedded server, planner, worker; SIGTERM stops them all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from adaserve.broker.errors import EmbeddedServerError
from adaserve.embedded import EmbeddedServer, free_port

pytestmark = pytest.mark.slow


def test_up_starts_everything_and_sigterm_stops_everything(tmp_path: Path, alive: Callable[[int], bool]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ADASERVE_REDIS_URL"}
    env["ADASERVE_DATA_DIR"] = str(tmp_path)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "adaserve", "up", "--port", str(port)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    deadline = time.time() + 90
    assert proc.stdout is not None
    while time.time() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if "ready" in line or proc.poll() is not None:
            break
    assert any("ready" in x for x in lines), "".join(lines)
    assert any("embedded server" in x for x in lines)
    assert any(f"export ADASERVE_REDIS_URL=redis://127.0.0.1:{port}/0" in x for x in lines)  # a stable address
    assert any(f"unix://{tmp_path.resolve() / 'server' / 'server.sock'}?db=0" in x for x in lines)
    assert any("the CLI is" in x for x in lines)
    children = [int(p) for p in subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()]
    assert len(children) >= 3  # server, planner, worker
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    time.sleep(0.5)
    assert not [c for c in children if alive(c)]
    assert (tmp_path / "server" / "appendonlydir").is_dir()  # the embedded server kept an AOF


def test_a_taken_port_is_one_clear_error(tmp_path: Path) -> None:
    with EmbeddedServer(tmp_path / "a", persist=False) as first:
        with pytest.raises(EmbeddedServerError, match=rf"port {first.port} is in use .* --port 0"):
            EmbeddedServer(tmp_path / "b", port=first.port, persist=False).start()
