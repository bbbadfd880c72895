"""The reader of columnar jobs without pydantic is held to ``Job``: it knows the model's fields and
defaults, it gives the very object the full validation gives for every map it accepts, and it
accepts nothing the full validation refuses (boundaries, wrong types, coercions, extra keys)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from adaserve.broker.jobread import JOB_FIELDS, SLO_FIELDS, read_job
from adaserve.broker.messages import Job, Slo
from adaserve.broker.settings import Limits
from adaserve.broker.tensors import wire_of

_LIMITS = Limits()
_X = {"x": np.arange(12, dtype=np.float32).reshape(3, 2, 2)}


def _body(**over: Any) -> dict[str, Any]:
    body = {"v": 1, "type": "job", "id": "j-1", "app": "a", "model": "m", "reply_to": "c", "priority": 2,
            "run": "x", "slo": {"deadline_ms": 500.0, "min_accuracy": 0.25, "objective": "latency"},
            "request_ids": ["r0", "r1", "r2"], "inputs": {k: wire_of(a) for k, a in _X.items()}}
    for k, v in over.items():
        if v is _GONE:
            body.pop(k, None)
        else:
            body[k] = v
    return body


_GONE = object()


def _slo(**over: Any) -> dict[str, Any]:
    slo: dict[str, Any] = {"deadline_ms": 500.0, "min_accuracy": 0.25, "objective": "latency"}
    for k, v in over.items():
        if v is _GONE:
            slo.pop(k)
        else:
            slo[k] = v
    return slo


def _same(a: Any, b: Any) -> None:
    """The same object, down to what pydantic keeps beside the fields."""
    assert type(a) is type(b) and a == b and a.model_fields_set == b.model_fields_set
    assert vars(a).keys() == vars(b).keys() and list(vars(a)) == list(vars(b))
    assert a.__pydantic_extra__ == b.__pydantic_extra__ and a.__pydantic_private__ == b.__pydantic_private__
    assert a.slo.model_fields_set == b.slo.model_fields_set and vars(a.slo) == vars(b.slo)
    for ra, rb in zip(a.requests, b.requests):
        assert vars(ra) == vars(rb) and ra.model_fields_set == rb.model_fields_set
    assert a.model_dump() == b.model_dump()


def test_the_reader_knows_the_fields_of_the_job_and_its_slo() -> None:
    assert set(JOB_FIELDS) == set(Job.model_fields) and set(SLO_FIELDS) == set(Slo.model_fields)


_NAMES = ["", "a", "a" * 64, "a" * 65, "a" * 128, "a" * 129, "a b", "a\n", "é", "a.b:c-d_e", 7, None, b"a", ["a"]]
_NUMBERS = [0, 1, 0.5, 1.5, -1, 9, 10, 2.0, True, False, "1", float("nan"), float("inf"), -float("inf"), 10**400,
            0.999999, 1.0000001, None]
_CASES: list[dict[str, Any]] = (
    [_body()]
    + [_body(**{k: _GONE}) for k in ("v", "type", "id", "app", "model", "reply_to", "priority", "run", "slo",
                                       "request_ids", "inputs")]
    + [_body(**{k: v}) for k, v in itertools.product(("id", "app", "model", "reply_to", "run"), _NAMES)]
    + [_body(id="a" * n) for n in (127, 128, 129, 200)]
    + [_body(v=v) for v in (1, 2, 1.0, True, "1", None)]
    + [_body(type=t) for t in ("job", "batch", "result", "", None)]
    + [_body(priority=p) for p in _NUMBERS]
    + [_body(slo=_slo(deadline_ms=d)) for d in [*_NUMBERS, 0.5, 1.0, 3_600_000, 3_600_000.5, 60_000]]
    + [_body(slo=_slo(min_accuracy=m)) for m in _NUMBERS]
    + [_body(slo=_slo(objective=o)) for o in ("latency", "accuracy", "throughput", "energy", "speed", "", 1, None,
                                              ["latency"], {"a": 1})]
    + [_body(slo=_slo(**{k: _GONE})) for k in SLO_FIELDS]
    + [_body(slo=s) for s in (None, [], "slo", {**_slo(), "extra": 1})]
    + [_body(extra=1), _body(requests=[]), _body(request_ids=["r0", "r0", "r1"]), _body(request_ids=["r0", "r1"]),
       _body(request_ids=["r0", "r 1", "r2"]), _body(request_ids=["r0", "", "r2"]), _body(request_ids=[])]
)


@pytest.mark.parametrize("body", _CASES)
def test_what_the_reader_accepts_is_what_the_full_validation_builds(body: dict[str, Any]) -> None:
    try:
        full: Job | None = Job.model_validate(body, context={"limits": _LIMITS})
    except (ValidationError, ValueError):
        full = None
    for wire in (False, True):
        got = read_job(body, _LIMITS, wire=wire)
        if full is None:
            assert got is None  # never accepts what the schema refuses
        elif got is not None:
            _same(got, full)


def test_the_reader_vouches_for_the_jobs_producers_send() -> None:
    """Not a reader that answers None to everything: the maps the SDK and other producers send
    (the defaults left out or named, integers for floats) are read without pydantic."""
    for body in (_body(), _body(app=_GONE, priority=_GONE, run=_GONE), _body(slo={"deadline_ms": 500}),
                 _body(slo=_slo(min_accuracy=1, objective="energy")), _body(priority=9, run="")):
        got = read_job(body, _LIMITS, wire=True)
        assert got is not None
        _same(got, Job.model_validate(body, context={"limits": _LIMITS}))
    # without ``v`` and ``type`` a map off the wire is the full validation's (it names the version)
    assert read_job(_body(v=_GONE), _LIMITS, wire=True) is None and read_job(_body(v=_GONE), _LIMITS) is not None


def test_the_reader_uses_the_limits_it_is_given() -> None:
    tight = Limits(max_id_length=8, min_deadline_ms=100.0, max_deadline_ms=1000.0)
    assert read_job(_body(id="abcdefghi"), tight) is None and read_job(_body(id="abcdefgh"), tight) is not None
    assert read_job(_body(slo=_slo(deadline_ms=1001)), tight) is None
    assert read_job(_body(slo=_slo(deadline_ms=99.5)), tight) is None
    assert read_job(_body(request_ids=["r0", "r1", "r2345678x"]), tight) is None
