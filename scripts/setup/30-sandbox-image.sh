#!/usr/bin/env bash
# Build the sandbox image (only when its content hash changed; a no-op of ~1 s otherwise).
# No registry answering -> a local Debian base is made with debootstrap (about 2 minutes, once).
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/statebox sandbox build --target sandbox
