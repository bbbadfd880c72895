"""What the server holds now, read when Prometheus scrapes: queue depths, in-flight batches, slots,
GPU figures and dead letters.

Workers keep their last heartbeat in ``Keys.workers`` and planners their last ``planner.state`` in
``Keys.planners``; entries older than ``worker_ttl_s`` belong to processes that are gone and are
left out. A pool's in-flight batches are its consumer group's ``lag + pending`` (XINFO GROUPS), as
the planner counts them. ``adaserve health`` reads the same hashes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import redis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from adaserve.broker.codec import unpack, validate
from adaserve.broker.errors import InvalidMessage
from adaserve.broker.events import PlannerState, WorkerHeartbeat
from adaserve.broker.keys import PLANNER_GROUP, Keys
from adaserve.broker.settings import Settings

log = logging.getLogger(__name__)

# NVML figures of a heartbeat -> (metric, help, factor to base units)
GPU_GAUGES = {
    "memory_used_mb": ("adaserve_worker_gpu_memory_used_bytes", "GPU memory in use.", 2**20),
    "memory_total_mb": ("adaserve_worker_gpu_memory_total_bytes", "GPU memory in all.", 2**20),
    "util_pct": ("adaserve_worker_gpu_utilization_ratio", "GPU busy fraction (NVML).", 0.01),
    "memory_util_pct": ("adaserve_worker_gpu_memory_utilization_ratio", "GPU memory-bus busy fraction (NVML).", 0.01),
    "power_w": ("adaserve_worker_gpu_power_watts", "GPU power draw.", 1.0),
}


@dataclass(frozen=True)
class Live:
    """The processes that reported within their TTL, by the server's clock."""

    now_ms: float
    workers: list[WorkerHeartbeat]
    planners: list[PlannerState]


def read_live(r: redis.Redis[bytes], settings: Settings) -> Live:
    keys = Keys(settings.namespace)
    with r.pipeline(transaction=False) as p:
        p.time()
        p.hgetall(keys.workers)
        p.hgetall(keys.planners)
        (sec, usec), workers, planners = p.execute()
    now = int(sec) * 1000 + int(usec) / 1000.0
    ttl = settings.worker_ttl_s * 1000.0
    return Live(now, [b for b in _beats(workers, WorkerHeartbeat) if now - b.ts <= ttl],
                [b for b in _beats(planners, PlannerState) if now - b.ts <= ttl])


def _beats(entries: dict[bytes, bytes], kind: type[Any]) -> Iterator[Any]:
    for raw in entries.values():
        try:
            yield validate({"v": 1, "type": "event", **unpack(raw)}, expect=kind)
        except InvalidMessage:
            continue  # another version's entry: adaserve health and the planner's log tell about it


def _text(x: object) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


