"""What the live MOSEL scheduler's parts share: the model's subset costs and, once its strategy
matrix is ready, the selector over it."""

from __future__ import annotations

from .costs import SubsetCosts
from .matrix import StrategyMatrix
from .selector import MODALITY_POLICIES, ModalitySelector
from .strategy import Strategy


class Selection:
    """The costs, the matrix and the selector, swapped together when the matrix arrives.

    One object shared by reference: the matrix may be built on the monitor thread after the
    scheduler's parts exist, and every part must then see the same costs and selector.
    """

    def __init__(self, costs: SubsetCosts, policy: str, *, seed: int = 0, solve_budget_s: float = 0.05,
                 learn_rate: float = 0.2) -> None:
        if policy not in MODALITY_POLICIES:
            raise ValueError(f"unknown modality policy {policy!r} (choose from {', '.join(MODALITY_POLICIES)})")
        self.costs, self.policy = costs, policy
        self.matrix: StrategyMatrix | None = None
        self.selector: ModalitySelector | None = None
        self._seed, self._budget_s, self._learn_rate = seed, solve_budget_s, learn_rate

    def use(self, matrix: StrategyMatrix) -> None:
        self.matrix, self.costs = matrix, matrix.costs
        self.selector = ModalitySelector(matrix, self.policy, seed=self._seed, solve_budget_s=self._budget_s,
                                         learn_rate=self._learn_rate)

    def strategy_s(self, s: Strategy) -> float:
        """Predicted seconds of strategy ``s`` run alone, the profile corrected by feedback so far."""
        return self.selector.cost_s(s) if self.selector is not None else s.latency_s

    def run_s(self, subset: str, k: int) -> float:
        """Predicted seconds for one batch of ``k`` requests on ``subset``, likewise corrected."""
        if self.selector is not None:
            return self.selector.batch_s(subset, k)
        return self.costs.run_ms(self.costs.subsets.index(subset), k) / 1e3
