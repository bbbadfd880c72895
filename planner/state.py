"""What the live planner remembers between loop iterations (no I/O here)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from adaserve.broker.messages import Job


@dataclass
class HeldJob:
    """An accepted job whose ingress entry stays unacked until every request left the planner."""

    job: Job
    entry_id: str
    submitted_ms: float
    undispatched: int
    planned: bool = False
    accuracy: float | None = None  # effective accuracy as planned, once a policy fixed it


@dataclass
class Ewma:
    """Exponentially weighted mean, for the dispatch-to-start wait of each pool."""

    alpha: float = 0.1
    value: float = 0.0
    n: int = 0
    at: float = 0.0  # when the last value came (the clock ``recent`` is asked on)

    def add(self, x: float, at: float = 0.0) -> None:
        self.value = x if self.n == 0 else self.value + self.alpha * (x - self.value)
        self.n += 1
        self.at = at

    def recent(self, now: float, floor: float, half_life: float) -> float:
        """The mean, its excess over ``floor`` halving every ``half_life`` that passes without a
        new value. A mean raised by a stall, read while nothing is dispatched because of it, gets no
        value to lower it: while the pool's in-flight count stayed above zero, a planner could
        expire every request at dispatch for the rest of its life (suspected for the live runs at
        0.000 in docs/orloj.md, which turned out to be the latency fit's; a guard all the same).
        Batches that do finish keep it current: every few ms under load."""
        excess = self.value - floor
        if excess <= 0:
            return self.value
        return floor + excess * float(0.5 ** (max(now - self.at, 0.0) / half_life))


class BatchLength:
    """How long a pool's batches run (ms), each weighted by its own length: recent means of ``t``
    and ``t**2``, and their ratio. A batch sent now waits mostly behind long batches, since a
    short one is soon over. With ee-lm-xs's apps of 4 and 32 tokens, five short batches of
    4 ms to each long one of 25 ms average 7.5 ms by count and 15.7 ms by time."""

    def __init__(self, alpha: float = 0.1) -> None:
        self.t, self.t2 = Ewma(alpha), Ewma(alpha)

    def add(self, ms: float) -> None:
        if ms >= 0:
            self.t.add(ms)
            self.t2.add(ms * ms)

    @property
    def value(self) -> float | None:
        return self.t2.value / self.t.value if self.t.n and self.t.value > 0 else None


WAIT_HALF_LIFE_MS = 100.0  # a busy pool's mean wait, unconfirmed for this long, counts half as much


class Sent(NamedTuple):
    """A batch in flight: its pool, when it was decided (then when it reached the server), whether
    the pool had other batches in flight when it went out, and the policy's ``Decision.token``."""

    pool: str
    ms: float
    busy: bool
    token: int | None


@dataclass
class Inflight:
    """Batches this planner dispatched and has not yet seen finish, by batch id."""

    dispatched: dict[str, Sent] = field(default_factory=dict)
    unstamped: list[str] = field(default_factory=list)

    def add(self, batch_id: str, pool: str, ms: float, busy: bool = False, token: int | None = None) -> None:
        self.dispatched[batch_id] = Sent(pool, ms, busy, token)
        self.unstamped.append(batch_id)

    def stamp(self, ms: float) -> list[float]:
        """The batches added since the last stamp reached the server at ``ms`` (the planner's
        pipeline runs at the end of its step, after whatever else the step did); how long after
        its decision each did."""
        lags = []
        for b in self.unstamped:
            got = self.dispatched.get(b)
            if got is not None:
                lags.append(ms - got.ms)
                self.dispatched[b] = got._replace(ms=ms)
        self.unstamped.clear()
        return lags

    def pop(self, batch_id: str) -> Sent | None:
        return self.dispatched.pop(batch_id, None)

    def prune(self, older_than_ms: float) -> None:
        self.dispatched = {b: v for b, v in self.dispatched.items() if v.ms >= older_than_ms}


@dataclass
class RecentFloor:
    """The smallest of the values seen in the last ``horizon_ms``, 0 when none: a lower bound that
    forgets. Expiry compares deadlines with it, so a bound that stayed high after a slow spell
    could expire every request, and with nothing dispatched nothing would ever lower it again."""

    horizon_ms: float = 2000.0
    # (ms, value), values increasing: a value with a smaller one after it can never be the minimum
    values: deque[tuple[float, float]] = field(default_factory=deque)

    def add(self, ms: float, value: float) -> None:
        while self.values and self.values[-1][1] >= value:
            self.values.pop()
        self.values.append((ms, value))

    def value(self, now_ms: float) -> float:
        while self.values and self.values[0][0] < now_ms - self.horizon_ms:
            self.values.popleft()
        return self.values[0][1] if self.values else 0.0
