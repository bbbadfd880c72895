from adaserve.planner.stall import StallWatch


def test_a_stall_is_told_after_the_delay_and_then_at_most_every_interval() -> None:
    w = StallWatch(after_ms=1000.0, every_ms=5000.0)
    assert not w.due(0.0)
    assert not w.due(999.0)
    assert w.due(1000.0)
    assert not w.due(3000.0)
    assert w.due(6000.0)
    assert w.stalled_ms(6000.0) == 6000.0


def test_a_batch_sent_or_an_empty_queue_starts_the_count_again() -> None:
    w = StallWatch(after_ms=1000.0, every_ms=5000.0)
    w.due(0.0)
    w.sent(800.0)
    assert not w.due(1500.0)
    assert w.due(1800.0)
    w.idle()
    assert not w.due(2500.0)  # pending again from 2500
    assert not w.due(3400.0)
    assert w.due(3500.0)
