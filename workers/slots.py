"""The batches a worker holds: read from its stream and not yet finished (acked).

The count is what the heartbeat advertises as ``busy``; the ids are what the heartbeat renews
so that a batch waiting in this worker's queue is never mistaken for one held by a dead worker.
"""

from __future__ import annotations

import threading


class Slots:
    def __init__(self, total: int) -> None:
        self.total = total
        self._held: set[str] = set()
        self._cond = threading.Condition()

    def free(self) -> int:
        with self._cond:
            return max(0, self.total - len(self._held))

    def busy(self) -> int:
        with self._cond:
            return len(self._held)

    def ids(self) -> list[str]:
        with self._cond:
            return list(self._held)

    def hold(self, entry_id: str) -> None:
        with self._cond:
            self._held.add(entry_id)

    def release(self, entry_id: str) -> None:
        with self._cond:
            self._held.discard(entry_id)
            self._cond.notify_all()

    def wait_free(self, timeout: float) -> int:
        """Block until a slot is free (or ``timeout`` passes); returns the free count."""
        with self._cond:
            self._cond.wait_for(lambda: len(self._held) < self.total, timeout)
            return max(0, self.total - len(self._held))

    def wait_empty(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._held, timeout)
