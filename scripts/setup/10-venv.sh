#!/usr/bin/env bash
# Create .venv with statebox installed editable (idempotent: reinstalls only when pyproject changes).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.statebox-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev,cluster]'
  echo "$want" > "$stamp"
fi
.venv/bin/statebox --help > /dev/null
echo "venv ready: $(.venv/bin/python --version)"
