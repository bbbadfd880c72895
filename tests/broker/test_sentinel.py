"""``redis+sentinel://`` URLs: parsed and validated at construction (pure), and a client made by
``connect`` that follows a failover of a real primary, replica and three sentinels."""

from __future__ import annotations

import os
import time

import pytest
import redis
from rq import Queue, SimpleWorker
from rq.serializers import JSONSerializer
from typer.testing import CliRunner

from adaserve.broker import connect, is_transient, load_settings
from adaserve.broker.connection import shown_url
from adaserve.broker.errors import ConfigError
from adaserve.broker.sentinel import SentinelURL, parse_sentinel_url
from adaserve.cli import app
from adaserve.embedded import free_port


@pytest.mark.parametrize(("url", "want"), [
    ("redis+sentinel://127.0.0.1:26379/mymaster", SentinelURL((("127.0.0.1", 26379),), "mymaster")),
    ("redis+sentinel://a:1,b,[::1]:3/m/4", SentinelURL((("a", 1), ("b", 26379), ("::1", 3)), "m", 4)),
    ("redis+sentinel://u:p%40ss@h:5/m", SentinelURL((("h", 5),), "m", 0, "u", "p@ss")),
    ("redis+sentinel://:secret@h:5/m/", SentinelURL((("h", 5),), "m", 0, None, "secret")),
])
def test_a_sentinel_url_names_the_sentinels_the_primary_and_the_credentials(url: str, want: SentinelURL) -> None:
    assert parse_sentinel_url(url) == want


@pytest.mark.parametrize(("url", "says"), [
    ("redis+sentinel://h:1", "needs the primary's name"),
    ("redis+sentinel:///m", "needs at least one host:port"),
    ("redis+sentinel://h:1,,h:2/m", "empty host"),
    ("redis+sentinel://h:99999/m", "bad port '99999'"),
    ("redis+sentinel://h:1/m/x", "must be a number"),
    ("redis+sentinel://h:1/m/0/extra", "/<primary-name>[/db]"),
    ("redis+sentinel://h:1/m?db=1", "no query string"),
])
def test_a_malformed_sentinel_url_is_one_line_that_never_shows_the_password(url: str, says: str) -> None:
    url = url.replace("//", "//user:hunter2@", 1)
    with pytest.raises(ConfigError) as caught:
        load_settings(redis_url=url)
    msg = str(caught.value)
    assert msg.startswith("invalid adaserve settings: ADASERVE_REDIS_URL: ") and says in msg, msg
    assert "hunter2" not in msg and "\n" not in msg


def test_the_settings_name_the_sentinel_scheme_among_the_accepted_ones() -> None:
    with pytest.raises(ConfigError, match=r"redis\+sentinel://"):
        load_settings(redis_url="http://h:1/m")


def test_sentinels_that_cannot_be_reached_are_one_line_from_the_cli(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    for name in [n for n in os.environ if n.startswith("ADASERVE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("ADASERVE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ADASERVE_REDIS_URL", f"redis+sentinel://:hunter2@127.0.0.1:{free_port()},127.0.0.1:1/m")
    monkeypatch.setenv("COLUMNS", "60")
    result = CliRunner().invoke(app, ["stats"])
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "hunter2" not in lines[0], result.output
    assert lines[0].startswith("error: cannot reach the server (ADASERVE_REDIS_URL): none of the sentinels at 127.0.0.1:"), lines


def test_a_primary_name_the_sentinels_do_not_know_is_said_so(sentinel_group) -> None:
    url = sentinel_group.url.replace("/ada-primary/", "/no-such-primary/")
    r = connect(load_settings(redis_url=url))
    with pytest.raises(redis.ConnectionError) as caught:
        r.ping()
    r.close()
    assert str(caught.value).endswith("watch no primary named 'no-such-primary'"), caught.value


def test_a_client_follows_a_failover_to_the_replica(sentinel_group) -> None:
    """A planned failover (SENTINEL FAILOVER) leaves the old primary up as a replica: the client's
    next write there gets READONLY, which must become "ask the sentinels again", not a failure.
    The first sentinel of the URL is down throughout: the client asks the next."""
    sentinel_group.sentinels[0].kill()
    settings = load_settings(redis_url=sentinel_group.url, namespace="sen")
    r = connect(settings)
    try:
        r.set("k", "before")
        first = sentinel_group.primary_port()
        assert first == sentinel_group.primary.port
        sentinel = redis.Redis(port=sentinel_group.sentinels[1].port, socket_timeout=2)
        sentinel.execute_command("SENTINEL", "FAILOVER", "ada-primary")
        sentinel.close()
        deadline = time.monotonic() + 20
        old = sentinel_group.data_node(first)
        # Until the old primary is told it is a replica it still takes writes, which it then
        # drops on resync: the window of lost writes a failover has (docs/broker-faults.md).
        while sentinel_group.primary_port() == first or old.info("replication")["role"] != "slave":
            assert time.monotonic() < deadline, "the sentinels did not fail over"
            time.sleep(0.1)
        old.close()
        while True:  # what every adaserve loop does: a transient error is retried
            try:
                r.set("k", "after")
                break
            except redis.RedisError as exc:
                assert is_transient(exc), exc
                assert time.monotonic() < deadline, f"no write reached the new primary ({exc})"
                time.sleep(0.1)
        direct = sentinel_group.data_node(sentinel_group.replica.port)
        assert direct.get("k") == b"after"  # the write went to the promoted replica
        assert direct.info("replication")["role"] == "master"
        direct.close()
        # rq (the profiler's queue, ORLOJ's re-runs) is handed the same kind of client: it follows too.
        q = Queue("sen-rq", connection=r, serializer=JSONSerializer)
        job = q.enqueue("operator.add", 2, 3)
        assert SimpleWorker([q], connection=r, serializer=JSONSerializer).work(burst=True)
        assert job.get_status(refresh=True) == "finished" and job.return_value() == 5
    finally:
        r.close()


def test_a_sentinel_url_shown_in_a_message_hides_its_password() -> None:
    assert shown_url("redis+sentinel://u:hunter2@a:1,b:2/m/0") == "redis+sentinel://u:***@a:1,b:2/m/0"
