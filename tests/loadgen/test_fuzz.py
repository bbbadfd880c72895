"""The fuzzer's entries, without Redis: deterministic per seed, every kind produced, and each
entry's label (its reason, whether and how often it is answered) what the planner's own
admission code makes of it."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from adaserve.broker import InvalidMessage, Job, load_limits
from adaserve.broker.codec import decode, peek
from adaserve.broker.settings import default_limits
from adaserve.loadgen.fuzz import KINDS, Fuzzer, Hostile
from adaserve.planner.validate import check_job

MODEL = "fsdd-cnn"
INPUTS = {"audio": ((1, 32, 32), "float32")}
SPEC = {"audio": {"shape": [1, 32, 32], "dtype": "float32"}}
LIMITS = load_limits(max_message_bytes=256 * 1024)
_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")


def _fuzzer(seed: int) -> Fuzzer:
    return Fuzzer(seed, model=MODEL, inputs=INPUTS, reply_to="fz-reply", limits=LIMITS)


def _admission(h: Hostile) -> tuple[str, str, int]:
    """(reason, job id, results) as the planner's admission decides them."""
    raw = h.fields.get(b"m")
    if raw is None:
        return "undecodable", "", 0
    try:
        job = decode(raw, LIMITS, expect=Job)
        check_job(job, known=job.model == MODEL, inputs=SPEC, limits=LIMITS)
    except InvalidMessage as exc:
        reason = exc.reason
        assert exc.detail
    else:
        raise AssertionError(f"a {h.kind} entry was admitted")
    info = peek(raw)
    if not (_ID.match(info.get("id", "")) and _ID.match(info.get("reply_to", ""))):
        return reason, "", 0
    ids = [i for i in info.get("request_ids", []) if _ID.match(i)]
    # as planner/admission.py: more ids than a job may hold get one result for the whole job
    return reason, info["id"], 1 if len(ids) > default_limits().max_requests_per_job else max(len(ids), 1)


def test_the_same_seed_gives_the_same_entries() -> None:
    a, b, c = _fuzzer(3), _fuzzer(3), _fuzzer(4)
    first = [a.next() for _ in range(200)]
    assert first == [b.next() for _ in range(200)]
    assert first != [c.next() for _ in range(200)]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_is_rejected_as_labelled(kind: str) -> None:
    f = _fuzzer(11)
    for _ in range(40):
        h = f.next(kind)
        reason, job_id, results = _admission(h)
        assert (job_id, results) == (h.job_id, h.results), (kind, h.fields)
        if h.reason is not None:
            assert reason == h.reason, (kind, reason)


def test_a_mixed_stream_holds_every_kind_and_both_endings() -> None:
    f = _fuzzer(1)
    entries = [f.next() for _ in range(20_000)]
    kinds = Counter(h.kind for h in entries)
    assert set(kinds) == set(KINDS)
    answered = [h for h in entries if h.results]
    assert 0.3 < len(answered) / len(entries) < 0.9
    assert len({h.job_id for h in answered}) == len(answered)  # results can be told apart by job id
