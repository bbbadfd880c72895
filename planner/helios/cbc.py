"""The Confidence Breach Counter (HELIOS Sec. 3.4.1): breaches among the last ``window`` tokens.

A token breaches when no exit head up to the loaded depth reached the confidence threshold. It
is still emitted (most such tokens would not change with more layers, the paper's Insight 1);
only when more than ``limit`` of the last ``window`` tokens breached does the planner weigh
loading more layers against switching model, and the counter starts again after that decision.
"""

from __future__ import annotations

from collections import deque

from adaserve.broker.errors import ConfigError


class BreachCounter:
    """A sliding window of breach flags with a running count (O(1) per token)."""

    def __init__(self, window: int = 100, limit: int = 50) -> None:
        if window < 1 or not 0 <= limit < window:
            raise ConfigError(f"breach window must be >= 1 and its limit in 0..window-1, got {window}, {limit}")
        self.window, self.limit = window, limit
        self._flags: deque[bool] = deque(maxlen=window)
        self.count = 0

    def add(self, breached: bool) -> None:
        if len(self._flags) == self.window and self._flags[0]:
            self.count -= 1
        self._flags.append(breached)
        self.count += breached

    def add_many(self, tokens: int, breaches: int) -> bool:
        """Count a request's ``tokens`` of which ``breaches`` breached (breaches last, the
        conservative order within one request); True when the counter tripped on the way."""
        tripped = False
        for i in range(tokens):
            self.add(i >= tokens - breaches)
            tripped = tripped or self.tripped
        return tripped

    @property
    def tripped(self) -> bool:
        """More than ``limit`` breaches among the last ``window`` tokens."""
        return self.count > self.limit

    def reset(self) -> None:
        self._flags.clear()
        self.count = 0
