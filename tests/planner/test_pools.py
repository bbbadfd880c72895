from adaserve.broker.events import WorkerHeartbeat
from adaserve.planner.pools import Pools


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
