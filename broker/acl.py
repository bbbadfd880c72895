"""Redis ACL rules, one role per kind of process, built from a namespace's key templates.

A role grants the commands its processes send and the keys they touch, and nothing else: a
producer may add jobs and read its own reply stream only, a worker never reads the ingress
stream, a reader only reads. Commands that scripts run are checked against the same rules, so a
role that calls the finaliser holds the commands the script runs as well. ``docs/security.md``
says which process uses which role and how to load the rules.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from adaserve.broker.errors import ConfigError
from adaserve.broker.keys import RQ_KEYS, Keys, rq_enqueue_patterns

ROLES = ("producer", "planner", "worker", "profiler", "reader")
FORMATS = ("acl-file", "commands")

_NAMESPACE = re.compile(r"^[A-Za-z0-9_\-]{1,32}$")
_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
# Client ids may hold these (``producers.client``); none of them is special in a key pattern.
_PREFIX = re.compile(r"^[A-Za-z0-9_.:\-]{1,64}$")

# Every connection: redis-py names its library on connect (CLIENT SETINFO, which Redis 7.0 lacks:
# naming it would make the rules fail to load there) and pings to check the socket. The category
# holds only commands about the caller's own connection once the dangerous ones are taken out.
_CONNECTION = ("@connection", "-@dangerous")
# redis-py runs a registered script by its SHA and loads it when the server lacks it; the commands
# the script runs are granted by the role.
_SCRIPTS = ("evalsha", "eval", "script|load", "script|exists")
# What the finaliser's and the registration's Lua scripts run (``broker/finalize``).
_FINALIZE = ("time", "hget", "hset", "hsetnx", "hincrby", "hmget", "expire", "xadd", "xack", "xdel")
# Group consumption and reclaim of a stream (``broker/streams``).
_CONSUME = ("xreadgroup", "xack", "xautoclaim", "xclaim", "xpending", "xgroup|create", "xinfo|groups")


@dataclass(frozen=True)
class Role:
    """One ACL user: its name, password and the rules that follow ``reset``."""

    name: str
    role: str
    password: str = field(repr=False)  # kept out of logs and tracebacks
    keys: tuple[str, ...]
    channels: tuple[str, ...]
    commands: tuple[str, ...]
    # Selectors tie commands to keys: ``(%R~k +xinfo|groups)`` allows that command on those keys
    # and no other command there (Redis 7.0+).
    selectors: tuple[str, ...] = ()

    def rules(self) -> list[str]:
        """The ACL rules in order, the password as its SHA-256 (never the text itself)."""
        digest = hashlib.sha256(self.password.encode()).hexdigest()
        out = ["reset", "on", f"#{digest}", *self.keys, *(f"&{c}" for c in self.channels)]
        return out + [c if c.startswith("-") else f"+{c}" for c in self.commands] + list(self.selectors)

    def acl_file_line(self) -> str:
        """A line of an ACL file (``aclfile`` in the server's configuration)."""
        return " ".join(["user", self.name, *self.rules()])

    def setuser_command(self) -> str:
        """The same rules as one ``ACL SETUSER`` command, e.g. for ``redis-cli``."""
        return " ".join(["ACL", "SETUSER", self.name, *self.rules()])


def _sorted(*groups: tuple[str, ...]) -> tuple[str, ...]:
    """The connection rules first (their ``-@dangerous`` must not undo a grant that follows),
    then the role's commands, sorted."""
    return (*_CONNECTION, *sorted({c for g in groups for c in g} - set(_CONNECTION)))


Grants = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]


