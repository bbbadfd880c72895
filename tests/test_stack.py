"""The one-machine stack: the embedded server brought back when it dies, children respawned."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import redis

from adaserve.broker import load_settings
from adaserve.broker.errors import AdaserveError
from adaserve.stack import Stack


def test_a_dead_embedded_server_is_restarted_from_its_aof_and_a_child_can_be_respawned(tmp_path: Path) -> None:
    settings = load_settings(redis_url="", namespace="st" + uuid.uuid4().hex[:6], data_dir=tmp_path)
    with Stack(settings, cpu_workers=0, gpu_worker=False, fsync="always") as stack:
        assert stack.server is not None
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
