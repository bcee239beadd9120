"""The daemon, asked on a person's behalf: ``pokeralph-agent`` writes none of its files.

The user's config layer (where the approval rules live) and the daemon's state files
have one writer, the daemon. When the person at the terminal answers "allow always", or
the read-only default rules are to be installed, the terminal command asks the daemon
over its socket (``rules.add`` with scope user, ``rules.installDefaults``), as
``pokeralphctl rules add --user`` would. Run by an agent, the connection is an agent's
and the daemon refuses both: no rule is made on an agent's authority.

Without a daemon the rule holds for this run only, and the error says how to keep it.
Blocking calls (the standard-library client): run them off the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pokeralphctl.client import ClientError, Connection, DaemonNotRunning, RequestFailed

if TYPE_CHECKING:
    from pathlib import Path

    from pokeralph_core.approval import ApprovalRule

#: How long a call may take (the daemon writes one small file).
TIMEOUT = 30.0


class LinkError(Exception):
    """Raised when the daemon could not be asked, or refused; ``message`` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DaemonLink:
    """The user's daemon at ``socket``, for what the local agent may not write itself."""

    def __init__(self, socket: Path | str) -> None:
        self.socket = str(socket)

    def _call(self, method: str, params: dict[str, Any]) -> Any:
        try:
            with Connection(self.socket, timeout=TIMEOUT) as conn:
                return conn.call(method, params)
        except DaemonNotRunning as exc:
            raise LinkError(f"pokeralphd does not answer on {self.socket} ({exc})") from exc
        except RequestFailed:
            raise
        except (ClientError, OSError) as exc:
            raise LinkError(f"pokeralphd could not be asked: {exc}") from exc

    def add_user_rule(self, rule: ApprovalRule) -> str:
        """Add ``rule`` to the user's layer; its id (one the layer has already is kept)."""
        params = {
            "scope": "user",
            "toolName": rule.tool_name,
            "paramPattern": rule.param_pattern,
            "description": rule.description,
            "decision": rule.decision,
        }
        try:
            added = self._call("rules.add", params)
        except RequestFailed as exc:
            data = exc.data if isinstance(exc.data, dict) else {}
            if data.get("id") == rule.id:  # the user's layer holds this rule already
                return rule.id
            raise LinkError(f"pokeralphd refused the rule: {exc.message}") from exc
        rule_id: str = added["rule"]["id"]
        return rule_id

    def install_defaults(self) -> list[str]:
        """Have the daemon add the read-only default rules not offered yet; their ids."""
        try:
            result = self._call("rules.installDefaults", {})
        except RequestFailed as exc:
            raise LinkError(f"pokeralphd refused: {exc.message}") from exc
        return [str(rule_id) for rule_id in result["added"]]
