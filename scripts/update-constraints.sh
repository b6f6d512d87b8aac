#!/usr/bin/env bash
# Write constraints.txt: the exact versions a fresh, unconstrained install of statebox resolves today.
#
# Why a lock: pyproject names lower bounds only, so each fresh `make setup` took each library's newest
# release, and a release moved under the tests between two CI runs of the same commit (anthropic 2.15.0
# dropped a retired model from its list; inspect_ai's private log writer, which --write-scores uses, can
# move the same way). `make setup` installs under constraints.txt, so a fresh machine gets the versions the
# tests last passed with; running this script, then `make test`, is how they move, on purpose.
#
# --tracker: write statebox/sandbox/image/requirements-tracker.txt instead, the tracker image's venv as
# the image statebox-tracker:latest holds it. To move those versions: leave that file its comment lines
# only, `make setup` (the image resolves anew), run the tracker tests, then this script with --tracker.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ "${1:-}" = "--tracker" ]; then
  lock=statebox/sandbox/image/requirements-tracker.txt
  header=$(grep '^#' "$lock")
  frozen=$(docker run --rm --network none --entrypoint /opt/tracker/bin/pip statebox-tracker:latest \
             freeze --local --disable-pip-version-check)
  # torchcodec: pinned in the Dockerfile, installed on its own; opencv-python: installed, then removed
  # again (the sandbox's headless build serves cv2), so not in the freeze: the host lock's version
  { echo "$header"; grep -v -i '^torchcodec==' <<< "$frozen"; grep -i '^opencv-python==' constraints.txt; } > "$lock"
  echo "$lock: $(grep -c '==' "$lock") pins"
  exit 0
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$PYTHON" -m venv "$scratch/venv"
"$scratch/venv/bin/python" -m pip install -q --upgrade pip
"$scratch/venv/bin/python" -m pip install -q '.[dev,cluster]'
{
  echo "# made by scripts/update-constraints.sh on $(date -u +%Y-%m-%d) with $("$scratch/venv/bin/python" --version);"
  echo "# \`make setup\` installs under it (scripts/setup/10-venv.sh). Do not edit by hand: rerun the script."
  # pip's own version too (--all): the resolver that reads this file is part of the result
  "$scratch/venv/bin/python" -m pip freeze --all | grep -v -i '^statebox[ =@]' | grep -v -i '^setuptools=\|^wheel='
} > constraints.txt
echo "constraints.txt: $(grep -c '==' constraints.txt) pins"
