"""Pool availability from in-flight batches' predicted run times."""

from __future__ import annotations

from adaserve.planner.heft.clock import PoolClock


def test_fifo_on_one_worker_and_on_two() -> None:
    c = PoolClock(slots=1)
    c.add("a", 0.0, 0.010)
    c.add("b", 0.0, 0.020)
    c.add("c", 0.050, 0.005)  # a part 2 that cannot start before its tensor arrives
    assert abs(c.available(0.0) - 0.055) < 1e-12
    c.slots = 2
    assert abs(c.available(0.0) - 0.020) < 1e-12  # a: 0-10, b: 0-20, c: 50-55 -> one worker free at 20 ms
    assert c.remove("a") and not c.remove("a") and len(c) == 2


def test_an_idle_pool_is_available_now_and_a_batch_never_finished_is_dropped() -> None:
    c = PoolClock()
    assert c.available(5.0) == 5.0
    c.add("lost", 0.0, 0.010)
    assert c.available(0.0) == 0.010
    assert c.available(100.0) == 100.0 and "lost" not in c


def test_a_batch_halfway_through_counts_its_remaining_half() -> None:
    c = PoolClock()
    c.add("a", 1.0, 0.010)
    assert abs(c.available(1.005) - 1.010) < 1e-12
