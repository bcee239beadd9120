#!/usr/bin/env bash
# What the Neovim plugin's tests need: Neovim 0.7 or newer, Debian's package (bookworm has
# 0.7.2, which the plugin targets). Idempotent: does nothing when nvim is there.
set -euo pipefail
if command -v nvim >/dev/null; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "install-nvim: no apt-get here; install Neovim (0.7 or newer) yourself" >&2
  echo "(the Neovim plugin's tests skip without it)" >&2
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends neovim >/dev/null
echo "install-nvim: $(nvim --version 2>/dev/null | head -1 || echo neovim installed)"
