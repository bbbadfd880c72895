"""Every Redis connection adaserve makes: plain, TLS (``rediss://``) or through Redis Sentinel
(``redis+sentinel://``), with timeouts that suit blocking stream reads.

Nothing else in the tree builds a client from the URL, so TLS and Sentinel apply to every
process and tool alike (rq's queues and workers are handed a client made here too).
"""

from __future__ import annotations

import ssl
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel

from adaserve.broker.errors import ConfigError
from adaserve.broker.sentinel import is_sentinel_url, parse_sentinel_url
from adaserve.broker.settings import Settings

__all__ = ["connect", "shown_url", "tls_untrusted"]

# Asking a sentinel where the primary is takes one short round trip; a sentinel host that is down
# should cost the next one in the list little, not the 5 s a primary gets to accept a connection.
_SENTINEL_TIMEOUT_S = 1.0


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
    options: dict[str, Any] = dict(
        socket_timeout=block / 1000.0 + 1.0,
        socket_connect_timeout=5.0,
        health_check_interval=30,
        decode_responses=False,
    )
    if is_sentinel_url(settings.redis_url):
        return _through_sentinel(settings.redis_url, options)
    if settings.redis_url.startswith("rediss://"):
        options.update(connection_class=_TLSConnection, ssl_cert_reqs="required", ssl_ca_certs=_path(settings.tls_ca_file),
                       ssl_certfile=_path(settings.tls_cert_file), ssl_keyfile=_path(settings.tls_key_file))
    return redis.Redis.from_url(settings.redis_url, **options)


def _through_sentinel(url: str, options: dict[str, Any]) -> redis.Redis[bytes]:
    """A client of whichever server the sentinels name as the primary now. redis-py's sentinel
    pool asks them again whenever a connection breaks, and turns READONLY from a demoted primary
    into a connection error, so the callers' outage handling is all a failover needs."""
    parsed = parse_sentinel_url(url)
    # No retries of a sentinel query: redis-py's default (ten, backing off to a second) would spend
    # seconds on each dead sentinel before asking the next; the callers' outage loop retries.
    manager = _Sentinels(list(parsed.sentinels), sentinel_kwargs={
        "socket_timeout": _SENTINEL_TIMEOUT_S, "socket_connect_timeout": _SENTINEL_TIMEOUT_S,
        "retry": Retry(NoBackoff(), 0)})
    client: redis.Redis[bytes] = manager.master_for(
        parsed.service, redis_class=_SentinelClient, db=parsed.db, username=parsed.username,
        password=parsed.password, **options)
    return client


class _Sentinels(Sentinel):  # type: ignore[misc]  # redis is untyped here (Any)
    """Says in one line an operator can act on why no primary was found, where redis-py lists
    the repr of every sentinel client it tried."""

    def discover_master(self, service_name: str) -> tuple[str, int]:
        try:
            found: tuple[str, int] = super().discover_master(service_name)
        except MasterNotFoundError:
            raise MasterNotFoundError(self._why(service_name)) from None
        return found

    def _why(self, name: str) -> str:
        where = ", ".join("{host}:{port}".format_map(s.connection_pool.connection_kwargs) for s in self.sentinels)
        states, errors = [], []
        for s in self.sentinels:
            try:
                states.append(s.sentinel_masters().get(name))
            except redis.RedisError as exc:
                errors.append(exc)
        if not states:
            return f"none of the sentinels at {where} answered ({errors[0]})"
        if not any(states):
            return f"the sentinels at {where} watch no primary named {name!r}"
        return f"the sentinels at {where} see the primary {name!r} as down (a failover may be under way)"


class _SentinelClient(redis.Redis):  # type: ignore[misc]  # redis is untyped here (Any)
    """Closes the connections to the sentinels with the client's own."""

    def close(self) -> None:
        try:
            super().close()
        finally:
            manager = getattr(self.connection_pool, "sentinel_manager", None)
            if manager is not None:
                manager.close()


class _TLSConnection(redis.SSLConnection):  # type: ignore[misc]  # redis is untyped here (Any)
    """Says in so many words that the server's certificate was not trusted, and by which setting
    that is fixed, where redis-py would print only the SSL library's reason."""

    def _error_message(self, exception: BaseException) -> str:
        if isinstance(exception, ssl.SSLCertVerificationError):
            return (f"TLS: the certificate of {self.host}:{self.port} is not trusted "
                    f"({exception.verify_message}); check ADASERVE_TLS_CA_FILE")
        return str(super()._error_message(exception))


def tls_untrusted(exc: BaseException) -> bool:
    """A connection error caused by a server certificate that failed verification."""
    seen: BaseException | None = exc
    for _ in range(8):  # the chain is short; bounded all the same
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _path(p: object) -> str | None:
    return None if p is None else str(p)
