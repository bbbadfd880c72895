"""``make_job`` validates a job's request maps once and ``encode_checked`` encodes those very maps:
what is sent is what was validated, with the limits it is sent under, and a job changed since
(or checked against other limits) is validated again in full."""

from __future__ import annotations

import numpy as np
import pytest

from adaserve.broker import InvalidMessage, LimitExceeded, Tensor, load_limits
from adaserve.broker.codec import decode
from adaserve.broker.messages import Job, Request
from adaserve.producers.jobs import _validated_maps, encode_checked, make_job


def _job() -> Job:
    return make_job("m", [np.full(4, i, np.float32) for i in range(3)], 500.0, app="shop", run="r1")


def test_an_encoded_job_is_the_job_with_the_reply_channel_given() -> None:
    job = _job()
    lim = load_limits()
    assert _validated_maps(job, lim) is not None  # the maps make_job validated are what is encoded
    got = decode(encode_checked(job, lim, reply_to="client-7"), lim, expect=Job)
    assert got == job.model_copy(update={"reply_to": "client-7"})
    assert decode(encode_checked(job, lim), lim, expect=Job) == job


def test_the_job_s_own_fields_are_still_checked() -> None:
    with pytest.raises(InvalidMessage):
        encode_checked(_job(), load_limits(), reply_to="no spaces allowed")
    with pytest.raises(InvalidMessage):
        encode_checked(_job().model_copy(update={"priority": 12}), load_limits())


def test_tighter_limits_than_the_job_was_built_with_are_applied_in_full() -> None:
    job = _job()
    with pytest.raises(LimitExceeded):
        encode_checked(job, load_limits(max_tensor_elements=3))


def test_requests_changed_after_the_job_was_built_are_validated_again() -> None:
    job = _job()
    bad = Request.model_construct(id="0", kind="forward", generation=None,
                                  inputs={"input": Tensor.model_construct(dtype="float32", shape=(4,), data=b"x")})
    job.requests[0] = bad  # a list is not frozen: a caller can still swap an element
    assert _validated_maps(job, load_limits()) is None
    with pytest.raises(InvalidMessage):
        encode_checked(job, load_limits())
