"""Settings, read from ``ADASERVE_*`` environment variables and validated at construction."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

from adaserve.broker.errors import ConfigError
from adaserve.broker.heap import MAX_KEEP_MB
from adaserve.broker.sentinel import SCHEME as SENTINEL_SCHEME
from adaserve.broker.sentinel import parse_sentinel_url

ALL_DTYPES = ("float32", "float16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool")


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "adaserve"


class Limits(BaseSettings):
    """Bounds on every size a producer controls; checked by the SDK and again by the planner."""

    model_config = SettingsConfigDict(env_prefix="ADASERVE_LIMIT_", frozen=True)

    max_message_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    max_requests_per_job: int = Field(1024, ge=1)
    max_tensor_elements: int = Field(1 << 20, ge=1)
    max_modalities: int = Field(8, ge=1)
    max_id_length: int = Field(128, ge=8)
    min_deadline_ms: float = Field(1.0, gt=0)
    max_deadline_ms: float = Field(3_600_000.0, gt=0)
    allowed_dtypes: tuple[str, ...] = ALL_DTYPES
    # Models whose float inputs may hold NaN or ±Inf; every other model's are rejected
    # (``non_finite``). A comma-separated list in the environment.
    allow_non_finite: Annotated[tuple[str, ...], NoDecode] = ()

    @field_validator("allow_non_finite", mode="before")
    @classmethod
    def _models(cls, v: object) -> object:
        if isinstance(v, str):
            return tuple(m.strip() for m in v.split(",") if m.strip())
        return v

    @model_validator(mode="after")
    def _check(self) -> Limits:
        if self.min_deadline_ms >= self.max_deadline_ms:
            raise ValueError(f"ADASERVE_LIMIT_MIN_DEADLINE_MS ({self.min_deadline_ms:g}) must be below "
                             f"ADASERVE_LIMIT_MAX_DEADLINE_MS ({self.max_deadline_ms:g})")
        unknown = set(self.allowed_dtypes) - set(ALL_DTYPES)
        if unknown:
            raise ValueError(f"unknown dtypes in ADASERVE_LIMIT_ALLOWED_DTYPES: {sorted(unknown)} "
                             f"(known: {', '.join(ALL_DTYPES)})")
        return self


class Settings(BaseSettings):
    """Where the server is and how adaserve names things on it.

    ``redis_url`` empty means "start the embedded server" for the commands that can
    (``adaserve up`` and ``adaserve demo``); every other command needs a URL.
    """

    model_config = SettingsConfigDict(env_prefix="ADASERVE_", frozen=True)

    redis_url: str = ""
    namespace: str = "ada"
    data_dir: Path = Field(default_factory=default_data_dir)
    block_ms: int = Field(100, ge=1, le=60_000)
    heartbeat_s: float = Field(1.0, gt=0)
    worker_ttl_s: float = Field(5.0, gt=0)
    # A batch or job idle this long in a stopped worker's or planner's hands is taken over; live
    # ones renew theirs every third of it. 3 s: a planner's SIGKILL is taken over within 5 s.
    reclaim_idle_ms: int = Field(3_000, ge=100)
    max_deliveries: int = Field(3, ge=1)
    stream_maxlen: int = Field(100_000, ge=100)
    # Jobs and batches the planner and workers are done with stay this long, then the planner
    # trims them: left to MAXLEN, 100,000 jobs of audio took 1.6 GB and the server's AOF
    # rewrites burned a core for seconds in the middle of serving (docs/orloj.md, "Live"). Kept
    # short: under overload what the ingress holds is rate x this (bench chaos, "overload").
    consumed_keep_s: float = Field(5.0, ge=1.0, le=86_400.0)
    telemetry_maxlen: int = Field(1_000_000, ge=1000)
    result_ttl_s: int = Field(3600, ge=10)
    # Longest broker outage a process waits out before it gives up; unset: wait for ever (a
    # restart, failover or network blip is never a reason for a service to exit).
    max_outage_s: float | None = Field(None, gt=0)
    # TLS (rediss:// only): the CA that signed the server's certificate (unset: the system's CAs),
    # and a client certificate and key for servers that require one (tls-auth-clients yes).
    tls_ca_file: Path | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    # The SDK's client ids start with ``<prefix>-``; empty: the user of ``redis_url`` if it names
    # one, else ``c``. A producer's ACL role may read only the reply streams of its prefix.
    client_prefix: str = ""
    # A worker's memory budget in MiB for model weights and KV cache (``adaserve worker
    # --memory-mb``), advertised in its heartbeat so a planner can size batches; unset: none given.
    worker_memory_mb: int | None = Field(None, gt=0)
    # Freed memory each planner, worker and SDK process keeps for its next messages rather than
    # returning it to the kernel, which zeroes it again page by page (``broker/heap.py``); 0: the
    # C library's defaults.
    heap_keep_mb: int = Field(64, ge=0, le=MAX_KEEP_MB)

    @field_validator("namespace")
    @classmethod
    def _ns(cls, v: str) -> str:
        if not v or len(v) > 32 or not all(c.isalnum() or c in "-_" for c in v):
            raise ValueError("namespace must be 1-32 characters of [A-Za-z0-9_-]")
        return v

    @field_validator("client_prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if len(v) > 64 or not all(c.isascii() and (c.isalnum() or c in "_.:-") for c in v):
            raise ValueError("client_prefix must be at most 64 characters of [A-Za-z0-9_.:-]")
        return v

    @field_validator("redis_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if v and not v.startswith(("redis://", "rediss://", "unix://", "valkey://", SENTINEL_SCHEME)):
            raise ValueError(f"redis_url must start with redis://, rediss://, unix://, valkey:// or {SENTINEL_SCHEME}")
        if v.startswith(SENTINEL_SCHEME):
            parse_sentinel_url(v)  # its ValueError names the part that is wrong, never the password
        return v.replace("valkey://", "redis://", 1) if v.startswith("valkey://") else v

    @field_validator("tls_ca_file", "tls_cert_file", "tls_key_file")
    @classmethod
    def _readable(cls, v: Path | None) -> Path | None:
        if v is not None and not v.is_file():
            raise ValueError("no such file" if not v.exists() else "not a file")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.worker_ttl_s <= self.heartbeat_s:
            raise ValueError(f"ADASERVE_WORKER_TTL_S ({self.worker_ttl_s:g}) must exceed "
                             f"ADASERVE_HEARTBEAT_S ({self.heartbeat_s:g})")
        tls = [n for n in ("tls_ca_file", "tls_cert_file", "tls_key_file") if getattr(self, n) is not None]
        if tls and not self.redis_url.startswith("rediss://"):
            raise ValueError(f"ADASERVE_{tls[0].upper()} is set but ADASERVE_REDIS_URL is not a rediss:// URL")
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("ADASERVE_TLS_CERT_FILE and ADASERVE_TLS_KEY_FILE go together: set both or neither")
        return self


def settings_env(settings: Settings) -> dict[str, str]:
    """The ``ADASERVE_*`` variables that give a child process these same settings."""
    return {f"ADASERVE_{name.upper()}": str(value) for name, value in settings.model_dump().items()
            if value is not None}


def load_settings(**overrides: object) -> Settings:
    """Build ``Settings`` from the environment plus overrides, raising ``ConfigError``."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except (ValidationError, SettingsError) as exc:
        raise ConfigError(f"invalid adaserve settings: {_one_line(exc, Settings)}") from None


