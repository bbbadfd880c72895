"""The load generator behind ``adaserve produce``: real held-out inputs from the model zoo, sent
through the client SDK at the times an arrival process or a bundled trace gives, summarised per
request.

It sits above the SDK (``producers``), the model zoo (``models``) and the workloads
(``workload``), which is why it is a package of its own: the SDK stays free of model code.
"""

from adaserve.loadgen.load import InputSource, LoadOptions, held_out, load_options, run_load, schedule
from adaserve.loadgen.summary import LoadSummary, summarize

__all__ = ["InputSource", "LoadOptions", "LoadSummary", "held_out", "load_options", "run_load", "schedule", "summarize"]
