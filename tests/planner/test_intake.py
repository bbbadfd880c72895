"""The hand-over of ingress entries between planners, on a real server: a planner keeps what it
holds fresh, and another takes over only what was left idle."""

from __future__ import annotations

import time

import redis

from adaserve.broker import Finalizer, Settings, streams
from adaserve.broker.keys import PLANNER_GROUP, Keys
from adaserve.broker.settings import Limits
from adaserve.planner.intake import Intake


def test_held_entries_stay_and_idle_ones_move_to_another_planner(
        settings: Settings, r: redis.Redis[bytes]) -> None:
    keys = Keys(settings.namespace)
    intake = Intake(r, settings, Limits(), Finalizer(r, settings))
    streams.ensure_group(r, keys.jobs, PLANNER_GROUP)
    kept, left = (r.xadd(keys.jobs, {b"m": b"job"}).decode() for _ in range(2))
    streams.read_group(r, [keys.jobs], PLANNER_GROUP, "a", count=2, block_ms=None)
    time.sleep(settings.reclaim_idle_ms / 1000.0 * 0.6)
    intake.keep("a", [kept])  # "a" still holds this one
    time.sleep(settings.reclaim_idle_ms / 1000.0 * 0.6)
    got = intake.reclaim("b", mine=set())
    assert [e.id for e in got] == [left]
    assert intake.reclaim("a", mine={kept}) == []  # nothing idle, and its own entry is never "taken"
