"""Every exception adaserve raises, in one place.

    AdaserveError                 base of all of them
    ├── ConfigError               settings, options or arguments that do not validate (raised at
    │   │                         construction); a CLI prints it as one line and exits with 2
    │   └── InvalidArgument       a value a user chose that names nothing known or lies out of
    │                             range: a trace, an arrival pattern or rate, a device, a workload
    │                             (also a ``ValueError``)
    ├── DataError                 a file, trace, profile or run's telemetry that is malformed or
    │                             lacks what the operation needs (also a ``ValueError``)
    ├── DeviceUnavailable         the device or runtime asked for cannot serve on this host: no
    │                             visible GPU, a CUDA provider that does not load (also a
    │                             ``RuntimeError``)
    ├── InvalidMessage            a message that cannot be accepted: undecodable bytes,
    │   │                         wrong schema or version, a limit exceeded, an unknown model
    │   └── LimitExceeded         a producer-controlled size above its configured limit
    ├── InputError                a request whose tensors do not fit the model the worker runs
    │                             (names, shape, dtype, prompt length); that request alone
    │                             fails (also a ``ValueError``)
    ├── ServerUnsupported         the Redis-compatible server lacks a required command
    ├── BrokerUnavailable         the broker stayed unreachable longer than ADASERVE_MAX_OUTAGE_S
    │                             (shorter outages are waited out, never raised)
    ├── ModelNotFound             a model or variant with no built artifact
    ├── ModelLoadError            a built model that the runtime could not load
    ├── BuildError                a model build whose own checks failed (e.g. split != whole)
    ├── JobTimeout                ``JobHandle.result`` ran out of time before every request ended
    └── EmbeddedServerError       the embedded server could not be started

The rule: whatever a user or an operator can cause (an environment variable, a command-line
value, a file, a message on the wire, the host's devices) raises an ``AdaserveError`` with a
message that says what to change, so that every CLI prints it as one line and no traceback.
Builtin exceptions are left to programming errors that the calling code must fix: arguments
that a library function's caller passed out of range (a scheduler's batch sizes, a histogram's
edges) and broken internal invariants (a request ending twice in the simulator). Where a user's
value reaches such a function, the layer that took it from the user (a pydantic options model, a
CLI command, ``make_scheduler``) validates it first or converts the error. Pydantic validators
raise ``ValueError`` (or ``PydanticCustomError`` for a structured type, see
``broker.violations``) as pydantic requires; ``load_settings``, ``load_limits`` and the codec turn
the resulting ``ValidationError`` into ``ConfigError`` or ``InvalidMessage``.

``InvalidArgument``, ``DataError`` and ``InputError`` are also ``ValueError`` and ``DeviceUnavailable`` is a
``RuntimeError``, so code written against the builtins they replaced still catches them.

``InvalidMessage.reason`` is a short machine-readable code (``undecodable``, ``schema``,
``version``, ``limit``, ``unknown_model``, ...) and ``str(exc)`` the human explanation; both go
into the ``rejected`` result and the dead-letter entry.
"""

from __future__ import annotations


class AdaserveError(Exception):
    """Base class of every adaserve error."""


class ConfigError(AdaserveError):
    """Settings, options or arguments that do not validate."""


class InvalidArgument(ConfigError, ValueError):
    """A user's value that names nothing known or is out of range."""


class DataError(AdaserveError, ValueError):
    """A file or data set that is malformed or lacks what the operation needs."""


class DeviceUnavailable(AdaserveError, RuntimeError):
    """The device or runtime asked for cannot serve on this host."""


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


class InputError(AdaserveError, ValueError):
    """A request whose inputs do not fit the runner; the message says why."""


class ServerUnsupported(AdaserveError):
    """The server lacks a command adaserve needs."""


class BrokerUnavailable(AdaserveError):
    """The broker stayed unreachable past the configured longest outage."""


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
