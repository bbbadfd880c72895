"""The planner's periodic ``planner.state``: pending requests per model, held jobs, how long
its scheduler decisions took since the last report, and how late it heard of finished batches.

Once per ``heartbeat_s``, never per request: the exporter turns it into queue-depth gauges and a
decision-time summary, and ``adaserve health --planner`` reads the copy kept in the planners hash.
Timing the decisions is wall-clock work, so it lives here in the shell, not in the schedulers.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sized

from adaserve.broker.events import HEARD_MAX_SPANS, HEARD_QUANTILES, HEARD_SPAN_MS, HeardSpan, PlannerState

__all__ = ["StateReport"]

# Decisions kept per interval for the percentiles: past this the report says the count, and the
# percentiles cover the first ones (a planner making 10k decisions a second is not short of data).
MAX_SAMPLES = 10_000
STEP_BANDS = (0.1, 0.3, 0.5, 0.7, 0.9)  # PlannerState.step_quantiles_ms and send_quantiles_ms


class _Samples:
    """One interval's values of a figure: how many came, and the first ``MAX_SAMPLES`` of them."""

    __slots__ = ("count", "values")

    def __init__(self) -> None:
        self.count = 0
        self.values: list[float] = []

    def add(self, value: float) -> None:
        self.count += 1
        if len(self.values) < MAX_SAMPLES:
            self.values.append(value)

    def take(self) -> tuple[int, list[float]]:
        """The count and the sorted values; the next interval starts empty."""
        out = self.count, sorted(self.values)
        self.count, self.values = 0, []
        return out


class StateReport:
    def __init__(self, planner: str, interval_s: float) -> None:
        self.planner, self.interval_s = planner, interval_s
        self._decisions = _Samples()  # ms of each scheduler call
        self._heard: dict[int, list[float]] = {}  # span (finish ms // HEARD_SPAN_MS) -> lags
        self._steps = _Samples()  # busy ms of the steps that sent a batch
        self._sends = _Samples()  # per batch, ms from its decision to reaching the server
        self._next = 0.0

    @staticmethod
    def start() -> float:
        return time.perf_counter()

    def decided(self, started: float) -> None:
        self._decisions.add((time.perf_counter() - started) * 1000.0)

    def heard(self, finished_ms: float, now_ms: float) -> None:
        """A batch that finished at ``finished_ms``, read by a step that came to dispatch at
        ``now_ms``: live, a freed slot waits that long for the planner, which the pipeline
        simulator has to know to predict a policy."""
        lags = self._heard.setdefault(int(finished_ms // HEARD_SPAN_MS), [])
        if len(lags) < MAX_SAMPLES:
            lags.append(max(now_ms - finished_ms, 0.0))

    def stepped(self, busy_ms: float) -> None:
        """A loop step that sent a batch was busy ``busy_ms`` (its blocking reads left out)."""
        self._steps.add(max(busy_ms, 0.0))

    def sent(self, lags_ms: list[float]) -> None:
        """Batches decided that many ms before the step's commands reached the server."""
        for lag in lags_ms:
            self._sends.add(max(lag, 0.0))

    def due(self) -> bool:
        return time.monotonic() >= self._next

    def take(self, now_ms: float, scheds: Mapping[str, Sized], held_jobs: int,
             slots: Mapping[str, int] | None = None, queue_ms: float | None = None) -> PlannerState:
        """The report for the interval that ends now; the next one starts empty."""
        self._next = time.monotonic() + self.interval_s
        count, ms = self._decisions.take()
        spans = sorted(self._heard.items())[-HEARD_MAX_SPANS:]
        self._heard = {}
        step_count, steps = self._steps.take()
        send_count, sends = self._sends.take()
        return PlannerState(
            ts=now_ms, planner=self.planner, pending={m: len(s) for m, s in scheds.items()}, held_jobs=held_jobs,
            decisions=count, decision_p50_ms=_rank(ms, 0.50), decision_p99_ms=_rank(ms, 0.99),
            decision_max_ms=ms[-1] if ms else None,
            heard=[HeardSpan(at_ms=span * HEARD_SPAN_MS, batches=len(lags), quantiles_ms=_quantiles(sorted(lags)))
                   for span, lags in spans],
            steps=step_count, step_quantiles_ms=_bands(steps) if steps else [], slots=dict(slots or {}),
            sends=send_count, send_quantiles_ms=_bands(sends) if sends else [], queue_ms=queue_ms,
        )


def _rank(ms: list[float], q: float) -> float | None:
    """Nearest-rank percentile of sorted values."""
    return ms[min(len(ms) - 1, int(q * len(ms)))] if ms else None


def _bands(values: list[float]) -> list[float]:
    """The 10, 30, 50, 70 and 90 % nearest-rank quantiles of sorted values (not empty): each
    stands for a fifth of them. The minimum and maximum would not do for steps: a quarter of
    the samples spread evenly up to the one 20-40 ms pause of a second put the simulated loop's
    90th percentile at 5-20 ms against a median of 1.3-2."""
    return [round(values[min(len(values) - 1, int(p * len(values)))], 3) for p in STEP_BANDS]


def _quantiles(values: list[float]) -> list[float]:
    """``HEARD_QUANTILES`` evenly spaced nearest-rank quantiles of sorted values (not empty)."""
    steps = HEARD_QUANTILES - 1
    return [round(values[min(len(values) - 1, i * len(values) // steps)], 3) for i in range(steps + 1)]
