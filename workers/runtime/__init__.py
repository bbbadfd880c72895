"""Model runtimes: load a built model variant on a device and run batches of it.

``load_runner(model, variant, device, data_dir)`` is the only entry point workers and the
profiler use; it returns a ``Runner`` whatever the family (onnxruntime for ONNX variants, torch
for the early-exit language models); a language model's is a ``GenerativeRunner`` and a split
model's part a ``SplitPart``.
"""

from adaserve.workers.runtime.base import GenerativeRunner, Runner, RunOutput, SplitPart, choose_providers, gpu_unavailable
from adaserve.workers.runtime.loader import available_models, load_runner

__all__ = ["GenerativeRunner", "RunOutput", "Runner", "SplitPart", "available_models", "choose_providers",
           "gpu_unavailable", "load_runner"]
