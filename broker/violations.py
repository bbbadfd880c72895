"""Structured validation errors: a limit breach is its own pydantic error type, so the codec and
the SDK choose their reason code from ``ValidationError.errors()`` instead of the error's text.

A validator raises ``over_limit(...)`` where a producer-controlled size passes its configured
bound (``Limits``) and a plain ``ValueError`` for everything else that is malformed.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from adaserve.broker.errors import InvalidMessage, LimitExceeded

LIMIT_TYPE = "limit_exceeded"  # the pydantic error type of a breached ``Limits`` bound
_SHOWN = 3  # errors spelled out in a message; the rest are counted


def over_limit(template: str, **context: Any) -> PydanticCustomError:
    """The error a validator raises for a size above its limit; ``template`` uses ``{name}``
    placeholders filled from ``context``, which also travels in the error's ``ctx``."""
    return PydanticCustomError(LIMIT_TYPE, template, context)


def reason_of(exc: ValidationError) -> str:
    """``limit`` when any error is a limit breach, else ``schema``."""
    return "limit" if any(err["type"] == LIMIT_TYPE for err in exc.errors()) else "schema"


def explain(exc: ValidationError) -> str:
    """The first errors as ``loc: message``, joined on one line."""
    errors = exc.errors()
    parts = []
    for err in errors[:_SHOWN]:
        loc = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")  # pydantic's label for a validator's ValueError
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = len(errors) - _SHOWN
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def invalid_message(exc: ValidationError) -> InvalidMessage:
    """The domain error for a message that failed validation: ``LimitExceeded`` for a breached
    limit, else ``InvalidMessage`` with reason ``schema``."""
    detail = explain(exc)
    return LimitExceeded(detail) if reason_of(exc) == "limit" else InvalidMessage("schema", detail)
