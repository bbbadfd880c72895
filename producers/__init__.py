"""Producers: the client SDK (submit jobs, await results), arrival processes and the load generator."""

from adaserve.workload.arrivals import PATTERNS, arrivals, constant, gaps_of, poisson, replay
from adaserve.producers.client import Client, JobHandle
from adaserve.producers.ingest import IngestFigures, measure_ingest
from adaserve.producers.jobs import build_job, encode_checked, make_job
from adaserve.producers.load import InputSource, LoadOptions, held_out, load_options, run_load
from adaserve.producers.results import JobResult
from adaserve.producers.summary import LoadSummary, summarize
from adaserve.producers.text import Vocabulary, completion, generation_job
from adaserve.producers.trace import TRACES, Trace, load_trace

__all__ = [
    "PATTERNS", "TRACES",
    "Client", "IngestFigures", "InputSource", "JobHandle", "JobResult", "LoadOptions", "LoadSummary", "Trace",
    "Vocabulary", "arrivals", "build_job", "completion", "constant", "encode_checked", "gaps_of", "generation_job",
    "held_out", "load_options", "load_trace", "make_job", "measure_ingest", "poisson", "replay", "run_load",
    "summarize",
]
