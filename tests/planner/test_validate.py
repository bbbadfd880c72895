import numpy as np
import pytest

from adaserve.broker import InvalidMessage, Job, Request, Slo, Tensor, load_limits
from adaserve.broker.messages import Generation
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
        (_job(np.zeros((1, 4), np.int64)), True, "schema"),
        (_job(np.zeros((1, 4), np.uint8)), True, "schema"),
        (_job(np.zeros((1, 4), np.float32), name="image"), True, "schema"),
        (_job(np.zeros((1, 4), np.float32), kind="generate"), True, "unsupported"),
    ],
)
def test_misfits_are_rejected_with_a_reason(job: Job, known: bool, reason: str) -> None:
    with pytest.raises(InvalidMessage) as exc:
        check_job(job, known=known, inputs=SPEC)
    assert exc.value.reason == reason and exc.value.detail


LM = {"tokens": {"shape": [-1], "dtype": "int64", "max_length": 63, "context": 64, "max_new_tokens": 63,
                 "default_new_tokens": 16, "vocab_size": 65}}


def _prompt(n: int, kind: str = "generate", max_new: int | None = None, ids: np.ndarray | None = None) -> Job:
    tokens = ids if ids is not None else np.ones(n, np.int64)
    gen = None if kind == "forward" else Generation(max_new_tokens=max_new)
    return Job(id="j", model="lm", reply_to="c", slo=Slo(deadline_ms=100),
               requests=[Request(id="r", kind=kind, inputs={"tokens": Tensor.from_numpy(tokens)}, generation=gen)])


@pytest.mark.parametrize("job", [
    _prompt(1), _prompt(48), _prompt(40, max_new=24), _prompt(63, max_new=1), _prompt(63, kind="forward"),
    _prompt(1, max_new=63), _prompt(5, ids=np.arange(5, dtype=np.uint8)),  # a byte per id is enough
])
def test_prompts_of_any_length_within_the_context_pass(job: Job) -> None:
    check_job(job, known=True, inputs=LM)


@pytest.mark.parametrize(("job", "reason", "says"), [
    (_prompt(64, max_new=1), "limit", "takes 1 to 63"),
    (_prompt(0), "limit", "takes 1 to 63"),
    (_prompt(49), "limit", "49 tokens plus 16 new tokens exceeds the context of 64"),  # the default budget
    (_prompt(40, max_new=25), "limit", "40 tokens plus 25 new tokens"),
    (_prompt(3, max_new=64), "limit", "max_new_tokens 64 is more than the 63"),
    (_prompt(2, ids=np.array([3, 65])), "schema", "token ids must lie in 0..64"),
    (_prompt(2, ids=np.array([-1, 3])), "schema", "token ids must lie in 0..64"),
    (_prompt(2, ids=np.array([[1, 2]])), "schema", "model wants ['any']"),
    (_prompt(2, ids=np.array([1, 2], np.float32)), "schema", "model wants int64"),
    (_prompt(2, ids=np.array([1, 2], np.uint64)), "schema", "model wants int64"),  # could wrap
])
def test_prompts_that_do_not_fit_are_rejected_with_a_reason(job: Job, reason: str, says: str) -> None:
    with pytest.raises(InvalidMessage) as exc:
        check_job(job, known=True, inputs=LM)
    assert exc.value.reason == reason and says in exc.value.detail, exc.value.detail


def test_a_free_dimension_without_a_cap_takes_any_size() -> None:
    check_job(_job(np.zeros((1, 300), np.float32)), known=True, inputs={"audio": {"shape": [1, 0], "dtype": "float32"}})


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_any_float_feeds_a_float_input(dtype: type) -> None:
    check_job(_job(np.zeros((1, 4), dtype)), known=True, inputs=SPEC)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_inputs_are_rejected_unless_the_model_is_allowed(dtype: type, value: float) -> None:
    arr = np.zeros((1, 4), dtype)
    arr[0, 1] = value
    with pytest.raises(InvalidMessage) as exc:
        check_job(_job(arr), known=True, inputs=SPEC)
    assert exc.value.reason == "non_finite"
    check_job(_job(arr), known=True, inputs=SPEC, limits=load_limits(allow_non_finite=("m",)))


def test_a_misfit_says_so_before_its_values_are_looked_at() -> None:
    with pytest.raises(InvalidMessage) as exc:
        check_job(_job(np.full((1, 5), np.nan, np.float32)), known=True, inputs=SPEC)
    assert exc.value.reason == "schema"


def _stacked(rows: np.ndarray, name: str = "audio") -> tuple[Job, dict[str, dict[str, object]]]:
    """A job sent in columns, and the stacked inputs admission passes with it."""
    from adaserve.broker.tensors import wire_of

    body = {"id": "j", "model": "m", "reply_to": "c", "slo": {"deadline_ms": 100},
            "request_ids": [f"r{i}" for i in range(len(rows))], "inputs": {name: wire_of(rows)}}
    return Job.model_validate(body), body["inputs"]  # type: ignore[return-value]


@pytest.mark.parametrize(("rows", "name", "allow", "reason"), [
    (np.zeros((3, 1, 4), np.float32), "audio", (), None),
    (np.zeros((3, 1, 4), np.float16), "audio", (), None),
    (np.zeros((3, 1, 5), np.float32), "audio", (), "schema"),
    (np.zeros((3, 1, 4), np.int64), "audio", (), "schema"),
    (np.zeros((3, 1, 4), np.float32), "image", (), "schema"),
    (np.array([[[0, 1, 2, 3]], [[0, 1, np.nan, 3]], [[0, 0, 0, 0]]], np.float32), "audio", (), "non_finite"),
    (np.array([[[0, 1, 2, 3]], [[0, 1, np.inf, 3]], [[0, 0, 0, 0]]], np.float16), "audio", (), "non_finite"),
    (np.array([[[0, 1, 2, 3]], [[0, 1, np.nan, 3]], [[0, 0, 0, 0]]], np.float32), "audio", ("m",), None),
    (np.full((3, 1, 5), np.nan, np.float32), "audio", (), "schema"),
])
def test_a_job_in_columns_gets_the_answer_its_requests_get_one_by_one(
        rows: np.ndarray, name: str, allow: tuple[str, ...], reason: str | None) -> None:
    job, stacked = _stacked(rows, name)
    lim = load_limits(allow_non_finite=allow)

    def answer(**kw: object) -> tuple[str, str] | None:
        try:
            check_job(job, known=True, inputs=SPEC, limits=lim, **kw)  # type: ignore[arg-type]
        except InvalidMessage as exc:
            return exc.reason, exc.detail
        return None

    got = answer(stacked=stacked)
    assert got == answer() and (got[0] if got else None) == reason
    if reason == "non_finite":
        assert got is not None and "request r1" in got[1]  # the row that holds it, not the job
