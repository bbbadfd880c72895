#!/usr/bin/env bash
# The tests: install adaserve with its test extras into ./.venv (first run only) and run pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="[test]" source scripts/_venv.sh
exec .venv/bin/python -m pytest "$@"
