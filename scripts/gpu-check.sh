#!/usr/bin/env bash
# The GPU checks, for a host with a GPU and adaserve installed (CI has no GPU and skips them):
# the GPU tests, `adaserve bench gpu`, and GPU profiles of every model. Everything lands in OUT.
#   ./scripts/gpu-check.sh [OUT]        (default ./out/gpu; PYTHON picks the interpreter;
#                                        SETUP=1 first installs the GPU wheels: scripts/gpu-setup.sh)
set -uo pipefail
out="${1:-out/gpu}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
export ADASERVE_DATA_DIR="${ADASERVE_DATA_DIR:-$out/data}" PYTHONUNBUFFERED=1
status=0
step() { echo "== $*" >&2; }

if [ "${SETUP:-0}" = 1 ]; then
  step "setup"
  ./scripts/gpu-setup.sh || exit 1
  PY="${VENV:-.venv}/bin/python"
fi

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/nvidia-smi.csv"
"$PY" -c "import onnxruntime as o, torch; from adaserve.workers.runtime import gpu_unavailable as g; \
print('onnxruntime', o.__version__, o.get_available_providers()); print('torch', torch.__version__, torch.cuda.is_available()); \
print('cuda provider:', g() or 'loads')" | tee "$out/providers.txt"

step "GPU tests"
"$PY" -m pytest -q -rs -p no:cacheprovider tests/workers/runtime/test_gpu_runners.py tests/test_gpu_e2e.py \
  tests/workers/runtime/test_bound.py tests/bench/test_native.py 2>&1 | tee "$out/pytest-gpu.txt" || status=1

step "bench gpu"
"$PY" -m adaserve bench gpu --json --repeats "${REPEATS:-50}" > "$out/bench-gpu.json" || status=1
cp "$ADASERVE_DATA_DIR/bench/gpu.png" "$out/" 2>/dev/null || true

step "GPU profiles"
for model in ${MODELS:-av-digits ee-audio fsdd-cnn effnet-lite0 ee-lm-s}; do
  "$PY" -m adaserve profile "$model" --local --device gpu || status=1
done
"$PY" -m adaserve profile show --json > "$out/profiles.json" || status=1

# StarONNX (issue 13): per-unit GPU times and the cut the split rule picks on them (the shipped
# times are the CPU's); native onnxruntime against the pipeline on one GPU (Fig. 3's comparison);
# the placement sweep live, when `adaserve bench placement` exists in this checkout.
step "StarONNX: split points on the GPU"
for model in effnet-lite0 ee-lm-s-split; do
  "$PY" -m adaserve profile nodes "$model" --device gpu --batch 8 --runs 50 --json \
    > "$out/node-times-$model.json" || status=1
done
step "StarONNX: pipeline vs native onnxruntime"
"$PY" -m adaserve models build --only effnet-lite0 --only ee-lm-s-split || status=1
"$PY" -m adaserve bench native --device gpu --json --batch 1,8,32 > "$out/native-gpu.json" || status=1
"$PY" -m adaserve bench native --device gpu --wire uint8 --json --batch 1,8,32 > "$out/native-gpu-uint8.json" || status=1
step "bench placement (HEFT on this host's GPU and CPU profile; docs/placement.md)"
"$PY" -m adaserve bench placement --json --live --profile "$out/bench-gpu.json" --plot "$out/placement.png" \
  > "$out/bench-placement.json" || status=1
"$PY" -m pytest -q -rs -p no:cacheprovider tests/serving/test_heft.py 2>&1 | tee "$out/pytest-heft.txt" || status=1
exit $status
