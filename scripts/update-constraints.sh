#!/usr/bin/env bash
# Write constraints.txt: the exact versions a fresh, unconstrained install of statebox resolves today.
#
# Why a lock: pyproject names lower bounds only, so each fresh `make setup` took each library's newest
# release, and a release moved under the tests between two CI runs of the same commit (anthropic 2.15.0
# dropped a retired model from its list; inspect_ai's private log writer, which --write-scores uses, can
# move the same way). `make setup` installs under constraints.txt, so a fresh machine gets the versions the
# tests last passed with; running this script, then `make test`, is how they move, on purpose.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
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
