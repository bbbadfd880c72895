"""The point estimate the plan-ahead baselines use: batch latency from the *mean* execution time.

Static-model systems profile one latency per batch size. For a dynamic model that becomes
``l(k) = c0 + c1 * k * mean``: the hardware line ``c0, c1`` is measured correctly (fitted on each
batch's true maximum when per-request times are known), but the request's execution time is
taken as its running mean, which a batch's maximum almost always exceeds (ORLOJ Sec. 2.3).
"""

from __future__ import annotations

from adaserve.planner.core import Feedback
from adaserve.planner.orloj.batch_latency import BatchLatencyFit
from adaserve.planner.orloj.prior import Prior, prior_from_profile

__all__ = ["MeanLatency"]


class MeanLatency:
    def __init__(self, prior: Prior | None = None, *, smoothing: float = 0.01) -> None:
        p = prior or prior_from_profile(None)
        self.fit = BatchLatencyFit(p.c0, max(p.c1, 1e-4))
        self.mean_s = p.mean_s
        self._w = smoothing

    def predict(self, size: int) -> float:
        return self.fit.predict(size, self.mean_s)

    def update(self, fb: Feedback) -> None:
        per = fb.request_exec_s
        known = bool(per) and (fb.size <= 1 or any(abs(s - fb.exec_s) > 0.01 * fb.exec_s for s in per))
        if known:
            for s in per:
                if s > 0:
                    self.mean_s += self._w * (s - self.mean_s)
            self.fit.update(fb.size, max(per), fb.exec_s)
        elif fb.size == 1:
            self.mean_s += self._w * (fb.exec_s - self.mean_s)
            self.fit.update(1, fb.exec_s, fb.exec_s)
        else:
            # only the batch time is known: attribute it as if every request took the mean
            self.fit.update(fb.size, self.mean_s, fb.exec_s)
