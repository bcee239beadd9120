#!/bin/sh
# Install the real agent CLIs that tests/real drives into <repo>/.tools (no global side
# effects): Claude Code and Codex, each pinned. Idempotent: a CLI already there at its
# pinned version is left alone. CLAUDE_CODE_VERSION / CODEX_VERSION override the pins.
#
# Both come from the npm registry as a small wrapper plus a native binary in a platform
# package (an optional dependency: @anthropic-ai/claude-code-<os>-<arch>, and
# @openai/codex-<os>-<arch> published as @openai/codex@<version>-<os>-<arch>).
set -eu
CLAUDE_VERSION="${CLAUDE_CODE_VERSION:-2.1.330}"
CODEX_VERSION="${CODEX_VERSION:-0.169.0}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PREFIX="$ROOT/.tools"
CLAUDE_BIN="$PREFIX/node_modules/.bin/claude"
CODEX_BIN="$PREFIX/node_modules/.bin/codex"

# --version only prints; still keep each CLI off the network and out of the real HOME.
claude_version() {
    [ -x "$CLAUDE_BIN" ] || return 0
    HOME="$SCRATCH" CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 \
        DISABLE_AUTOUPDATER=1 ANTHROPIC_BASE_URL=http://127.0.0.1:9 "$CLAUDE_BIN" --version \
        2>/dev/null | cut -d' ' -f1 || true
}
codex_version() {  # prints "codex-cli 0.169.0"
    [ -x "$CODEX_BIN" ] || return 0
    HOME="$SCRATCH" CODEX_HOME="$SCRATCH" OPENAI_BASE_URL=http://127.0.0.1:9 "$CODEX_BIN" \
        --version 2>/dev/null | cut -d' ' -f2 || true
}

SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
want=""
if [ "$(claude_version)" = "$CLAUDE_VERSION" ]; then
    echo "claude $CLAUDE_VERSION already installed at $CLAUDE_BIN"
else
    want="$want @anthropic-ai/claude-code@$CLAUDE_VERSION"
fi
if [ "$(codex_version)" = "$CODEX_VERSION" ]; then
    echo "codex $CODEX_VERSION already installed at $CODEX_BIN"
else
    want="$want @openai/codex@$CODEX_VERSION"
fi
[ -n "$want" ] || exit 0
mkdir -p "$PREFIX"
# One npm run for whatever is missing (each is saved to .tools/package.json, so the other
# stays installed). Claude's postinstall copies its native binary over bin/claude.exe.
# shellcheck disable=SC2086
npm install --prefix "$PREFIX" --no-fund --no-audit $want
for cli in claude codex; do
    case "$cli" in
        claude) have="$(claude_version)"; pin="$CLAUDE_VERSION"; bin="$CLAUDE_BIN" ;;
        codex) have="$(codex_version)"; pin="$CODEX_VERSION"; bin="$CODEX_BIN" ;;
    esac
    if [ "$have" != "$pin" ]; then
        echo "$cli $pin did not install at $bin (it says ${have:-nothing})" >&2
        exit 1
    fi
    echo "$cli $pin ready at $bin"
done
