"""``Direct``: the same replies as redis-py's client and pipeline, on one held connection, and the
same recovery from a dropped socket; the stream reads give the entries redis-py's give."""

import pytest
import redis

from adaserve.broker import Keys, Settings, streams
from adaserve.broker.direct import Direct


def test_a_call_answers_as_the_server_does_and_an_error_reply_raises_its_kind(r: "redis.Redis[bytes]",
                                                                             settings: Settings) -> None:
    d = Direct(r)
    key = Keys(settings.namespace).job("j")
    assert d.call("HSET", key, "a", "1") == 1
    assert d.call("HGET", key, "a") == b"1"
    with pytest.raises(redis.exceptions.NoScriptError):
        d.call("EVALSHA", "0" * 40, 0)
    assert d.call("HGET", key, "a") == b"1"  # the error reply was read whole: the next reply is its own


def test_calls_keep_an_error_reply_in_its_place(r: "redis.Redis[bytes]", settings: Settings) -> None:
    d = Direct(r)
    k = Keys(settings.namespace)
    r.hset(k.job("j"), "a", "1")
    got = d.calls([("XADD", k.telemetry, "*", "m", b"x"), ("XLEN", k.job("j")), ("HGET", k.job("j"), "a")])
    assert isinstance(got[0], bytes) and isinstance(got[1], redis.ResponseError) and got[2] == b"1"
    assert d.calls([]) == []


def _queue(p: "redis.client.Pipeline[bytes]", k: Keys, stream: str, name: str) -> None:
    p.xadd(stream, {b"m": b"one"}, maxlen=100, approximate=True)
    p.xinfo_groups(stream)
    p.xread({stream: "0-0"}, count=10)
    p.hset(k.job(name), mapping={"a": "1", "b": "2"})
    p.hgetall(k.job(name))
    p.xack(stream, "g", "1-0")
    p.xlen(k.job(name))  # an error reply, kept in place


def test_a_pipeline_run_directly_returns_what_redis_py_returns(r: "redis.Redis[bytes]", settings: Settings) -> None:
    k = Keys(settings.namespace)
    d = Direct(r)
    for stream in (k.batches("a"), k.batches("b")):  # the same commands on two alike streams
        streams.ensure_group(r, stream, "g")
    p = r.pipeline(transaction=False)
    _queue(p, k, k.batches("a"), "a")
    theirs = p.execute(raise_on_error=False)
    q = r.pipeline(transaction=False)
    _queue(q, k, k.batches("b"), "b")
    ours = d.execute(q, raise_on_error=False)
    assert len(q) == 0  # emptied, as after redis-py's execute
    assert isinstance(theirs[-1], redis.ResponseError) and isinstance(ours[-1], redis.ResponseError)
    # the same shapes: ids, the groups as maps, the entries read, counts
    assert [type(x) for x in ours] == [type(x) for x in theirs]
    assert ours[1] == [dict(g) for g in theirs[1]]
    assert [(m[0], dict(m[1])) for _, msgs in ours[2] for m in msgs] == [
        (ours[0], {b"m": b"one"})] and ours[3:6] == theirs[3:6]
    q.xlen(k.job("b"))
    with pytest.raises(redis.ResponseError, match="Command # 1"):
        d.execute(q)


def test_a_transaction_is_left_to_redis_py(r: "redis.Redis[bytes]", settings: Settings) -> None:
    key = Keys(settings.namespace).job("t")
    p = r.pipeline(transaction=True)
    p.incr(key)
    p.incr(key)
    assert Direct(r).execute(p) == [1, 2]


@pytest.mark.parametrize("protocol", [2, 3])
def test_stream_reads_give_the_entries_redis_py_gives(settings: Settings, protocol: int) -> None:
    client = redis.Redis.from_url(settings.redis_url, protocol=protocol)
    try:
        d = Direct(client)
        stream = Keys(settings.namespace).batches(f"p{protocol}")
        streams.ensure_group(client, stream, "g")
        first = streams.publish(d, stream, b"one", 100)
        streams.publish(client, stream, b"two")
        client.xadd(stream, {"other": b"field"})  # no ``m``: raw None
        mine = streams.read_group(d, [stream], "g", "c", count=10)
        assert [(e.id, e.raw) for e in mine][:2] == [(first, b"one"), (mine[1].id, b"two")] and mine[2].raw is None
        assert streams.read(d, {stream: "0-0"}) == streams.read(client, {stream: "0-0"})
        client.xdel(stream, first)  # deleted while pending: its fields come back nil
        again = streams.read_group(d, {stream: "0"}, "g", "c", count=10)
        assert again == streams.read_group(client, {stream: "0"}, "g", "c", count=10)
        assert again[0].raw is None
        assert streams.read_group(d, [stream], "g", "c", block_ms=5) == []
    finally:
        client.close()


