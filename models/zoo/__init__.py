"""The built model zoo shipped with adaserve: one folder per model (manifest, ONNX or
safetensors weights), read by ``adaserve.models.registry``. Data only."""
