from __future__ import annotations

import numpy as np
import pytest

from adaserve.broker import Tensor
from adaserve.models.manifest import InputSpec
from adaserve.workers.inputs import InputError, gather, signature, specs_of, targets
from adaserve.workers.runtime.base import Runner, RunOutput


class Unspecified(Runner):
    model, variant, device, inputs = "m", "v", "cpu", ("audio",)

    def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
        raise NotImplementedError


class R(Unspecified):
    specs = {"audio": InputSpec(shape=(1, 4), dtype="float32")}  # noqa: RUF012 - a fixed test double


def _row(a: np.ndarray, name: str = "audio") -> dict[str, Tensor]:
    return {name: Tensor.from_numpy(a)}


def test_specs_are_read_from_the_runner() -> None:
    assert specs_of(R()) == {"audio": ((1, 4), "float32")}
    assert specs_of(Unspecified()) is None


def test_signature_names_a_missing_input() -> None:
    assert signature(_row(np.ones(3, np.int64)), ("audio",)) == (("audio", "int64", (3,)),)
    with pytest.raises(InputError, match="missing input 'audio'"):
        signature(_row(np.ones(3), "image"), ("audio",))


def test_targets_check_shape_and_cast_within_kind() -> None:
    specs = specs_of(R())
    assert targets(signature(_row(np.ones((1, 4))), ("audio",)), specs) == {"audio": ((1, 4), "float32")}
    kept_axis = signature(_row(np.ones((1, 1, 4), np.float32)), ("audio",))
    assert targets(kept_axis, specs) == {"audio": ((1, 4), "float32")}
    with pytest.raises(InputError, match="shape"):
        targets(signature(_row(np.ones((2, 4), np.float32)), ("audio",)), specs)
    with pytest.raises(InputError, match="int64"):
        targets(signature(_row(np.ones((1, 4), np.int64)), ("audio",)), {"audio": ((1, 4), "int8")})
    assert targets((("t", "int32", (7,)),), {"t": ((-1,), "int64")}) == {"t": ((7,), "int64")}
    assert targets((("t", "int32", (7,)),), None) == {"t": ((7,), "int32")}


def test_gather_stacks_from_wire_bytes_and_casts() -> None:
    rows = [_row(np.full((1, 1, 4), k, np.float64)) for k in range(3)]
    sig = signature(rows[0], ("audio",))
    out = gather(rows, sig, targets(sig, specs_of(R())))["audio"]
    assert out.shape == (3, 1, 4) and out.dtype == np.float32 and out.flags.writeable
    np.testing.assert_array_equal(out[:, 0, 0], [0, 1, 2])