def test_a_dropped_connection_is_made_again_as_redis_py_makes_it(r: "redis.Redis[bytes]", settings: Settings) -> None:
    d = Direct(r)
    key = Keys(settings.namespace).job("k")
    r.set(key, b"v")
    own = d.call("CLIENT", "ID")
    r.client_kill_filter(_id=own)
    assert d.call("GET", key) == b"v"  # sent again on a new socket
    assert d.call("CLIENT", "ID") != own
    d.close()
    assert d.call("GET", key) == b"v"  # a closed Direct takes a connection again


_COMMANDS = [
    ("XADD", "s", "MAXLEN", "~", 100_000, "*", "m", b"\x00" * 9000),  # a value above the buffer cutoff
    ("XREADGROUP", "GROUP", "g", "c", "COUNT", 2, "BLOCK", 500, "STREAMS", "s", ">"),
    ("XINFO GROUPS", "s"),  # a command name of two words, split as redis-py splits it
    (b"XINFO CONSUMERS", "s", "g"),
    ("HSET", "k", "é", 1.5, "b", -3, "c", 10**20, "d", 1e300, "e", 0.1),
    ("XADD", "s", "*", "m", memoryview(b"abc")),
    ("XADD", "s", "*", "m", bytearray(b"abc")),  # what hiredis refuses goes through redis-py
]


def test_commands_are_packed_into_the_bytes_redis_py_packs(r: "redis.Redis[bytes]") -> None:
    d = Direct(r)
    conn = d._held()
    assert d._fast  # adaserve installs hiredis: the packing under test is the one in use
    for args in _COMMANDS:
        assert b"".join(d._pack(conn, args)) == b"".join(conn.pack_command(*args)), args
    for n in (1, 2, len(_COMMANDS), 3 * len(_COMMANDS)):
        cmds = (_COMMANDS * 3)[:n]
        assert b"".join(d._pack_all(conn, cmds)) == b"".join(conn.pack_commands(cmds))
    # the large value travels as a piece of its own, not copied into a joined buffer
    assert any(len(p) > 9000 and p.endswith(b"\x00" * 9000 + b"\r\n") for p in d._pack_all(conn, _COMMANDS))
    with pytest.raises(redis.DataError):  # a value neither packer takes raises redis-py's error
        d._pack(conn, ("SET", "k", object()))


def test_a_large_last_value_is_sent_as_it_is_not_copied(r: "redis.Redis[bytes]", settings: Settings) -> None:
    d = Direct(r)
    conn = d._held()
    big = bytes(range(256)) * 400 + b"\r\n$3\r\n"  # 102 kB, RESP's own bytes inside
    for args in (("XADD", "s", "MAXLEN", "~", 1000, "*", "m", big), ("XADD", "s", "*", "é", 1.5, "n", -3, "m", big),
                 ("XADD", "s", "*", "m", big[:1 << 16])):
        pieces = d._pack(conn, args)
        assert b"".join(pieces) == b"".join(conn.pack_command(*args)), args
        assert any(p is args[-1] for p in pieces)  # the value itself: no copy
    assert any(p is big for p in d._pack_all(conn, [("HGET", "k", "f"), ("XADD", "s", "*", "m", big)]))
    small = d._pack(conn, ("XADD", "s", "*", "m", big[:1000]))
    assert len(small) == 1 and small[0] is not big
    with pytest.raises(redis.DataError):  # an argument the piece packer does not take: as before
        d._pack(conn, ("XADD", "s", "*", "m", True, "x", big))
    stream = Keys(settings.namespace).job("large")
    eid = d.call("XADD", stream, "*", "m", big)
    assert r.xrange(stream) == [(eid, {b"m": big})]


def test_packed_commands_reach_the_server_whole(r: "redis.Redis[bytes]", settings: Settings) -> None:
    d = Direct(r)
    key = Keys(settings.namespace).job("packed")
    got = d.calls([("HSET", key, "é", 1.5, "big", b"\x01" * 70_000), ("HGET", key, "é"), ("HSTRLEN", key, "big"),
                   ("XINFO GROUPS", key)])
    assert got[:3] == [2, b"1.5", 70_000] and isinstance(got[3], redis.ResponseError)  # not a stream
    assert d.call("HGET", key, "big") == b"\x01" * 70_000
