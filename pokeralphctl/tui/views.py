"""The TUI's widgets and overlays, drawn from a :class:`~pokeralphctl.tui.board.Board`.

Everything that comes from the daemon (task ids, titles, agent output) is shown as
:class:`rich.text.Text`, never parsed as markup, and passed through
:func:`pokeralphctl.output.clean` first, so an agent's output cannot restyle or take over
the terminal.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Label, RichLog, Static
from textual.widgets.data_table import CellDoesNotExist, RowDoesNotExist

from pokeralphctl.output import clean

if TYPE_CHECKING:
    from textual.app import ComposeResult

    from pokeralphctl.tui.board import Board, Key

STATUS_STYLES = {
    "running": "green",
    "awaiting_approval": "magenta",
    "paused": "yellow",
    "blocked": "yellow",
    "escalated": "magenta",
    "queued": "cyan",
    "completed": "green",
    "failed": "red",
    "cancelled": "yellow",
}

#: The keys, as the help overlay lists them (the app's bindings say the same).
KEYS = [
    ("tab / shift+tab", "move between battles, inbox and output"),
    ("↑ ↓", "choose a battle or an inbox item"),
    ("a", "approve the selected battle's iteration (with a note)"),
    ("r", "reject it (with a note): the battle pauses"),
    ("p", "pause the selected battle at the end of its iteration"),
    ("u", "resume it"),
    ("x", "cancel it (asks first)"),
    ("enter", "on an inbox item: open its answer form"),
    ("ctrl+s / esc", "in a form: send / close"),
    ("i / b / o", "go to the inbox / the battles / the output"),
    ("g", "reload everything from the daemon"),
    ("?", "this help"),
    ("q", "quit (battles go on: the daemon runs them)"),
]


def money(value: Any) -> str:
    return f"${value:.4f}" if isinstance(value, int | float) else "-"


def status_text(status: str) -> Text:
    return Text(clean(status), style=STATUS_STYLES.get(status, ""))


def key_of(row: str) -> Key:
    repo, _, task = row.partition("\0")
    return repo, task


class StatusLine(Static):
    """One line: the connection, the daemon, spend today, what waits in the inbox."""

    plain = ""  # the line as plain text

    def show(self, board: Board) -> None:
        line = Text()
        if board.connected:
            line.append("● connected", style="green")
            status = board.status or {}
            if status:
                line.append(f" · pokeralphd {clean(status['version'])} pid {status['pid']}")
        else:
            line.append("○ not connected", style="red")
        spend = board.spend_today()
        if spend is not None:
            line.append(f" · today {money(spend['costUsd'])} ({spend['iterations']} runs)")
        waiting = board.open_items()
        line.append(f" · inbox {waiting} waiting", style="magenta" if waiting else "")
        if board.link_note:
            line.append(
                f" · {clean(board.link_note)}", style="dim" if board.connected else "yellow"
            )
        self.plain = line.plain  # what tests read
        self.update(line)


class BattleTable(DataTable[Any]):
    """Battles across repositories, one row each; the row key is ``repo\\0task``."""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_columns("REPO", "TASK", "STATUS", "ITER", "PHASE", "COST")

    def show(self, board: Board) -> None:
        selected = self.selected()
        self.clear()
        for battle in board.rows():
            iteration = battle.get("iteration")
            top = battle.get("maxIterations")
            self.add_row(
                Text(clean(battle["repo"])),
                Text(clean(battle["taskId"])),
                status_text(str(battle.get("status", "?"))),
                f"{iteration}/{top or '∞'}" if iteration is not None else "-",
                # the usual phase goes without saying: the column stays narrow
                "" if battle.get("phase") in (None, "implementation") else clean(battle["phase"]),
                money(battle.get("costUsd")),
                key=f"{battle['repo']}\0{battle['taskId']}",
            )
        if selected is not None:
            self.select(selected)

    def selected(self) -> Key | None:
        if not self.row_count:
            return None
        try:
            row = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except CellDoesNotExist:  # no cursor yet
            return None
        return key_of(str(row.value)) if row.value is not None else None

    def select(self, key: Key) -> None:
        with contextlib.suppress(RowDoesNotExist):  # not in the table (any more)
            self.move_cursor(row=self.get_row_index(f"{key[0]}\0{key[1]}"))


class InboxTable(DataTable[Any]):
    """The inbox's open items across repositories; the row key is ``repo\\0id``."""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_columns("REPO", "ID", "MODE", "STATUS", "TITLE")

    def show(self, board: Board) -> None:
        selected = self.selected()
        self.clear()
        for item in board.inbox:
            self.add_row(
                Text(clean(item["repo"])),
                Text(clean(item["id"])),
                clean(item["mode"]),
                status_text(str(item["status"])),
                Text(clean(item["title"])),
                key=f"{item['repo']}\0{item['id']}",
            )
        if selected is not None:
            with contextlib.suppress(RowDoesNotExist):  # answered meanwhile
                self.move_cursor(row=self.get_row_index(f"{selected[0]}\0{selected[1]}"))

    def selected(self) -> Key | None:
        if not self.row_count:
            return None
        row = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return key_of(str(row.value)) if row.value is not None else None


class OutputPane(RichLog):
    """The selected battle's output, live."""

    def show_lines(self, lines: Any) -> None:
        self.clear()
        self.add(lines)

    def add(self, lines: Any) -> None:
        for text, style in lines:
            self.write(Text(text, style=style))


class NoteScreen(ModalScreen[str | None]):
    """Ask for a note (enter sends, possibly empty; escape: None, nothing is done)."""

    BINDINGS = [Binding("escape", "close", "close")]

    def __init__(self, title: str) -> None:
        super().__init__()
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical(id="note-box", classes="box"):
            yield Label(Text(self.title_text, style="bold"))
            yield Input(placeholder="a note for the next iteration (optional)", id="note-input")
            yield Label("enter: send · esc: back", classes="dim")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_close(self) -> None:
        self.dismiss(None)


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question (y or enter: yes; n or escape: no)."""

    BINDINGS = [
        Binding("y,enter", "answer(True)", "yes"),
        Binding("n,escape", "answer(False)", "no"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box", classes="box"):
            yield Label(Text(self.question, style="bold"))
            yield Label("y: yes · n: no", classes="dim")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class HelpScreen(ModalScreen[None]):
    """The keys (? or escape closes it)."""

    BINDINGS = [Binding("escape,question_mark,q", "close", "close")]

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box", classes="box"):
            yield Label(Text("pokeralph · keys", style="bold"))
            for keys, what in KEYS:
                yield Static(Text.assemble((f"{keys:>16}  ", "bold cyan"), what))

    def action_close(self) -> None:
        self.dismiss(None)
