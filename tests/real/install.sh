#!/bin/sh
# Install the real Claude Code CLI into <repo>/.tools (no global side effects), for
# tests/real. Idempotent: does nothing when the pinned version is already there.
# CLAUDE_CODE_VERSION overrides the pinned version.
set -eu
VERSION="${CLAUDE_CODE_VERSION:-2.1.330}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PREFIX="$ROOT/.tools"
BIN="$PREFIX/node_modules/.bin/claude"
if [ -x "$BIN" ]; then
    # --version only prints; still keep it off the network and out of the real HOME.
    have="$(HOME="$(mktemp -d)" CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 \
        DISABLE_AUTOUPDATER=1 ANTHROPIC_BASE_URL=http://127.0.0.1:9 "$BIN" --version 2>/dev/null \
        | cut -d' ' -f1 || true)"
    if [ "$have" = "$VERSION" ]; then
        echo "claude $VERSION already installed at $BIN"
        exit 0
    fi
fi
mkdir -p "$PREFIX"
# The wrapper's postinstall copies the native binary from the platform package
# (@anthropic-ai/claude-code-<os>-<arch>, an optional dependency) over bin/claude.exe.
npm install --prefix "$PREFIX" --no-fund --no-audit \
    "@anthropic-ai/claude-code@$VERSION"
echo "installed claude $VERSION at $BIN"
