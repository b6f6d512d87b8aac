#!/usr/bin/env bash
# Host ffmpeg/ffprobe: workspaces are cut and de-identified with them, and the tool tests and
# perf/frame_decode.py compare vtools against them. Host ripgrep (rg): perf/audit_throughput.py's
# peer for the auditor. Idempotent: a no-op when all three exist.
set -euo pipefail

if command -v ffmpeg > /dev/null && command -v ffprobe > /dev/null && command -v rg > /dev/null; then
  echo "ffmpeg: $(ffmpeg -version | sed -n 1p | cut -d' ' -f1-3); $(rg --version | sed -n 1p)"; exit 0
fi
if ! command -v apt-get > /dev/null; then
  echo "ffmpeg/ripgrep: missing, and this is not a Debian/Ubuntu machine; install ffmpeg and ripgrep and re-run 'make setup'" >&2
  exit 2
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo > /dev/null; then SUDO="sudo"; else
    echo "ffmpeg/ripgrep: missing and not root (no sudo); install ffmpeg and ripgrep yourself" >&2; exit 2
  fi
fi
echo "ffmpeg, ripgrep: installing with apt ..."
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends ffmpeg ripgrep > /dev/null
echo "ffmpeg: $(ffmpeg -version | sed -n 1p | cut -d' ' -f1-3); $(rg --version | sed -n 1p)"
