from __future__ import annotations

import numpy as np
import pytest

from adaserve.broker import Job, Request, Slo, Tensor
from adaserve.broker.errors import InvalidMessage
from adaserve.broker.messages import Generation
from adaserve.planner.helios.family import servable
from adaserve.planner.helios.repository import Candidate

SPEC = {"tokens": {"shape": [-1], "dtype": "int64", "max_length": 63, "context": 64, "max_new_tokens": 63,
                   "default_new_tokens": 16, "vocab_size": 65, "pad_id": -1}}
WIDE = {"tokens": {**SPEC["tokens"], "max_length": 127, "context": 128, "max_new_tokens": 127}}


def job(n: int) -> Job:
    req = Request(id="r0", kind="generate", inputs={"tokens": Tensor.from_numpy(np.zeros(n, np.int64))},
                  generation=Generation(max_new_tokens=16))
    return Job(id="j1", model="lm", reply_to="x", slo=Slo(deadline_ms=1000), requests=[req])


def test_the_candidates_that_can_serve(cands: list[Candidate]) -> None:
    assert servable(job(10), cands, {"small": SPEC, "deep": WIDE}) == ["small", "deep"]
    assert servable(job(100), cands, {"small": SPEC, "deep": WIDE}) == ["deep"]  # only deep's context fits
    assert servable(job(10), cands, {"deep": WIDE}) == ["deep"]


def test_a_family_none_can_serve_is_rejected_with_every_reason(cands: list[Candidate]) -> None:
    with pytest.raises(InvalidMessage) as err:
        servable(job(100), cands, {"small": SPEC})
    assert err.value.reason == "no_candidate"
    assert "small:" in err.value.detail and "deep: no live worker serves it" in err.value.detail
    with pytest.raises(InvalidMessage):
        servable(job(10), [], {"small": SPEC})
