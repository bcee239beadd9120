"""Installing pokeralphd under the user's service manager (standard library only).

Linux: systemd user units in ``$XDG_CONFIG_HOME/systemd/user`` (the socket unit makes the
first client start the daemon). macOS: a LaunchAgent in ``~/Library/LaunchAgents``. Files
are written with the absolute path of the installed ``pokeralphd``; a file that differs is
only replaced with ``force``. Nothing is enabled unless asked: the one command to run is
printed.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from pokeralphctl import units

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: imported for mypy only
if TYPE_CHECKING:
    from pokeralphctl.terminal import Terminal


class ServiceError(Exception):
    """Raised when installing or removing the units cannot be done; the message says why."""


def systemd_dir(term: Terminal) -> Path:
    return Path(term.xdg_dir("XDG_CONFIG_HOME", ".config")) / "systemd" / "user"


def launchd_file(term: Terminal) -> Path:
    return Path(term.abspath("~")) / "Library" / "LaunchAgents" / f"{units.LABEL}.plist"


def is_macos() -> bool:
    return sys.platform == "darwin"


def pokeralphd_path(term: Terminal) -> str:
    """The installed ``pokeralphd`` beside this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / "pokeralphd"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside.absolute())
    found = shutil.which("pokeralphd", path=term.env.get("PATH"))
    if found:
        return str(Path(found).absolute())
    raise ServiceError(
        "cannot find the pokeralphd executable; install pokeralph (pip install -e .) first"
    )


def planned(term: Terminal, socket: bool = True) -> dict[Path, str]:
    """Where each unit goes and what it holds, for this platform."""
    binary = pokeralphd_path(term)
    home = term.abspath("~")
    if is_macos():
        return {launchd_file(term): units.render(units.PLIST, binary, home)}
    folder = systemd_dir(term)
    out = {folder / "pokeralphd.service": units.render(units.SERVICE, binary, home)}
    if socket:
        out[folder / "pokeralphd.socket"] = units.SOCKET
    return out


def installed_units(term: Terminal) -> list[Path]:
    candidates = (
        [launchd_file(term)]
        if is_macos()
        else [systemd_dir(term) / "pokeralphd.service", systemd_dir(term) / "pokeralphd.socket"]
    )
    return [p for p in candidates if p.exists()]


def enable_command(term: Terminal, socket: bool = True) -> str:
    if is_macos():
        return f"launchctl bootstrap gui/$(id -u) {launchd_file(term)}"
    unit = "pokeralphd.socket" if socket else "pokeralphd.service"
    return f"systemctl --user daemon-reload && systemctl --user enable --now {unit}"


def disable_command() -> str:
    if is_macos():
        return f"launchctl bootout gui/$(id -u)/{units.LABEL}"
    return "systemctl --user disable --now pokeralphd.socket pokeralphd.service && systemctl --user daemon-reload"


def install(term: Terminal, socket: bool = True, force: bool = False) -> list[Path]:
    plan = planned(term, socket)
    for path, content in plan.items():
        if path.exists() and path.read_text() != content and not force:
            raise ServiceError(f"{path} exists and differs; pass --force to replace it")
    written = []
    for path, content in plan.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(content)
        os.replace(tmp, path)
        written.append(path)
    if is_macos():
        (Path(term.abspath("~")) / "Library" / "Logs" / "pokeralph").mkdir(
            parents=True, exist_ok=True
        )
    return written


def uninstall(term: Terminal) -> list[Path]:
    removed = []
    for path in installed_units(term):
        path.unlink()
        removed.append(path)
    return removed
