#!/usr/bin/env bash
# Build the tracker image (sandbox image + torch/torchvision/ultralytics/supervision/trackers/lap
# and the in-container runtime `sbtracker`), only when its content hash changed (~1 s otherwise).
# The first build downloads ~5 GB of wheels from PyPI (CUDA-enabled torch; it runs on CPUs too)
# and takes several minutes; the host CA bundle is passed so a TLS-intercepting proxy works.
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$(date +%s)
.venv/bin/statebox sandbox build --target tracker
echo "tracker image ready in $(( $(date +%s) - started ))s"
