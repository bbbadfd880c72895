from adaserve.broker.events import WorkerHeartbeat
from adaserve.planner.pools import Pools, slot_limit


def _hb(worker: str, pool: str, ts: float, slots: int = 2, models: tuple[str, ...] = ("m",)) -> WorkerHeartbeat:
    return WorkerHeartbeat(ts=ts, worker=worker, pool=pool, slots=slots, models=list(models))


def test_slots_add_up_and_stale_workers_drop_out() -> None:
    p = Pools(ttl_s=5.0)
    p.heartbeat(_hb("a", "cpu", 1000.0))
    p.heartbeat(_hb("b", "cpu", 1000.0, slots=3))
    p.heartbeat(_hb("c", "gpu", 1000.0, models=("x",)))
    p.refresh(2000.0)
    assert p.views["cpu"].slots == 5 and p.workers == 3
    p.views["cpu"].inflight = 4
    assert p.views["cpu"].free == 1
    p.heartbeat(_hb("a", "cpu", 6500.0))
    p.refresh(7000.0)  # b and c are 6 s old: gone
    assert p.views["cpu"].slots == 2 and "gpu" not in p.views
    assert p.views["cpu"].inflight == 4  # in-flight survives a refresh


def test_serving_prefers_gpu_and_knows_models() -> None:
    p = Pools(ttl_s=5.0)
    p.heartbeat(_hb("a", "cpu", 0.0))
    p.heartbeat(_hb("g", "gpu", 0.0))
    p.refresh(0.0)
    assert [v.name for v in p.serving("m")] == ["gpu", "cpu"]
    assert p.known("m") and not p.known("nope")


def test_older_heartbeat_does_not_overwrite_newer() -> None:
    p = Pools(ttl_s=5.0)
    p.heartbeat(_hb("a", "cpu", 10.0, slots=4))
    p.heartbeat(_hb("a", "cpu", 5.0, slots=1))
    p.refresh(10.0)
    assert p.views["cpu"].slots == 4


def test_a_pool_of_long_batches_holds_fewer_than_its_slots() -> None:
    # eight slots; 10 ms of queue beyond the running batch
    assert slot_limit(8, 1, 10.0, 25.0) == 2   # a language model's batches: one running, one ready
    assert slot_limit(8, 1, 10.0, 4.0) == 4    # 1 + ceil(10 / 4)
    assert slot_limit(8, 1, 10.0, 1.0) == 8    # small batches keep every slot
    assert slot_limit(16, 2, 10.0, 25.0) == 4  # per worker
    assert slot_limit(1, 1, 10.0, 25.0) == 1   # never more than the slots
    # off, or nothing heard yet: the slots
    assert slot_limit(8, 1, 0.0, 25.0) == 8 and slot_limit(8, 1, 10.0, None) == 8
    assert slot_limit(8, 1, 10.0, 0.0) == 8 and slot_limit(8, 1, 10.0, float("nan")) == 8


def test_free_counts_against_the_limit_and_a_refresh_clears_it() -> None:
    p = Pools(ttl_s=5.0)
    p.heartbeat(_hb("a", "cpu", 1000.0, slots=8))
    p.heartbeat(_hb("b", "cpu", 1000.0, slots=8))
    p.refresh(1000.0)
    v = p.views["cpu"]
    assert v.workers == 2 and v.free == 16
    v.inflight, v.limit = 3, 4
    assert v.free == 1
    v.inflight = 6
    assert v.free == 0
    p.refresh(1001.0)  # the planner sets the limit again each step, from what it heard since
    assert p.views["cpu"].limit is None and p.views["cpu"].free == 10
