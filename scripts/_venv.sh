# Sourced by demo.sh and test.sh: create ./.venv and install the project when it is missing or stale.
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=".venv/.adaserve-installed${EXTRAS:-}"

# pip's own output is hundreds of lines; it goes to a log, and a terminal sees one line that counts
# the seconds (pip's log is printed only when it fails).
_adaserve_pip() {
  local log=".venv/install.log" t=0 pid rc
  .venv/bin/python -m pip install --upgrade pip >"$log" 2>&1 && .venv/bin/python -m pip install -e ".${EXTRAS:-}" >>"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if [ -t 2 ]; then printf '\r  installing adaserve and its dependencies into .venv… %3d s' "$t" >&2; fi
    sleep 1
    t=$((t + 1))
  done
  rc=0
  wait "$pid" || rc=$?
  if [ -t 2 ]; then printf '\r  installed adaserve and its dependencies into .venv in %d s        \n' "$t" >&2; fi
  if [ "$rc" -ne 0 ]; then
    tail -n 40 "$log" >&2
    echo "error: the install failed (the whole log: $log)" >&2
    return "$rc"
  fi
}

if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ]; then
  echo "installing adaserve and its dependencies into .venv (the first run takes a minute or two)" >&2
  _adaserve_pip
  touch "$stamp"
fi
