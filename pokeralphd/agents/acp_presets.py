"""The ACP agents pokeralph knows by name: how each is started in its ACP mode, which
npm package installs it, and how it is told the model and logged in.

``agent.backend gemini`` (Gemini CLI, ``gemini --acp``), ``opencode`` (OpenCode,
``opencode acp``) and ``qwen`` (Qwen Code, ``qwen --acp``) need no command line; ``acp``
with ``agent.command`` starts any other ACP agent (``agent.extraArgs`` are its
arguments). Each preset's default flags are :class:`~pokeralphd.agents.base.Flag` s, so a
user's own (say ``--approval-mode yolo``) replaces ours instead of colliding with it.

Approval: Gemini CLI and Qwen Code are started with ``--approval-mode default`` (they ask
before an edit or a command: the request reaches our rules and the inbox), ``plan`` for
a planning run; OpenCode, whose own default allows edits and commands without asking, is
given ``OPENCODE_PERMISSION`` asking for edits, commands, fetches and paths outside the
working tree (tests/real/ACP-FACTS.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from pokeralphd.agents.base import Flag


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    program: str  # the default executable
    args: tuple[str, ...]  # what always comes first (a subcommand)
    acp_flag: Flag | None  # what puts the CLI in its ACP mode
    approval_flag: str | None  # the CLI's approval-mode option, when it has one
    model_flag: Flag | None  # how the model is named (its value is agent.model)
    package: str  # the npm package that installs it
    auth: str  # how to log in, for an error's hint
    env: tuple[tuple[str, str], ...] = ()  # variables set for it (agent.env overrides them)

    def flags(self, plan: bool, model: str | None) -> list[Flag]:
        flags = [self.acp_flag] if self.acp_flag else []
        if self.approval_flag:
            flags.append(
                Flag((self.approval_flag, "-y", "--yolo"), ("plan" if plan else "default",))
            )
        if model and self.model_flag:
            flags.append(Flag(self.model_flag.names, (model,)))
        return flags


GEMINI = Preset(
    name="gemini",
    program="gemini",
    args=(),
    acp_flag=Flag(("--acp", "--experimental-acp")),
    approval_flag="--approval-mode",
    model_flag=Flag(("-m", "--model")),
    package="@google/gemini-cli",
    auth="set GEMINI_API_KEY in agent.env, or run `gemini` once by hand to log in",
)
QWEN = Preset(
    name="qwen",
    program="qwen",
    args=(),
    acp_flag=Flag(("--acp", "--experimental-acp")),
    approval_flag="--approval-mode",
    model_flag=Flag(("-m", "--model")),
    package="@qwen-code/qwen-code",
    auth=(
        "set OPENAI_API_KEY (and OPENAI_BASE_URL, OPENAI_MODEL) in agent.env, or run "
        "`qwen` once by hand to log in"
    ),
)
OPENCODE = Preset(
    name="opencode",
    program="opencode",
    args=("acp",),
    acp_flag=None,
    approval_flag=None,
    model_flag=None,  # "provider/model" in its config (OPENCODE_CONFIG_CONTENT in agent.env)
    package="opencode-ai",
    auth="run `opencode auth login` once by hand, or set the provider's key in agent.env",
    # OpenCode runs edits and commands without asking unless its permission config says
    # "ask"; OPENCODE_PERMISSION (JSON) is applied over every config file it reads.
    env=(
        (
            "OPENCODE_PERMISSION",
            '{"edit":"ask","bash":"ask","webfetch":"ask","external_directory":"ask"}',
        ),
    ),
)
GENERIC = Preset(
    name="acp",
    program="",
    args=(),
    acp_flag=None,
    approval_flag=None,
    model_flag=None,
    package="",
    auth="see the agent's own documentation on logging in",
)
PRESETS: dict[str, Preset] = {p.name: p for p in (GEMINI, QWEN, OPENCODE, GENERIC)}
