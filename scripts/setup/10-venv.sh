#!/usr/bin/env bash
# Create .venv with statebox installed editable, every library at the version constraints.txt names
# (written by scripts/update-constraints.sh: unpinned, a fresh machine took each library's newest release and
# a release moved under the tests). Idempotent: reinstalls only when pyproject or constraints.txt changes.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.statebox-installed
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install -q -c constraints.txt --upgrade pip
  .venv/bin/python -m pip install -q -c constraints.txt -e '.[dev,cluster]'
  # trackeval declares the GUI opencv-python, which shares the cv2 folder with the headless build
  # statebox uses (and needs libGL): keep only the headless one, its files restored
  if .venv/bin/python -m pip show -q opencv-python >/dev/null 2>&1; then
    .venv/bin/python -m pip uninstall -q -y opencv-python
    .venv/bin/python -m pip install -q --force-reinstall --no-deps "opencv-python-headless==$(.venv/bin/python -m pip show opencv-python-headless | sed -n 's/^Version: //p')"
  fi
  echo "$want" > "$stamp"
fi
.venv/bin/statebox --help > /dev/null
# the bootstrap's multinomial draws, compiled by numba into its cache (statebox/scoring/multinomial.py):
# ~2 s once per machine, here rather than in the first `statebox score` (~0.7 s when already cached)
if ! .venv/bin/python -c "import sys; from statebox.scoring.multinomial import warm; sys.exit(not warm())"; then
  echo "numba draws not compiled: the bootstrap uses numpy's (the same numbers, ~4x slower)"
fi
echo "venv ready: $(.venv/bin/python --version)"
