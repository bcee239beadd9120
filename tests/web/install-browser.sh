#!/usr/bin/env bash
# What the dashboard's browser tests need: Chromium's headless shell and its driver from
# Debian's packages (Selenium drives the system's chromedriver; nothing else is
# downloaded), and the full Chromium, which the tests fall back on without the shell.
# Idempotent: does nothing when all three are there.
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null \
  && [ -x /usr/lib/chromium/chromium-headless-shell ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "install-browser: no apt-get here; install chromium and chromedriver yourself" >&2
  echo "(the browser tests skip without them)" >&2
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends \
  chromium chromium-headless-shell chromium-driver >/dev/null
echo "install-browser: $(chromium --version 2>/dev/null || echo chromium installed)"
