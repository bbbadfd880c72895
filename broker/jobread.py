"""A job in columns read without pydantic: the planner's admission and the SDK's ``make_job``.

``Job.model_validate`` of a columnar map checked its rows once per input, then ran pydantic's
core over the job's fields and over every request the rows were built into (an instance check and
an after-validator each): 57 µs of a 32-request fsdd-cnn job, the planner's largest piece of CPU
per job after the registration's round trip. ``read_job`` checks the job's own fields by hand
against the same constraints, the rows with ``jobform.rows``, and builds the objects pydantic would
build. It accepts a subset of what the schema accepts (exact types, no coercion); for anything else
it answers None and the caller validates in full, whose error is the one a producer sees.
``tests/broker/test_jobread.py`` holds it to ``Job``: the fields, their defaults and constraints,
and the same object as the full validation for every map it accepts.
"""

from __future__ import annotations

import math
import re
from typing import Any, get_args

from adaserve.broker import jobform
from adaserve.broker.messages import (
    _SET_DICT,
    _SET_EXTRA,
    _SET_FIELDS,
    _SET_PRIVATE,
    SCHEMA_VERSION,
    Job,
    Objective,
    Slo,
    rows_as_requests,
)
from adaserve.broker.settings import Limits

_ID = re.compile(r"[A-Za-z0-9_.:\-]+")
# What the reader knows; the test holds these to ``Job``'s and ``Slo``'s fields.
JOB_FIELDS = ("v", "type", "id", "app", "model", "requests", "slo", "reply_to", "priority", "run")
SLO_FIELDS = ("deadline_ms", "min_accuracy", "objective")
_HEAD = frozenset(JOB_FIELDS) - {"requests"}
_SLO = frozenset(SLO_FIELDS)
_OBJECTIVES = frozenset(get_args(Objective))
# Defaults read from the models, so that a changed default cannot leave the reader behind.
_APP = Job.model_fields["app"].default
_PRIORITY = Job.model_fields["priority"].default
_RUN = Job.model_fields["run"].default
_MIN_ACCURACY = Slo.model_fields["min_accuracy"].default
_OBJECTIVE = Slo.model_fields["objective"].default
_NEW = object.__new__


def read_job(body: dict[str, Any], limits: Limits, *, wire: bool = False) -> Job | None:
    """The ``Job`` that ``Job.model_validate(body, context={"limits": limits})`` gives for a job
    map in columns, or None when the map is not one this reader vouches for (malformed, or a value
    pydantic would coerce): the full validation then decides, and says why. ``wire``: the map came
    off a stream, where ``v`` and ``type`` are required (``codec.validate`` dispatches on them)."""
    if not _HEAD.issuperset(body.keys() - jobform.COLUMN_KEYS) or "requests" in body:
        return None
    if wire and ("v" not in body or "type" not in body):
        return None
    v, kind = body.get("v", SCHEMA_VERSION), body.get("type", "job")
    if type(v) is not int or v != SCHEMA_VERSION or kind != "job":
        return None
    jid, app, model = body.get("id"), body.get("app", _APP), body.get("model")
    reply_to, priority, run = body.get("reply_to"), body.get("priority", _PRIORITY), body.get("run", _RUN)
    if not (_name(jid, limits.max_id_length) and _name(app, 64) and _name(model, 64) and _name(reply_to, 128)):
        return None
    if type(priority) is not int or not 0 <= priority <= 9 or type(run) is not str or len(run) > 64:
        return None
    slo = _slo(body.get("slo"), limits)
    if slo is None:
        return None
    try:
        ids, cols = jobform.rows(body, limits)
    except Exception:  # ValueError or a limit's error: the full validation raises its own
        return None
    if len(set(ids)) != len(ids):
        return None
    job = _NEW(Job)
    _SET_DICT(job, {"v": v, "type": kind, "id": jid, "app": app, "model": model,
                    "requests": rows_as_requests(ids, cols), "slo": slo, "reply_to": reply_to,
                    "priority": priority, "run": run})
    # pydantic's fields-set: what the map named (``requests`` stands for the columns)
    _SET_FIELDS(job, (body.keys() - jobform.COLUMN_KEYS) | {"requests"})
    _SET_EXTRA(job, None)
    _SET_PRIVATE(job, None)
    return job


def _name(s: object, cap: int) -> bool:
    return type(s) is str and 0 < len(s) <= cap and _ID.fullmatch(s) is not None


def _slo(m: object, limits: Limits) -> Slo | None:
    if type(m) is not dict or "deadline_ms" not in m or not _SLO.issuperset(m.keys()):
        return None
    deadline, floor, objective = m["deadline_ms"], m.get("min_accuracy", _MIN_ACCURACY), m.get("objective", _OBJECTIVE)
    # exact types: pydantic's lax mode coerces more (bools, numeric strings), and is left to say so
    if type(deadline) not in (int, float) or type(floor) not in (int, float) or type(objective) is not str:
        return None
    if not limits.min_deadline_ms <= deadline <= limits.max_deadline_ms or not 0.0 <= floor <= 1.0:
        return None  # NaN fails both comparisons
    if objective not in _OBJECTIVES or not math.isfinite(deadline):
        return None
    slo = _NEW(Slo)
    _SET_DICT(slo, {"deadline_ms": float(deadline), "min_accuracy": float(floor), "objective": objective})
    _SET_FIELDS(slo, set(m.keys()))
    _SET_EXTRA(slo, None)
    _SET_PRIVATE(slo, None)
    return slo
