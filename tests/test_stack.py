"""The one-machine stack: the embedded server brought back when it dies, children respawned."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from adaserve.broker import Keys, load_settings
from adaserve.broker.errors import AdaserveError
from adaserve.stack import Stack


def test_a_dead_embedded_server_is_restarted_from_its_aof_and_a_child_can_be_respawned(tmp_path: Path) -> None:
    settings = load_settings(redis_url="", namespace="st" + uuid.uuid4().hex[:6], data_dir=tmp_path)
    with Stack(settings, cpu_workers=0, gpu_worker=False, fsync="always") as stack:
        assert stack.server is not None
        # the stack and its children reach the server over its unix socket
        assert stack.settings.redis_url == stack.server.local_url and stack.server.local_url.startswith("unix://")
        r = redis.Redis.from_url(stack.settings.redis_url)
        r.set("kept", "1")
        stack.server.kill()
        assert not stack.server.alive()
        stack.check()  # what `adaserve up` calls each second
        assert stack.server.alive() and r.get("kept") == b"1"
        planner = stack.child("planner")
        with pytest.raises(AdaserveError, match="still running"):
            stack.respawn("planner")
        planner.kill()
        planner.wait(5)
        with pytest.raises(AdaserveError, match="planner exited"):
            stack.check()
        assert stack.respawn("planner").pid != planner.pid
        stack.check()
        r.close()


def test_a_restarted_planner_is_serving_when_restart_returns(tmp_path: Path) -> None:
    """A benchmark warms the new policy up at once: jobs sent while the process still imported
    waited in the stream past their deadlines and taught it nothing."""
    settings = load_settings(redis_url="", namespace="st" + uuid.uuid4().hex[:6], data_dir=tmp_path)
    with Stack(settings, cpu_workers=0, gpu_worker=False) as stack:
        old = stack.child("planner")
        stack.restart_planner("fifo")
        new = stack.child("planner")
        assert new.pid != old.pid and old.poll() is not None and new.poll() is None
        r = redis.Redis.from_url(stack.settings.redis_url)
        names = [n.decode() for n in r.hkeys(Keys(stack.settings.namespace).planners)]
        assert [n for n in names if n.endswith(f"-{new.pid}")], names  # it has stepped: its first report is in
        r.close()


def test_sigterm_to_the_process_that_opened_a_stack_stops_its_children(
        tmp_path: Path, alive: Callable[[int], bool]) -> None:
    """A benchmark stopped by ``kill`` or a timeout left its server and planner serving."""
    script = tmp_path / "hold.py"
    script.write_text(
        "import sys, time, uuid\n"
        "from pathlib import Path\n"
        "from adaserve.broker import load_settings\n"
        "from adaserve.stack import Stack\n"
        "settings = load_settings(redis_url='', namespace='st' + uuid.uuid4().hex[:6], data_dir=Path(sys.argv[1]))\n"
        "with Stack(settings, cpu_workers=0, gpu_worker=False, persist=False) as stack:\n"
        "    assert stack.server is not None\n"
        "    print(stack.child('planner').pid, stack.server.pid, flush=True)\n"
        "    time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "data")], stdout=subprocess.PIPE)
    pids: list[int] = []
    try:
        assert proc.stdout is not None
        pids = [int(x) for x in proc.stdout.readline().split()]
        assert len(pids) == 2 and all(alive(p) for p in pids)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 128 + signal.SIGTERM
        assert not any(alive(p) for p in pids)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        for pid in pids:  # what a failing stack left behind
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
