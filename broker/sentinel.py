"""``redis+sentinel://`` URLs: which sentinels to ask, for which primary, with which credentials.

The form is ``redis+sentinel://[user:password@]host1:port1[,host2:port2...]/<primary-name>[/db]``.
The credentials are those of the primary (and its replicas); the sentinels are asked without
them, as Redis Sentinel is usually deployed. Parsing is kept apart from connecting so that the
settings validator can reject a malformed URL at construction, before any socket is opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

SCHEME = "redis+sentinel://"
DEFAULT_PORT = 26379
_MAX_SENTINELS = 32


@dataclass(frozen=True)
class SentinelURL:
    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None


def is_sentinel_url(url: str) -> bool:
    return url.startswith(SCHEME)


def parse_sentinel_url(url: str) -> SentinelURL:
    """The parts of a sentinel URL; ``ValueError`` with a one-line reason when one is wrong.
    The message never repeats the URL, which may hold a password."""
    if not is_sentinel_url(url):
        raise ValueError(f"a sentinel URL starts with {SCHEME}")
    rest = url[len(SCHEME):]
    if "?" in rest or "#" in rest:
        raise ValueError("a sentinel URL takes no query string or fragment")
    netloc, _, path = rest.partition("/")
    username = password = None
    if "@" in netloc:
        auth, _, netloc = netloc.rpartition("@")
        user, colon, pw = auth.partition(":")
        username = unquote(user) or None
        password = unquote(pw) if colon else None
    if not netloc:
        raise ValueError("a sentinel URL needs at least one host:port before the primary's name")
    hosts = [_host_port(part) for part in netloc.split(",")]
    if len(hosts) > _MAX_SENTINELS:
        raise ValueError(f"a sentinel URL may list at most {_MAX_SENTINELS} sentinels")
    parts = path.split("/") if path else []
    if not parts or not parts[0]:
        raise ValueError("a sentinel URL needs the primary's name as its path (…/mymaster)")
    if len(parts) > 2:
        raise ValueError("a sentinel URL's path is /<primary-name>[/db]")
    db = 0
    if len(parts) == 2 and parts[1]:
        if not parts[1].isdigit():
            raise ValueError(f"the database in a sentinel URL must be a number, not {parts[1]!r}")
        db = int(parts[1])
    return SentinelURL(tuple(hosts), unquote(parts[0]), db, username, password)


def _host_port(part: str) -> tuple[str, int]:
    if not part:
        raise ValueError("a sentinel URL has an empty host in its list (two commas, or a trailing one)")
    if part.startswith("["):  # an IPv6 literal: [::1]:26379
        host, _, tail = part[1:].partition("]")
        port_s = tail.removeprefix(":")
    else:
        host, _, port_s = part.rpartition(":") if ":" in part else (part, "", "")
    if not host:
        raise ValueError(f"a sentinel URL has a port with no host ({part!r})")
    if not port_s:
        return host, DEFAULT_PORT
    if not port_s.isdigit() or not 0 < int(port_s) < 65536:
        raise ValueError(f"a sentinel URL has a bad port {port_s!r}")
    return host, int(port_s)
