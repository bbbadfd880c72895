#!/usr/bin/env bash
# The main job: install adaserve into ./.venv (first run only) and run the demo pipeline.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
exec .venv/bin/adaserve demo "$@"
