"""The embedded server's unix socket: where it is, who may open it, and that it goes with the server."""

from __future__ import annotations

import stat
from pathlib import Path

import redis

from adaserve.embedded import MAX_SOCKET_PATH, EmbeddedServer


def _round_trip(url: str) -> None:
    r = redis.Redis.from_url(url)
    try:
        eid = r.xadd("s", {"b": b"x" * 200_000})
        assert r.xrange("s", eid, eid)[0][1][b"b"] == b"x" * 200_000
    finally:
        r.close()


def test_the_server_listens_on_a_socket_beside_its_data_that_only_its_user_may_open(tmp_path: Path) -> None:
    with EmbeddedServer(tmp_path / "server", persist=False) as server:
        assert server.socket_path == tmp_path.resolve() / "server" / "server.sock"
        assert server.local_url == f"unix://{server.socket_path}?db=0"
        mode = server.socket_path.stat().st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o700
        _round_trip(server.local_url)
        _round_trip(server.url)  # TCP still serves apps that cannot reach the file
    assert not server.socket_path.exists()


def test_a_data_folder_too_deep_for_a_socket_path_gets_a_private_temporary_one(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    with EmbeddedServer(deep, persist=False) as server:
        assert server.socket_path is not None
        assert not server.socket_path.is_relative_to(deep)
        assert len(str(server.socket_path)) <= MAX_SOCKET_PATH
        assert stat.S_IMODE(server.socket_path.parent.stat().st_mode) == 0o700
        _round_trip(server.local_url)
    assert not server.socket_path.parent.exists()  # removed with the server


def test_a_data_folder_with_characters_a_url_reserves_is_reached_through_its_quoted_path(tmp_path: Path) -> None:
    with EmbeddedServer(tmp_path / "my data #1 ?x", persist=False) as server:
        assert server.socket_path is not None and server.socket_path.parent.name == "my data #1 ?x"
        _round_trip(server.local_url)


def test_a_crashed_server_restarts_on_the_same_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    server = EmbeddedServer(deep, fsync="always").start()
    try:
        url = server.local_url
        r = redis.Redis.from_url(url)
        r.set("kept", "1")
        server.kill()
        server.start()
        assert server.local_url == url and r.get("kept") == b"1"  # the old client reconnects
        r.close()
    finally:
        server.stop()


def test_without_a_socket_the_local_url_is_the_tcp_one(tmp_path: Path) -> None:
    with EmbeddedServer(tmp_path, persist=False, unix_socket=False) as server:
        assert server.socket_path is None and server.local_url == server.url
        assert not list(tmp_path.glob("*.sock"))
