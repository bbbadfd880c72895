"""StarONNX's placement: performance histories, HEFT per batch, the batch size for the rate.

``history`` (histories and the hand-over cost), ``clock`` (when each pool is free), ``heft``
(the choice of one batch), ``rate`` (batch size for an arrival rate), ``seed`` (histories from
offline profiles), ``placer`` (the state the planner and the simulator keep). All pure.
"""

from adaserve.planner.heft.heft import Choice, Options, PoolInfo, choose
from adaserve.planner.heft.history import WHOLE, Histories, Key, Transfer
from adaserve.planner.heft.placer import Outcome, Placer, kind_of
from adaserve.planner.heft.rate import RateMeter, batch_for_rate, max_latency

__all__ = ["WHOLE", "Choice", "Histories", "Key", "Options", "Outcome", "Placer", "PoolInfo", "RateMeter", "Transfer",
           "batch_for_rate", "choose", "kind_of", "max_latency"]
