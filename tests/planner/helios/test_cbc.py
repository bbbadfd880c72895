from __future__ import annotations

import pytest

from adaserve.broker.errors import ConfigError
from adaserve.planner.helios.cbc import BreachCounter


def test_trips_only_above_the_limit_within_the_window() -> None:
    c = BreachCounter(window=100, limit=50)
    for _ in range(50):
        c.add(True)
    assert c.count == 50 and not c.tripped
    c.add(True)
    assert c.tripped


def test_old_breaches_leave_the_window() -> None:
    c = BreachCounter(window=100, limit=50)
    for _ in range(50):
        c.add(True)
    for _ in range(100):
        c.add(False)
    assert c.count == 0
    for _ in range(51):
        c.add(True)
    assert c.count == 51 and c.tripped
    for _ in range(49):
        c.add(False)
    assert c.tripped  # 51 of the last 100
    c.add(False)
    assert c.count == 50 and not c.tripped


def test_add_many_reports_a_trip_and_reset_clears() -> None:
    c = BreachCounter(window=10, limit=5)
    assert not c.add_many(10, 5)
    assert c.add_many(2, 2)
    c.reset()
    assert c.count == 0 and not c.tripped


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ConfigError):
        BreachCounter(window=10, limit=10)
    with pytest.raises(ConfigError):
        BreachCounter(window=0, limit=0)
