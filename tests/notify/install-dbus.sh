#!/usr/bin/env bash
# What the notification tests need: dbus-daemon, for a private session bus (Debian's
# package: dbus-daemon, pulled in by dbus). Idempotent: does nothing when it is there.
set -euo pipefail
if command -v dbus-daemon >/dev/null; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "install-dbus: no apt-get here; install dbus-daemon yourself (the D-Bus tests skip)" >&2
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends dbus-daemon >/dev/null
echo "install-dbus: $(dbus-daemon --version | head -1)"
