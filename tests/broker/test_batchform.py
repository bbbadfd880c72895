"""The columnar batch form: docs/wire.md's tables are the keys the planner writes and ``expand``
reads, and a columnar map stands for exactly the per-request map of the same requests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from adaserve.broker.batchform import COLUMN_KEYS, JOB_KEYS, expand, is_columnar

WIRE = Path(__file__).resolve().parents[2] / "docs" / "wire.md"


def test_the_documented_tables_are_the_keys_of_the_form() -> None:
    batch = WIRE.read_text().split("The **columnar form**", 1)[1]
    assert _names(batch, "| field | type | meaning |") == COLUMN_KEYS
    assert _names(batch, "| field of a `jobs` map |") == JOB_KEYS


def _names(text: str, header: str) -> set[str]:
    """The backticked names in the first column of the first table of ``text`` headed ``header``."""
    table = text.split(header, 1)[1].split("\n\n", 1)[0]
    return {n for line in table.splitlines()[2:] for n in re.findall(r"`([a-z_]+)`", line.split("|")[1])}


def _body() -> dict[str, object]:
    return {"v": 1, "type": "batch", "id": "b", "model": "m", "plan": {}, "dispatched_ms": 5.0,
            "jobs": [{"job_id": "j1", "app": "a", "reply_to": "c", "submitted_ms": 1.0, "deadline_ms": 2.0,
                      "request_ids": ["r0", "r1"]},
                     {"job_id": "j2", "app": "a", "reply_to": "d", "run": "x", "submitted_ms": 3.0,
                      "deadline_ms": 4.0, "job_accuracy": 0.5, "request_ids": ["r2"]}],
            "inputs": {"x": {"dtype": "uint8", "shape": [3, 2], "data": b"abcdef"}}}


def test_a_columnar_map_expands_to_one_item_per_request_with_its_row_and_its_job_s_fields() -> None:
    body = _body()
    assert is_columnar(body) and not is_columnar({**body, "items": []})
    out = expand(body)
    assert set(out) == {"v", "type", "id", "model", "plan", "dispatched_ms", "items"}
    assert [it["request_id"] for it in out["items"]] == ["r0", "r1", "r2"]
    assert [it["inputs"]["x"]["data"] for it in out["items"]] == [b"ab", b"cd", b"ef"]
    assert all(it["inputs"]["x"]["shape"] == [2] for it in out["items"])
    assert out["items"][2] == {"job_id": "j2", "app": "a", "reply_to": "d", "run": "x", "submitted_ms": 3.0,
                               "deadline_ms": 4.0, "job_accuracy": 0.5, "request_id": "r2",
                               "inputs": {"x": {"dtype": "uint8", "shape": [2], "data": b"ef"}}}


@pytest.mark.parametrize("change", [{"jobs": []}, {"jobs": [{"request_ids": "r0"}]}, {"extra": 1},
                                    {"inputs": {"x": {"dtype": "uint8", "shape": [2, 2], "data": b"abcdef"}}},
                                    {"inputs": {"x": {"dtype": "uint8", "shape": [3, 2], "data": b"abcde"}}},
                                    {"inputs": {"x": {"shape": [3, 2], "data": b"abcdef"}}},
                                    {"inputs": {"x": "abc"}}])
def test_a_map_that_is_not_a_columnar_batch_is_a_value_error(change: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        expand({**_body(), **change})
