"""Waiting out a broker outage: the backoff, the two log lines, the limit, and a real server that
goes away and comes back under a client that keeps its connection object."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
import redis

from adaserve.broker import BrokerUnavailable, Outage, is_transient, ride_out
from adaserve.embedded import EmbeddedServer


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_backoff_doubles_to_its_cap_with_jitter_in_the_upper_half() -> None:
    o = Outage("t", base_s=0.1, cap_s=1.0, jitter=lambda: 1.0)
    assert [round(o.failed(redis.ConnectionError("x")), 3) for _ in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    low = Outage("t", base_s=0.1, cap_s=1.0, jitter=lambda: 0.0)
    assert [round(low.failed(redis.ConnectionError("x")), 3) for _ in range(3)] == [0.05, 0.1, 0.2]


def test_one_line_when_it_starts_and_one_with_its_length_when_it_ends(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    o = Outage("planner p1", clock=clock, logger=logging.getLogger("t.outage"))
    with caplog.at_level(logging.WARNING, logger="t.outage"):
        for _ in range(50):
            o.failed(redis.ConnectionError("refused"))
            clock.t += 0.1
        assert o.down and o.down_for() == pytest.approx(5.0)
        assert o.recovered() == pytest.approx(5.0)
        assert o.recovered() is None  # already up: nothing to say
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "planner p1: broker unreachable" in lines[0] and "refused" in lines[0]
    assert lines[1] == "planner p1: broker back after 5.0 s"
    assert not o.down and o.outages == 1


def test_gives_up_only_past_the_longest_outage() -> None:
    clock = Clock()
    o = Outage("w", max_s=3.0, clock=clock)
    o.failed(redis.ConnectionError("x"))
    clock.t = 2.9
    o.failed(redis.ConnectionError("x"))
    clock.t = 3.0
    with pytest.raises(BrokerUnavailable, match="longer than ADASERVE_MAX_OUTAGE_S=3"):
        o.failed(redis.ConnectionError("x"))


def test_a_tool_that_never_reached_the_server_says_so_at_once() -> None:
    o = Outage("client", wait_first=False)
    err = redis.ConnectionError("Error 111 connecting")
    with pytest.raises(redis.ConnectionError, match="111"):
        o.failed(err)
    o.recovered()  # a first success: from now on outages are waited out
    assert o.failed(err) > 0


@pytest.mark.parametrize(("exc", "transient"), [
    (redis.ConnectionError("reset"), True),
    (redis.TimeoutError("timed out"), True),
    (redis.BusyLoadingError("LOADING Redis is loading the dataset in memory"), True),
    (redis.ReadOnlyError("READONLY You can't write against a read only replica."), True),
    (redis.ResponseError("MASTERDOWN Link with MASTER is down"), True),
    (redis.ResponseError("NOGROUP No such key"), False),
    (redis.ResponseError("WRONGTYPE Operation against a key"), False),
    (redis.AuthenticationError("invalid password"), False),  # a wrong setting: said, not retried
])
def test_which_errors_are_an_outage(exc: Exception, transient: bool) -> None:
    assert is_transient(exc) is transient


def test_ride_out_repeats_until_the_broker_answers_and_a_stop_ends_the_wait() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise redis.ConnectionError("down")
        return "ok"

    assert ride_out(flaky, Outage("t", base_s=0.001, cap_s=0.002)) == "ok" and len(calls) == 3
    with pytest.raises(redis.ResponseError):  # a wrong command is not an outage
        ride_out(lambda: (_ for _ in ()).throw(redis.ResponseError("ERR syntax")), Outage("t"))
    stop = threading.Event()
    stop.set()
    with pytest.raises(BrokerUnavailable, match="stopped"):
        ride_out(lambda: (_ for _ in ()).throw(redis.ConnectionError("down")), Outage("t"), stop=stop)


def test_the_same_connection_object_works_again_after_a_real_restart(tmp_path: Path) -> None:
    server = EmbeddedServer(tmp_path, fsync="always").start()
    restart = threading.Timer(0.5, server.start)
    try:
        r = redis.Redis.from_url(server.url, socket_timeout=1.0, socket_connect_timeout=0.5)
        r.set("k", "v")
        outage = Outage("t", base_s=0.02, cap_s=0.2)
        server.kill()
        restart.start()
        t0 = time.monotonic()
        assert ride_out(lambda: r.get("k"), outage) == b"v"  # from the AOF, on the same client object
        assert 0.4 < time.monotonic() - t0 < 10 and outage.outages == 1
        r.close()
    finally:
        # The client can get its answer before the restarting thread's own ping does: stopping the
        # server under that thread made it raise "exited with code 0" into a later test.
        if restart.is_alive():
            restart.join(15)
        server.stop()
