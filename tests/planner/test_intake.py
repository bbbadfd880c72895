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


def test_a_reads_refusals_ack_and_delete_in_one_command_each_and_set_each_reply_stream_s_expiry_once(
        settings: Settings, r: redis.Redis[bytes]) -> None:
    import numpy as np

    from adaserve.broker.codec import encode
    from adaserve.broker.errors import InvalidMessage
    from adaserve.planner.pools import Pools
    from adaserve.producers import make_job

    keys = Keys(settings.namespace)
    streams.ensure_group(r, keys.jobs, PLANNER_GROUP)

    def refuse(body: dict[str, object], entry_ms: float) -> None:
        raise InvalidMessage("overloaded", "the queue ahead is too long")

    intake = Intake(r, settings, Limits(), Finalizer(r, settings), shed=refuse)
    x = np.zeros((1, 4), dtype=np.float32)
    for reply_to in ("c1", "c1", "c2"):
        r.xadd(keys.jobs, {b"m": encode(make_job("m", [x, x], 100.0, reply_to=reply_to))})
    entries = streams.read_group(r, [keys.jobs], PLANNER_GROUP, "a", count=10, block_ms=None)
    with r.pipeline(transaction=False) as pipe:
        assert intake.admit(entries, Pools(5.0), pipe, 0.0) == []
        names = [args[0] for args, _ in pipe.command_stack]
        assert names.count("XACK") == 1 and names.count("XDEL") == 1 and names.count("EXPIRE") == 2
        assert names.count("XADD") == 6
        pipe.execute()
    assert r.xpending(keys.jobs, PLANNER_GROUP)["pending"] == 0 and r.xlen(keys.jobs) == 0
    for reply_to, jobs in (("c1", 2), ("c2", 1)):
        assert r.xlen(keys.reply(reply_to)) == jobs and r.ttl(keys.reply(reply_to)) > 0
