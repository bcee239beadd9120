"""The read-only default rules: what the local agent may do without asking anyone.

They are ordinary approval rules (:class:`~pokeralph_core.approval.ApprovalRule`)
with fixed ids, written once into the **user's** config layer (``approvalRules`` of
``{config}/pokeralph/config.json``), where every other rule lives: ``pokeralphctl rules
list`` shows them (source ``user``), ``pokeralphctl rules rm local-read-file`` removes
one, and a user's ``deny`` rule still wins over them (deny beats allow). So the daemon
stays the one place that decides a battle's tool calls, and the terminal command decides
with the very same list. In a battle the daemon installs them (it is the one writer of
the user's config while it runs: :meth:`RepoStore.install_local_defaults`); the terminal
command installs them on a person's own runs.

"Once" is kept in a small state document (``{state}/pokeralph/localagent.json``,
``defaultRulesInstalled``): a rule the user removed is not brought back. A new release
that adds a default bumps :data:`DEFAULTS_VERSION`; only the rules it adds are offered.
``agent.local.defaultRules: false`` (or ``--no-default-rules``) installs none.

Each rule allows one read-only tool on paths relative to the working directory without
``..`` (and not starting with ``/`` or ``~``): the working directory is enforced by the
tools anyway; the rule says the same in the one language rules speak.
``terminal_last_command`` is asked for by nobody (it repeats what an approved command
printed); the writing and running tools have no default rule.
"""

from __future__ import annotations

from pydantic import Field

from pokeralph_core.approval import ApprovalRule
from pokeralph_core.documents import DocumentKind
from pokeralph_core.model_base import Model

DEFAULTS_VERSION = 1
# a relative path: no leading / or ~, no "..", no quote or escape
REL = r'(?![/~])(?![^"]*\.\.)[^"\\]*'


def _rule(rule_id: str, tool: str, pattern: str, description: str) -> ApprovalRule:
    return ApprovalRule.model_validate(
        {
            "id": rule_id,
            "toolName": tool,
            "decision": "allow",
            "paramPattern": pattern,
            "description": description + " (a default of the local agent; remove it to be asked)",
        }
    )


DEFAULT_RULES: tuple[tuple[int, ApprovalRule], ...] = (
    (
        1,
        _rule(
            "local-read-file",
            "read_file",
            rf'^\{{(?:"end_line":\d+,)?"path":"{REL}"(?:,"start_line":\d+)?\}}$',
            "read files inside the working directory",
        ),
    ),
    (
        1,
        _rule(
            "local-list-dir",
            "list_dir",
            rf'^\{{(?:"path":"{REL}")?\}}$',
            "list folders inside the working directory",
        ),
    ),
    (
        1,
        _rule(
            "local-file-search",
            "file_search",
            rf'^\{{"pattern":"{REL}"\}}$',
            "find files by name inside the working directory",
        ),
    ),
    (
        1,
        _rule(
            "local-grep-search",
            "grep_search",
            rf'^\{{(?:"include_pattern":"{REL}",)?(?:"is_regex":(?:true|false),)?'
            rf'(?:"path":"{REL}",)?"query":".*"\}}$',
            "search file contents inside the working directory",
        ),
    ),
)


class LocalAgentState(Model):
    """``{state}/pokeralph/localagent.json``: what the local agent did once for this user."""

    default_rules_installed: int = Field(default=0, ge=0)


STATE_KIND = DocumentKind("localagent-state", LocalAgentState)
STATE_FILE = "localagent.json"
