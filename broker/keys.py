"""Every Redis key adaserve uses, built in one place.

All keys of a namespace share the hash tag ``{ns}`` so that multi-key scripts (the finaliser)
stay within one slot on Redis Cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

PLANNER_GROUP = "planners"
# Longest the list of ORLOJ's measured-alone times grows (``Keys.orloj_samples``): writers trim to it.
ORLOJ_SAMPLES_CAP = 10_000


@dataclass(frozen=True)
class Keys:
    namespace: str = "ada"

    @property
    def _p(self) -> str:
        return "{" + self.namespace + "}"

    @property
    def jobs(self) -> str:
        """Ingress stream: producers XADD jobs here."""
        return f"{self._p}:jobs"

    def batches(self, pool: str) -> str:
        """Planned batches for one worker pool; the pool name is the consumer group."""
        return f"{self._p}:batches:{pool}"

    @property
    def telemetry(self) -> str:
        return f"{self._p}:telemetry"

    @property
    def dead(self) -> str:
        """Dead letters: reason, source stream and the original bytes."""
        return f"{self._p}:dead"

    def reply(self, client_id: str) -> str:
        return f"{self._p}:reply:{client_id}"

    def job(self, job_id: str) -> str:
        """Per-job hash: request count, remaining, per-status counts and ``d:<request>`` flags."""
        return f"{self._p}:job:{job_id}"

    @property
    def workers(self) -> str:
        """Hash worker id -> last heartbeat (msgpack)."""
        return f"{self._p}:workers"

    @property
    def planners(self) -> str:
        """Hash planner consumer -> its last ``planner.state`` (msgpack), for health checks."""
        return f"{self._p}:planners"

    @property
    def placement(self) -> str:
        """Hash planner consumer -> its last ``placement.state`` (msgpack): ``adaserve placement``."""
        return f"{self._p}:placement"

    def profile(self, model: str) -> str:
        return f"{self._p}:profile:{model}"

    def helios_table(self, family: str) -> str:
        """HELIOS's state for a task family (msgpack: phase, model, depth, the PHT rows), as the
        planner last stored it; ``adaserve helios pht`` reads it."""
        return f"{self._p}:helios:{family}"

    def orloj_samples(self, model: str) -> str:
        """List of execution times measured alone by ORLOJ's online profiler (JSON items)."""
        return f"{self._p}:orloj:samples:{model}"

    @property
    def rq_queue(self) -> str:
        """Name of the rq queue of background profiling jobs."""
        return f"{self.namespace}-profile"


# rq names its own keys, most of them not per queue (``rq:job:<uuid>``, its registries, locks):
# the profiler, which runs an rq worker, holds all of them.
RQ_KEYS = "rq:*"


def rq_enqueue_patterns(queue: str) -> tuple[str, ...]:
    """The rq keys that enqueueing on ``queue`` and looking for its live workers touch."""
    return (f"rq:queue:{queue}", "rq:queues", "rq:job:*", f"rq:workers:{queue}", "rq:worker:*")