def load_connected_settings(**overrides: object) -> Settings:
    """``load_settings`` for commands that join an existing server: a URL is required."""
    settings = load_settings(**overrides)
    if not settings.redis_url:
        raise ConfigError(
            "ADASERVE_REDIS_URL is not set: point it at the server `adaserve up` printed "
            "(e.g. export ADASERVE_REDIS_URL=redis://127.0.0.1:6379/0), or run `adaserve demo`"
        )
    return settings


def load_limits(**overrides: object) -> Limits:
    try:
        return Limits(**overrides)  # type: ignore[arg-type]
    except (ValidationError, SettingsError) as exc:
        raise ConfigError(f"invalid adaserve limits: {_one_line(exc, Limits)}") from None


@cache
def default_limits() -> Limits:
    """``load_limits()`` once per process: the limits where a caller passes none. Built on first
    use rather than at import, so a bad ``ADASERVE_LIMIT_*`` variable is a ``ConfigError`` and
    not a traceback from whichever import came first."""
    return load_limits()


_UNSHOWN = {"redis_url"}  # may hold a password: named, never echoed


def _one_line(exc: ValidationError | SettingsError, cls: type[BaseSettings]) -> str:
    """One line naming each bad field by its environment variable (pydantic's own text spans
    several lines and links to its documentation)."""
    if isinstance(exc, SettingsError):  # a value pydantic-settings could not even parse (JSON)
        return str(exc)
    prefix = cls.model_config.get("env_prefix", "")
    parts = []
    for err in exc.errors():
        msg = str(err["msg"]).removeprefix("Value error, ")
        field = str(err["loc"][0]) if err["loc"] else ""
        if field in cls.model_fields:
            value = "" if field in _UNSHOWN else f"={err['input']!r}"
            msg = f"{prefix}{field.upper()}{value}: {msg}"
        parts.append(msg)
    return "; ".join(parts)
