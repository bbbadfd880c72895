"""Redis connections with timeouts that suit blocking stream reads."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import redis

from adaserve.broker.errors import ConfigError
from adaserve.broker.settings import Settings


def shown_url(url: str) -> str:
    """``url`` fit for a log line or an error: its password (an ACL user's secret) replaced."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def connect(settings: Settings, *, block_ms: int | None = None) -> redis.Redis[bytes]:
    """A client whose socket timeout outlives the longest BLOCK it will be used with.

    A socket timeout shorter than XREADGROUP's BLOCK would turn every quiet read into a
    ``TimeoutError``; one second of margin covers scheduling jitter on a loaded host.
    """
    if not settings.redis_url:
        raise ConfigError("no Redis URL: set ADASERVE_REDIS_URL or use `adaserve up`, which starts one")
    block = settings.block_ms if block_ms is None else block_ms
    return redis.Redis.from_url(
        settings.redis_url,
        socket_timeout=block / 1000.0 + 1.0,
        socket_connect_timeout=5.0,
        health_check_interval=30,
        decode_responses=False,
    )
