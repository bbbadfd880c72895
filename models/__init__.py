"""The model zoo: real models on real data, their manifests, and where their artifacts are found.

Importing this package never imports torch or onnxruntime; the builders (one module per family)
are imported by ``adaserve models build`` only.
"""

from adaserve.models.datasets import load_av_digits, load_fsdd, sample_inputs
from adaserve.models.manifest import InputSpec, ModelInfo, VariantInfo, read_manifest
from adaserve.models.registry import (
    BUILDERS,
    build_model,
    find_model,
    list_models,
    load_info,
    model_names,
    zoo_dir,
)
from adaserve.models.vocab import Vocabulary

__all__ = [
    "BUILDERS",
    "InputSpec",
    "ModelInfo",
    "VariantInfo",
    "Vocabulary",
    "build_model",
    "find_model",
    "list_models",
    "load_av_digits",
    "load_fsdd",
    "load_info",
    "model_names",
    "read_manifest",
    "sample_inputs",
    "zoo_dir",
]
