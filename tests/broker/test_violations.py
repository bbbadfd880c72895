"""Reason codes from pydantic's structured errors: the error type decides, never the wording."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError, field_validator

from adaserve.broker.errors import InvalidMessage, LimitExceeded
from adaserve.broker.violations import LIMIT_TYPE, explain, invalid_message, over_limit, reason_of


class _Toy(BaseModel):
    size: int
    name: str = ""

    @field_validator("size")
    @classmethod
    def _size(cls, v: int) -> int:
        if v > 10:
            raise over_limit("size {n} is above {cap}", n=v, cap=10)
        if v < 0:
            raise ValueError("a negative size exceeds nothing and lies outside everything")
        return v


def _error(**body: object) -> ValidationError:
    with pytest.raises(ValidationError) as exc:
        _Toy(**body)
    return exc.value


def test_a_limit_breach_is_its_own_error_type_with_its_figures() -> None:
    exc = _error(size=11)
    (err,) = exc.errors()
    assert err["type"] == LIMIT_TYPE and err["ctx"] == {"n": 11, "cap": 10} and err["msg"] == "size 11 is above 10"
    assert reason_of(exc) == "limit"
    mapped = invalid_message(exc)
    assert isinstance(mapped, LimitExceeded) and mapped.detail == "size: size 11 is above 10"


def test_words_in_a_message_do_not_make_a_limit() -> None:
    exc = _error(size=-1)
    assert reason_of(exc) == "schema"
    mapped = invalid_message(exc)
    assert type(mapped) is InvalidMessage and mapped.reason == "schema"
    assert mapped.detail == "size: a negative size exceeds nothing and lies outside everything"


def test_one_limit_among_other_errors_decides_and_the_rest_are_counted() -> None:
    class Many(BaseModel):
        a: int
        b: int
        c: int
        d: _Toy

    with pytest.raises(ValidationError) as exc:
        Many(a="x", b="y", c="z", d={"size": 99})
    assert reason_of(exc.value) == "limit"
    assert explain(exc.value).endswith("(+1 more)") and explain(exc.value).count(";") == 2
