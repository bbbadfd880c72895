#!/usr/bin/env bash
# The GPU checks, for a host with a GPU and adaserve installed (CI has no GPU and skips them):
# the GPU tests, `adaserve bench gpu`, and GPU profiles of every model. Everything lands in OUT.
#   ./scripts/gpu-check.sh [OUT]        (default ./out/gpu; PYTHON picks the interpreter)
set -uo pipefail
out="${1:-out/gpu}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
export ADASERVE_DATA_DIR="${ADASERVE_DATA_DIR:-$out/data}" PYTHONUNBUFFERED=1
status=0
step() { echo "== $*" >&2; }

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/nvidia-smi.csv"
"$PY" -c "import onnxruntime as o, torch; from adaserve.workers.runtime import gpu_unavailable as g; \
print('onnxruntime', o.__version__, o.get_available_providers()); print('torch', torch.__version__, torch.cuda.is_available()); \
print('cuda provider:', g() or 'loads')" | tee "$out/providers.txt"

step "GPU tests"
"$PY" -m pytest -q -rs -p no:cacheprovider tests/workers/runtime/test_gpu_runners.py tests/test_gpu_e2e.py \
  tests/workers/runtime/test_bound.py 2>&1 | tee "$out/pytest-gpu.txt" || status=1

step "bench gpu"
"$PY" -m adaserve bench gpu --json --repeats "${REPEATS:-50}" > "$out/bench-gpu.json" || status=1
cp "$ADASERVE_DATA_DIR/bench/gpu.png" "$out/" 2>/dev/null || true

step "GPU profiles"
for model in ${MODELS:-av-digits ee-audio fsdd-cnn effnet-lite0 ee-lm-s}; do
  "$PY" -m adaserve profile "$model" --local --device gpu || status=1
done
"$PY" -m adaserve profile show --json > "$out/profiles.json" || status=1
step "bench placement (HEFT on this host's GPU and CPU profile; docs/placement.md)"
"$PY" -m adaserve bench placement --json --live --profile "$out/bench-gpu.json" --plot "$out/placement.png" \
  > "$out/bench-placement.json" || status=1
"$PY" -m pytest -q -rs -p no:cacheprovider tests/serving/test_heft.py 2>&1 | tee "$out/pytest-heft.txt" || status=1
exit $status
