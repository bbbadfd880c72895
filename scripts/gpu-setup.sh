#!/usr/bin/env bash
# Install adaserve for a GPU host into ./.venv (or $VENV): onnxruntime-gpu at the version the
# project's onnxruntime pin allows, torch's CUDA build at the project's torch pin, then adaserve.
# CPU hosts need none of this (`pip install -e .` is enough); gpu-check.sh runs it when asked.
#   ./scripts/gpu-setup.sh            (PYTHON picks the interpreter; ORT_VERSION / TORCH_INDEX override)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
venv="${VENV:-.venv}"
[ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet)

# The pins, read from pyproject.toml so that this script never drifts from them.
ort_pin=$("$venv/bin/python" - <<'PY'
import re, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print(next(re.split(r";", d)[0].strip()[len("onnxruntime-gpu"):] for d in deps if d.startswith("onnxruntime-gpu")))
PY
)
torch_pin=$("$venv/bin/python" - <<'PY'
import tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print(next(d.split(";")[0].strip() for d in deps if d.startswith("torch")))
PY
)
ort_spec="onnxruntime-gpu${ORT_VERSION:+==$ORT_VERSION}"
[ -n "${ORT_VERSION:-}" ] || ort_spec="onnxruntime-gpu$ort_pin"
echo "== $ort_spec, $torch_pin (CUDA build), adaserve" >&2
# The CPU-only onnxruntime wheel shadows the GPU one when both are installed.
"$venv/bin/python" -m pip uninstall --quiet -y onnxruntime 2>/dev/null || true
"${pip[@]}" "$ort_spec"
# PyPI's Linux x86-64 torch wheels are CUDA builds (they bring the CUDA and cuDNN libraries that
# onnxruntime-gpu loads too); TORCH_INDEX picks another CUDA index (e.g. .../whl/cu130).
"${pip[@]}" ${TORCH_INDEX:+--index-url "$TORCH_INDEX"} "$torch_pin"
"${pip[@]}" -e ".[test]"
"$venv/bin/python" -c "import onnxruntime as o, torch; from adaserve.workers.runtime import gpu_unavailable as g; \
print('onnxruntime', o.__version__, o.get_available_providers()); print('torch', torch.__version__, 'cuda', torch.cuda.is_available()); \
print('cuda provider:', g() or 'loads')"
