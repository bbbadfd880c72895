"""Producers: the client SDK — build jobs, submit them, await their results.

It speaks the wire contract (``adaserve.broker``) and nothing else, so an application that
imports it pulls in no planner, worker or model code. The load generator built on it is
``adaserve.loadgen``; a language model's vocabulary is ``adaserve.models.Vocabulary``.
"""

from adaserve.producers.client import Client
from adaserve.producers.handle import JobHandle
from adaserve.producers.ingest import IngestFigures, measure_ingest
from adaserve.producers.jobs import build_job, encode_checked, make_job
from adaserve.producers.prepared import PreparedJob
from adaserve.producers.results import JobResult, Outcome
from adaserve.producers.text import Tokenizer, completion, generation_job

__all__ = [
    "Client", "IngestFigures", "JobHandle", "JobResult", "Outcome", "PreparedJob", "Tokenizer", "build_job", "completion",
    "encode_checked", "generation_job", "make_job", "measure_ingest",
]
