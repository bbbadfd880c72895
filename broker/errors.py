"""Every exception adaserve raises, in one place.

    AdaserveError                 base of all of them
    ├── ConfigError               settings that do not validate (raised at construction)
    ├── InvalidMessage            a message that cannot be accepted: undecodable bytes,
    │   │                         wrong schema or version, a limit exceeded, an unknown model
    │   └── LimitExceeded         a producer-controlled size above its configured limit
    ├── ServerUnsupported         the Redis-compatible server lacks a required command
    ├── ModelNotFound             a model or variant with no built artifact
    ├── ModelLoadError            a built model that the runtime could not load
    ├── BuildError                a model build whose own checks failed (e.g. split != whole)
    ├── JobTimeout                ``JobHandle.result`` ran out of time before every request ended
    └── EmbeddedServerError       the embedded server could not be started

``InvalidMessage.reason`` is a short machine-readable code (``undecodable``, ``schema``,
``version``, ``limit``, ``unknown_model``, ...) and ``str(exc)`` the human explanation; both go
into the ``rejected`` result and the dead-letter entry.
"""

from __future__ import annotations


class AdaserveError(Exception):
    """Base class of every adaserve error."""


class ConfigError(AdaserveError):
    """Settings that do not validate."""


class InvalidMessage(AdaserveError):
    """A message that cannot be accepted; ``reason`` is a short code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class LimitExceeded(InvalidMessage):
    """A producer-controlled size above its limit."""

    def __init__(self, detail: str) -> None:
        super().__init__("limit", detail)


class ServerUnsupported(AdaserveError):
    """The server lacks a command adaserve needs."""


class ModelNotFound(AdaserveError):
    """No built artifact for a model or variant."""


class ModelLoadError(AdaserveError):
    """A built model the runtime failed to load (corrupt artifact, missing provider, ...)."""


class BuildError(AdaserveError):
    """A model build that produced artifacts failing its own verification."""


class JobTimeout(AdaserveError):
    """Waiting for a job's results ran out of time."""


class EmbeddedServerError(AdaserveError):
    """The embedded Redis-compatible server could not be started."""
