"""Round trips on one held connection, for the few commands each process sends per job.

redis-py wraps every command in a pool checkout and return, a retry closure, observability
hooks and argument checks: measured on this machine, about 10 µs of CPU per command beyond the
socket's own cost, paid on every read of the planner's loop, the worker's reader and finaliser,
and the SDK's submissions and reply reads (docs/overhead.md, seventh round). A ``Direct`` takes
one connection from the client's pool once and packs, sends and reads on it; replies come back
as the server sent them (no response callbacks), so its callers parse what they use.

One user at a time: a process's single loop, or callers that take turns under their own lock.
Failures are met as redis-py meets them: before a command goes out, a socket the server closed
is made again (the pool's check of a connection it hands out); a connection error or timeout
drops the socket, sends again as far as the connection's ``retry`` allows (none, as adaserve
connects), and raises ``ConnectionError`` or ``TimeoutError``, so the callers' outage handling
is unchanged. A new socket is made through the connection's own ``connect`` (TLS, Sentinel,
AUTH as configured for the pool). Any other failure also drops the socket (redis-py's
``read_response`` does), so a reply left unread never answers a later command.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
from hiredis import pack_command as _hiredis_pack  # a dependency (redis[hiredis]), as redis-py's packer uses it
from redis.connection import HiredisRespSerializer as _HiredisPacker

__all__ = ["Direct"]

Command = Sequence[Any]
# Options of a queued command that change how its reply is read (redis-py's NEVER_DECODE,
# EMPTY_RESPONSE): such a pipeline is left to redis-py.
_UNUSUAL = frozenset({"NEVER_DECODE", "EMPTY_RESPONSE"})
# A value this large is sent as it is, not copied into the packed command (``_pack_big``).
_BIG = 1 << 16


class Direct:
    def __init__(self, r: redis.Redis[bytes]) -> None:
        self._pool = r.connection_pool
        self._conn: Any = None
        self._fast = False  # whether the held connection packs with hiredis (``_pack``)

    def _held(self) -> Any:
        """The connection, checked as the pool checks one it hands out: a socket the server
        closed while it was idle (or one holding bytes nobody asked for) is made again before a
        command goes out on it, so no command is ever sent twice for that. The check also makes
        a dropped socket again through ``connect`` (a Sentinel connection asks the sentinels
        where the primary is now), where redis-py's send path would reuse the old address."""
        conn = self._conn
        if conn is None:
            conn = self._conn = self._pool.get_connection()
            packer = getattr(conn, "_command_packer", None)
            self._fast = type(packer) is _HiredisPacker
            return conn
        try:
            if conn.can_read():
                raise redis.ConnectionError("the connection has data or was closed")
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            conn.disconnect()
            conn.connect()
        return conn

    def call(self, *args: Any) -> Any:
        """One command; an error reply raises (``ResponseError`` and its kinds, as redis-py's)."""
        conn = self._held()
        packed = self._pack(conn, args)

        def once() -> Any:
            conn.send_packed_command(packed)
            return conn.read_response()
        return conn.retry.call_with_retry(once, _dropped(conn))

    def calls(self, commands: Sequence[Command]) -> list[Any]:
        """Several commands in one round trip; an error reply is returned in its place (as
        redis-py's ``execute(raise_on_error=False)`` does), any other failure raises."""
        if not commands:
            return []
        conn = self._held()
        packed = self._pack_all(conn, commands)

        def once() -> list[Any]:
            conn.send_packed_command(packed)
            out: list[Any] = []
            for _ in commands:
                try:
                    out.append(conn.read_response())
                except redis.ResponseError as exc:
                    out.append(exc)
            return out
        replies: list[Any] = conn.retry.call_with_retry(once, _dropped(conn))
        return replies

    def execute(self, pipe: redis.client.Pipeline[bytes], *, raise_on_error: bool = True) -> list[Any]:
        """What ``pipe.execute`` returns, the queued commands sent on the held connection: the
        replies pass redis-py's response callbacks, as in a pipeline, and the pipeline is emptied.
        A pipeline this does not mirror (a transaction, registered scripts, options that change
        how a reply is read) runs as redis-py runs it."""
        stack = pipe.command_stack
        if pipe.transaction or pipe.scripts or any(_UNUSUAL & options.keys() for _, options in stack):
            return list(pipe.execute(raise_on_error=raise_on_error))
        try:
            replies = self.calls([args for args, _ in stack])
        finally:
            pipe.reset()
        callbacks = pipe.response_callbacks
        for i, ((args, options), reply) in enumerate(zip(stack, replies)):
            if isinstance(reply, Exception):
                if raise_on_error:
                    pipe.annotate_exception(reply, i + 1, args)
                    raise reply
                continue
            callback = callbacks.get(args[0])
            if callback is not None:
                options = {k: v for k, v in options.items() if k != "keys"}  # redis-py's, for its cache
                replies[i] = callback(reply, **options)
        return replies

    def _pack(self, conn: Any, args: Sequence[Any]) -> Any:
        """``conn.pack_command(*args)``'s bytes, packed by hiredis in one C call. redis-py's
        hiredis packer makes the same call after passing every argument through a Python
        generator (to turn buffers into bytes): it packed a finaliser call of 111 arguments in
        24.4 µs where hiredis alone takes 10.5, a group read in 3.4 against 0.9 (docs/overhead.md,
        ninth round). A command name of several words (``XINFO GROUPS``) is split as redis-py
        splits it; anything hiredis refuses (a bytearray, a bool) goes through redis-py, which
        converts it or raises its own error."""
        if not self._fast:
            return conn.pack_command(*args)
        first = args[0]
        if type(first) is str:
            head = tuple(first.encode().split()) if " " in first else (first,)
        elif type(first) is bytes:
            head = tuple(first.split()) if b" " in first else (first,)
        else:
            return conn.pack_command(*args)
        last = args[-1]
        if type(last) is bytes and len(last) >= _BIG:
            pieces = _pack_big(head + tuple(args[1:]))
            if pieces is not None:
                return pieces
        try:
            return [_hiredis_pack(head + tuple(args[1:]))]
        except TypeError:
            return conn.pack_command(*args)

    def _pack_all(self, conn: Any, commands: Sequence[Command]) -> Any:
        """``conn.pack_commands(commands)``: each command packed by ``_pack``, the small ones
        joined into one buffer and a large one (a batch's tensors) left a piece of its own, not
        copied again, as redis-py's pieces are."""
        if not self._fast:
            return conn.pack_commands(commands)
        cutoff = getattr(conn, "_buffer_cutoff", 6000)
        out: list[bytes] = []
        pieces: list[bytes] = []
        size = 0
        for args in commands:
            for chunk in self._pack(conn, args):
                if len(chunk) > cutoff:
                    if pieces:
                        out.append(b"".join(pieces))
                        pieces, size = [], 0
                    out.append(chunk)
                    continue
                pieces.append(chunk)
                size += len(chunk)
                if size > cutoff:
                    out.append(b"".join(pieces))
                    pieces, size = [], 0
        if pieces:
            out.append(b"".join(pieces))
        return out

    def close(self) -> None:
        """Give the connection back to the pool (a later call takes one again)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool.release(conn)


def _pack_big(args: tuple[Any, ...]) -> list[bytes] | None:
    """The command's RESP bytes in pieces, a large value (a job's or a batch's tensors, always
    the last argument of its XADD) a piece of its own, sent as it is: hiredis copies every byte
    into the command's buffer, a copy of 4.8 MB for a job of eight photos. Each argument is
    encoded as redis-py encodes it; None when one is of a type this does not take (the caller
    then packs as before)."""
    out: list[bytes] = []
    buf = bytearray(b"*%d\r\n" % len(args))
    for a in args:
        t = type(a)
        if t is bytes:
            b = a
        elif t is str:
            b = a.encode()
        elif t is int:
            b = b"%d" % a
        elif t is float:
            b = repr(a).encode()
        else:
            return None
        buf += b"$%d\r\n" % len(b)
        if len(b) >= _BIG:
            out += (bytes(buf), b)
            buf = bytearray(b"\r\n")
        else:
            buf += b
            buf += b"\r\n"
    out.append(bytes(buf))
    return out


def _dropped(conn: Any) -> Any:
    """What a failed try does before the next: drop the socket, whose state is unknown."""
    def fail(_error: Exception) -> None:
        conn.disconnect()
    return fail
