import pytest

from adaserve.broker.errors import ConfigError
from adaserve.planner.config import PlannerConfig


@pytest.mark.parametrize("kwargs, words", [
    ({"policy": "fastest"}, "unknown policy 'fastest'"),
    ({"modality": "all"}, "unknown modality policy 'all'"),
    ({"max_batch": 0}, "max_batch must be within"),
    ({"online_feedback": "sometimes"}, "unknown online feedback mode"),
    ({"read_count": 0}, "read_count must be within"),
    ({"split": ("effnet-lite0",)}, "MODEL=FIRST_POOL:SECOND_POOL"),
    ({"queue_ms": -1.0}, "queue_ms must be within"),
    ({"queue_ms": float("nan")}, "queue_ms must be within"),
    ({"queue_ms": 20_000.0}, "queue_ms must be within"),
    ({"app_ratio": 1.0}, "app_ratio must be 0"),
    ({"app_ratio": float("nan")}, "app_ratio must be 0"),
    ({"app_ratio": -2.0}, "app_ratio must be 0"),
])
def test_bad_settings_fail_at_construction_with_a_clear_error(kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        PlannerConfig(**kwargs)  # type: ignore[arg-type]


def test_the_defaults_are_orloj_with_optimized_modality_selection() -> None:
    c = PlannerConfig()
    assert (c.policy, c.modality, c.max_batch, c.split, c.app_ratio) == ("orloj", "optimized", 32, (), 3.0)
    assert c.consumer().startswith("planner-") and PlannerConfig(name="p1").consumer() == "p1"
