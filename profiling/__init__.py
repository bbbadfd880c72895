"""The offline profiler: latency, quality and execution-time profiles, run as rq jobs.

``measure_variant``/``measure_model_variant``/``profile_model`` measure without rq (benchmarks,
tests); ``jobs`` enqueues and serves them on rq with a JSON serializer; ``store`` merges results
into ``Keys.profile(model)`` and ``<data_dir>/profiles/<model>.json``; ``show`` renders them.
Importing this package does not import torch or onnxruntime.
"""

from adaserve.profiling.measure import MeasureConfig, measure_variant, time_runs
from adaserve.profiling.run import measure_model_variant, profile_model
from adaserve.profiling.store import (
    load,
    load_file,
    merge,
    merge_into_redis,
    profile_path,
    save_file,
    stored_models,
)

__all__ = [
    "MeasureConfig", "load", "load_file", "measure_model_variant", "measure_variant", "merge",
    "merge_into_redis", "profile_model", "profile_path", "save_file", "stored_models", "time_runs",
]
