#!/usr/bin/env bash
# What the sandbox tests need (tests/integration/test_sandbox_*.py, tests/real/test_sandbox_*.py):
# bubblewrap, Debian's package. Idempotent: does nothing when bwrap is there. Without it
# those tests skip, each saying why (the daemon's own probe: pokeralphd.sandbox.probe).
set -euo pipefail
if command -v bwrap >/dev/null; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "install-bwrap: no apt-get here; install bubblewrap yourself (the sandbox tests skip)" >&2
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends bubblewrap >/dev/null
echo "install-bwrap: $(bwrap --version)"