class LiveCollector:
    """A prometheus-client collector whose metrics are read from the server on each scrape."""

    def __init__(self, r: redis.Redis[bytes], settings: Settings) -> None:
        self._r, self._settings, self._keys = r, settings, Keys(settings.namespace)

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("adaserve_broker_up", "1 when this scrape could read the server.")
        try:
            metrics = self._read()
        except redis.RedisError as exc:
            log.warning("scrape could not read the server: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from metrics

    def _read(self) -> list[Metric]:
        live = read_live(self._r, self._settings)
        pools = sorted({w.pool for w in live.workers})
        with self._r.pipeline(transaction=False) as p:
            p.xlen(self._keys.dead)
            p.xinfo_groups(self._keys.jobs)
            for pool in pools:
                p.xinfo_groups(self._keys.batches(pool))
            dead, ingress, *groups = p.execute(raise_on_error=False)
        out: list[Metric] = []
        g = GaugeMetricFamily("adaserve_dead_letters", "Entries in the dead-letter stream.")
        g.add_metric([], 0 if isinstance(dead, Exception) else int(dead))
        out.append(g)
        out += self._ingress(ingress)
        out += self._planners(live.planners)
        out += self._pools(pools, groups, live.workers)
        out += self._workers(live.workers)
        return out

    def _ingress(self, groups: Any) -> list[Metric]:
        unread = GaugeMetricFamily("adaserve_ingress_unread_jobs", "Jobs in the ingress stream no planner has read.")
        held = GaugeMetricFamily("adaserve_ingress_held_jobs", "Jobs planners have read and not yet fully dispatched.")
        for name, lag, pending in _groups(groups):
            if name == PLANNER_GROUP:
                if lag is not None:
                    unread.add_metric([], lag)
                held.add_metric([], pending)
        return [unread, held]

    def _planners(self, planners: list[PlannerState]) -> list[Metric]:
        depth = GaugeMetricFamily("adaserve_queue_depth", "Requests waiting in the planners, by model.", labels=["model"])
        count = GaugeMetricFamily("adaserve_planners", "Planners that reported within their TTL.")
        held = GaugeMetricFamily("adaserve_planner_held_jobs", "Jobs a planner holds.", labels=["planner"])
        dec = GaugeMetricFamily("adaserve_planner_decision_seconds",
                                "A planner's scheduler decision time over its last report interval.",
                                labels=["planner", "quantile"])
        by_model: dict[str, int] = {}
        for st in planners:
            for model, n in st.pending.items():
                by_model[model] = by_model.get(model, 0) + n
            held.add_metric([st.planner], st.held_jobs)
            for q, ms in (("0.5", st.decision_p50_ms), ("0.99", st.decision_p99_ms), ("1", st.decision_max_ms)):
                if ms is not None:
                    dec.add_metric([st.planner, q], ms / 1000.0)
        for model, n in sorted(by_model.items()):
            depth.add_metric([model], n)
        count.add_metric([], len(planners))
        return [depth, count, held, dec]

    def _pools(self, pools: list[str], groups: list[Any], workers: list[WorkerHeartbeat]) -> list[Metric]:
        inflight = GaugeMetricFamily("adaserve_pool_inflight_batches",
                                     "Batches sent to a pool and not yet finished (its group's lag + pending).",
                                     labels=["pool"])
        unread = GaugeMetricFamily("adaserve_pool_unread_batches", "Batches no worker of the pool has read yet.",
                                   labels=["pool"])
        slots = GaugeMetricFamily("adaserve_pool_slots", "Batch slots the pool's live workers offer.", labels=["pool"])
        count = GaugeMetricFamily("adaserve_pool_workers", "Live workers in the pool.", labels=["pool"])
        for pool, reply in zip(pools, groups):
            for name, lag, pending in _groups(reply):
                if name == pool:
                    inflight.add_metric([pool], pending + (lag or 0))
                    if lag is not None:
                        unread.add_metric([pool], lag)
            mine = [w for w in workers if w.pool == pool]
            slots.add_metric([pool], sum(w.slots for w in mine))
            count.add_metric([pool], len(mine))
        return [inflight, unread, slots, count]

    def _workers(self, workers: list[WorkerHeartbeat]) -> list[Metric]:
        slots = GaugeMetricFamily("adaserve_worker_slots", "Batch slots a worker offers.", labels=["worker", "pool"])
        busy = GaugeMetricFamily("adaserve_worker_busy_slots", "A worker's slots holding a batch.",
                                 labels=["worker", "pool"])
        gpu = {k: GaugeMetricFamily(name, text, labels=["worker", "pool"]) for k, (name, text, _) in GPU_GAUGES.items()}
        energy = CounterMetricFamily("adaserve_worker_gpu_energy_joules", "GPU energy since the driver loaded (NVML).",
                                     labels=["worker", "pool"])
        for w in workers:
            slots.add_metric([w.worker, w.pool], w.slots)
            busy.add_metric([w.worker, w.pool], w.busy)
            for k, v in (w.gpu or {}).items():
                if k in GPU_GAUGES:
                    gpu[k].add_metric([w.worker, w.pool], v * GPU_GAUGES[k][2])
                elif k == "energy_j":
                    energy.add_metric([w.worker, w.pool], v)
        return [slots, busy, *gpu.values(), energy]


def _groups(reply: Any) -> Iterator[tuple[str, int | None, int]]:
    """(name, lag or None where the server cannot tell, pending) of each group in an XINFO GROUPS reply."""
    if isinstance(reply, Exception):
        return  # no such stream yet
    for g in reply or ():
        lag = g.get("lag")
        yield _text(g.get("name")), None if lag is None else int(lag), int(g.get("pending", 0))