def _grants(k: Keys, role: str, client_prefix: str) -> Grants:
    """(key patterns, channel patterns, commands, selectors) of a role."""
    keys: tuple[str, ...]
    commands: tuple[str, ...]
    if role == "producer":
        # The SDK: its reply stream read with XREAD, trimmed and deleted on close, and XADD to
        # the ingress stream, in a selector: write permission there alone would let a producer
        # DEL or XTRIM every app's jobs (``producers.client``).
        keys = (f"~{k.reply(client_prefix + '-*')}",)
        return keys, (), _sorted(_CONNECTION, ("xread", "xtrim", "del")), (f"(%W~{k.jobs} +xadd)",)
    if role == "planner":
        keys = (f"~{k.jobs}", f"~{k.batches('*')}", f"~{k.telemetry}", f"~{k.job('*')}", f"%W~{k.dead}",
                f"~{k.reply('*')}", f"%R~{k.workers}", f"~{k.planners}", f"%R~{k.profile('*')}", f"~{k.orloj_samples('*')}",
                *(f"~{p}" for p in rq_enqueue_patterns(k.rq_queue)))
        commands = ("info", "xadd", "xread", "xrevrange", "xtrim", "hgetall", "hkeys", "hdel", "get",
                    "lrange", "ltrim", "exists", "multi", "exec",
                    # rq's enqueue and its look at the queue's workers
                    "rpush", "llen", "sadd", "smembers")
        return keys, (), _sorted(_CONNECTION, _SCRIPTS, _FINALIZE, _CONSUME, commands), ()
    if role == "worker":
        # ``adaserve health --worker`` runs with the worker's user: it reads both report hashes.
        # ORLOJ's samples: the times of its idle re-runs (``workers/idle_reruns.py``), appended.
        keys = (f"~{k.batches('*')}", f"~{k.job('*')}", f"~{k.reply('*')}", f"~{k.telemetry}",
                f"%W~{k.dead}", f"~{k.workers}", f"%R~{k.planners}", f"%W~{k.orloj_samples('*')}")
        commands = ("info", "hgetall", "hdel", "hexists", "xinfo|consumers", "xgroup|delconsumer", "rpush", "ltrim")
        return keys, (), _sorted(_CONNECTION, _SCRIPTS, _FINALIZE, _CONSUME, commands), ()
    if role == "profiler":
        # An rq worker (``adaserve profiler``) and what its jobs touch: profiles, ORLOJ's samples
        # and the batches a re-run reads its request from. rq's commands change between its
        # releases, so the profiler holds whole data-type categories.
        keys = (f"~{k.profile('*')}", f"~{k.orloj_samples('*')}", f"%R~{k.batches('*')}", f"~{RQ_KEYS}")
        # Data-type categories hold a few server-wide commands (FLUSHDB, KEYS, ...): taken out again.
        commands = ("@connection", "@keyspace", "@read", "@write", "@string", "@hash", "@list", "@set",
                    "@sortedset", "@stream", "@transaction", "@pubsub", "@scripting", "-@dangerous", "info", "time")
        return keys, (RQ_KEYS,), commands, ()
    if role == "reader":
        # ``adaserve tail``, ``stats``, ``dead``, ``top`` and ``exporter``: the telemetry and
        # dead-letter streams, the report hashes, and the consumer groups' lag and pending counts
        # (XINFO GROUPS) of the jobs and batches, whose entries stay unreadable.
        keys = (f"%R~{k.telemetry}", f"%R~{k.dead}", f"%R~{k.workers}", f"%R~{k.planners}")
        groups = f"(%R~{k.jobs} %R~{k.batches('*')} +xinfo|groups)"
        return keys, (), _sorted(_CONNECTION, ("time", "xrange", "xrevrange", "xread", "xlen", "hgetall")), (groups,)
    raise ConfigError(f"unknown role {role!r}: choose one of {', '.join(ROLES)}")


def role(namespace: str, role: str, *, password: str, user: str | None = None,
         client_prefix: str | None = None) -> Role:
    """The ACL user of ``role`` in ``namespace``; the user name defaults to ``<namespace>-<role>``
    and a producer's client prefix to the user name: it may read ``reply:<prefix>-*`` only."""
    if role not in ROLES:
        raise ConfigError(f"unknown role {role!r}: choose one of {', '.join(ROLES)}")
    if not _NAMESPACE.match(namespace):
        raise ConfigError(f"namespace {namespace!r} must be 1-32 characters of [A-Za-z0-9_-]")
    name = user or f"{namespace}-{role}"
    if not _NAME.match(name):
        raise ConfigError(f"ACL user name {name!r} must be 1-64 characters of [A-Za-z0-9_.-]")
    if not password:
        raise ConfigError(f"ACL user {name!r} needs a password")
    prefix = client_prefix or name
    if not _PREFIX.match(prefix):
        raise ConfigError(f"client prefix {prefix!r} must be 1-64 characters of [A-Za-z0-9_.:-]")
    keys, channels, commands, selectors = _grants(Keys(namespace), role, prefix)
    return Role(name, role, password, keys, channels, commands, selectors)
