#!/usr/bin/env bash
# Headless Chromium for the report's render test (Debian's chromium; idempotent).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "chromium ready: $(chromium --version 2>/dev/null | head -1)"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "statebox setup: chromium is missing and this is not a Debian-like system; install Chromium to run the report tests" >&2
  exit 2
fi
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium fonts-dejavu-core >/dev/null
echo "chromium installed: $(chromium --version | head -1)"
