from __future__ import annotations

import pytest

from adaserve.broker import ConfigError
from adaserve.workers import WorkerConfig


def test_defaults_and_ids() -> None:
    c = WorkerConfig()
    assert (c.pool, c.slots, c.resolved_device, c.rerun_budget) == ("cpu", 8, "cpu", 0.02)
    assert WorkerConfig(pool="gpu").resolved_device == "gpu"
    a, b = c.worker_id(), c.worker_id()
    assert a != b and a.startswith("cpu-")
    assert WorkerConfig(name="w1").worker_id() == "w1"


@pytest.mark.parametrize("kw", [{"slots": 0}, {"threads": 0}, {"pool": "a b"}, {"name": "x" * 200}, {"device": "tpu"},
                                {"memory_mb": 0}, {"rerun_budget": -0.1}, {"rerun_budget": 0.9}])
def test_bad_options_are_refused(kw: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        WorkerConfig(**kw)  # type: ignore[arg-type]
