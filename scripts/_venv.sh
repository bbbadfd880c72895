# Sourced by demo.sh and test.sh: create ./.venv and install the project when it is missing or stale.
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=".venv/.adaserve-installed${EXTRAS:-}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ]; then
  echo "installing adaserve and its dependencies into .venv (first run takes a minute)…" >&2
  .venv/bin/python -m pip install --quiet --upgrade pip >&2
  .venv/bin/python -m pip install --quiet -e ".${EXTRAS:-}" >&2
  touch "$stamp"
fi
