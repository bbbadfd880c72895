import numpy as np
import pytest

from adaserve.broker import InvalidMessage, Job, Request, Slo, Tensor
from adaserve.planner.validate import check_job

SPEC = {"audio": {"shape": [1, 4], "dtype": "float32"}}


def _job(arr: np.ndarray, name: str = "audio", kind: str = "forward") -> Job:
    return Job(id="j", model="m", reply_to="c", slo=Slo(deadline_ms=100),
               requests=[Request(id="r", kind=kind, inputs={name: Tensor.from_numpy(arr)})])


def test_fitting_job_passes() -> None:
    check_job(_job(np.zeros((1, 4), np.float32)), known=True, inputs=SPEC)


@pytest.mark.parametrize(
    ("job", "known", "reason"),
    [
        (_job(np.zeros((1, 4), np.float32)), False, "unknown_model"),
        (_job(np.zeros((1, 5), np.float32)), True, "schema"),
        (_job(np.zeros((1, 4), np.float64)), True, "schema"),
        (_job(np.zeros((1, 4), np.float32), name="image"), True, "schema"),
        (_job(np.zeros((1, 4), np.float32), kind="generate"), True, "unsupported"),
    ],
)
def test_misfits_are_rejected_with_a_reason(job: Job, known: bool, reason: str) -> None:
    with pytest.raises(InvalidMessage) as exc:
        check_job(job, known=known, inputs=SPEC)
    assert exc.value.reason == reason and exc.value.detail
