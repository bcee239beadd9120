"""The terminal dashboard's Textual app: layout, keys, and the bridge to the protocol.

Textual runs an asyncio loop; the reference client blocks. The bridge: every call to the
daemon runs in a Textual thread worker (:func:`textual.work` with ``thread=True``) and
hands its result back as a :class:`~pokeralphctl.tui.bridge.Call` message; the event
stream is one more thread worker running :meth:`Link.listen
<pokeralphctl.tui.link.Link.listen>` into a :class:`~pokeralphctl.tui.bridge.StreamBridge`
(bounded), which stops when Textual cancels its worker (at exit) through the worker's
``cancelled_event``. A
reload of the board (``daemon.status``, ``battle.current``, ``inbox.list`` pipelined in
one round trip) runs at most once at a time, with at most one more asked for meanwhile:
a burst of events costs two round trips, not one per event.

A daemon that is not there is the status line's business: the app starts without one,
says so, and fills in when the stream connects.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on, work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Label
from textual.worker import get_current_worker

from pokeralphctl.client import ClientError, RequestFailed
from pokeralphctl.tui.board import OUTPUT_LINES, Board, reloads
from pokeralphctl.tui.bridge import Call, StreamBridge, post
from pokeralphctl.tui.forms import AnswerScreen
from pokeralphctl.tui.link import Link
from pokeralphctl.tui.views import (
    BattleTable,
    ConfirmScreen,
    HelpScreen,
    InboxTable,
    NoteScreen,
    OutputPane,
    StatusLine,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from textual.app import ComposeResult

    from pokeralphctl.tui.board import Key

CSS = """
#status { height: 1; background: $boost; padding: 0 1; }
#main { height: 1fr; }
#left { width: 60%; }
.pane-title { width: 100%; background: $panel; text-style: bold; padding: 0 1; }
BattleTable { height: 1fr; }
InboxTable { height: 1fr; }
OutputPane { width: 1fr; border: round $primary; }
ModalScreen { align: center middle; }
.box, #answer {
    width: 80%; max-width: 100; height: auto; max-height: 90%;
    border: thick $accent; background: $surface; padding: 1 2;
}
.error { color: $error; height: auto; }
.dim { color: $text-muted; }
#answer-body { margin: 1 0; }
#answer-buttons { height: auto; margin-top: 1; }
TextArea.textarea { height: 5; }
"""

#: Actions that act on what the main screen shows: off while an overlay is open.
MAIN_ONLY = frozenset(
    {"leave", "approve", "reject", "pause", "resume", "cancel", "focus", "reload", "help"}
)


class DashboardApp(App[None]):
    """``pokeralphctl tui``."""

    TITLE = "pokeralph"
    CSS = CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "leave", "quit"),
        Binding("question_mark", "help", "help"),
        Binding("a", "approve", "approve"),
        Binding("r", "reject", "reject"),
        Binding("p", "pause", "pause"),
        Binding("u", "resume", "resume"),
        Binding("x", "cancel", "cancel"),
        Binding("i", "focus('inbox')", "inbox"),
        Binding("b", "focus('battles')", "battles"),
        Binding("o", "focus('output')", "output", show=False),
        Binding("g", "reload", "reload", show=False),
    ]

    def __init__(self, link: Link) -> None:
        super().__init__()
        self.link = link
        self.board = Board()
        self.selected: Key | None = None
        self._reloading = False
        self._reload_again = False

    # ---------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        yield StatusLine(id="status")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield Label("battles", classes="pane-title")
                yield BattleTable(id="battles")
                yield Label("inbox", classes="pane-title")
                yield InboxTable(id="inbox")
            yield OutputPane(
                id="output", max_lines=OUTPUT_LINES, wrap=True, markup=False, min_width=20
            )
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(BattleTable).focus()
        self.redraw()
        self._listen()

    @on(Call)
    def _run_call(self, message: Call) -> None:
        # A worker's report that comes as the app closes, its screen's widgets gone, has
        # nothing to draw on: dropped (it failed the app with NoMatches).
        if not self.query(StatusLine):
            message.drop()
            return
        message.run()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action in MAIN_ONLY and isinstance(self.screen, ModalScreen))

    # ---------------------------------------------------------------- the event stream
    @work(thread=True, group="link", name="events", exit_on_error=False)
    def _listen(self) -> None:
        stop = get_current_worker().cancelled_event
        self.link.listen(stop, StreamBridge(self, stop))

    def on_link_connected(self, result: dict[str, Any], restarted: bool) -> None:
        self.board.connected = True
        lost = result.get("lost") or 0
        if restarted:
            self.board.link_note = "the daemon restarted: reloaded"
        elif lost:
            self.board.link_note = f"{lost} events were lost: reloaded"
        else:
            self.board.link_note = "live"
        self.reload()

    def on_link_lost(self, reason: str) -> None:
        self.board.connected = False
        self.board.link_note = f"{reason}; retrying"
        self.query_one(StatusLine).show(self.board)

    def on_daemon_event(self, event: dict[str, Any]) -> None:
        grew = self.board.apply(event)
        if grew is not None and grew[0] == self.selected:
            self.query_one(OutputPane).add(grew[1])
        if reloads(str(event.get("type"))):
            self.reload()

    # ---------------------------------------------------------------- reloading
    def reload(self) -> None:
        """Ask the daemon for the board again (coalesced: one at a time, one queued)."""
        if self._reloading:
            self._reload_again = True
            return
        self._reloading = True
        self._fetch()

    @work(thread=True, group="reload", exit_on_error=False)
    def _fetch(self) -> None:
        answers: list[Any] | None
        try:
            answers = self.link.call_many(
                [
                    ("daemon.status", None),
                    ("battle.current", None),
                    ("inbox.list", {"status": "open"}),
                ]
            )
        except (ClientError, OSError):
            answers = None  # the stream's status line says why
        post(self, self._loaded, answers)

    def _loaded(self, answers: list[Any] | None) -> None:
        self._reloading = False
        if answers is not None:
            status, current, inbox = (None if isinstance(a, RequestFailed) else a for a in answers)
            self.board.load(status, current, inbox)
        self.redraw()
        if self._reload_again:
            self._reload_again = False
            self.reload()

    def redraw(self) -> None:
        self.query_one(StatusLine).show(self.board)
        battles = self.query_one(BattleTable)
        battles.show(self.board)
        if self.selected is None and battles.row_count:
            self._select(battles.selected())
        elif self.selected is not None:
            battles.select(self.selected)
        self.query_one(InboxTable).show(self.board)

    def _select(self, key: Key | None) -> None:
        if key == self.selected:
            return
        self.selected = key
        pane = self.query_one(OutputPane)
        pane.show_lines(self.board.output.get(key, ()) if key else ())

    def on_data_table_row_highlighted(self, message: DataTable.RowHighlighted) -> None:
        if isinstance(message.data_table, BattleTable):
            self._select(message.data_table.selected())

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        if isinstance(message.data_table, InboxTable):
            key = message.data_table.selected()
            if key is not None:
                self._open_item(*key)

    # ---------------------------------------------------------------- actions
    def action_leave(self) -> None:
        self.exit()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_reload(self) -> None:
        self.reload()

    def _battle(self) -> Key | None:
        if self.selected is None:
            self.notify("no battle selected", severity="warning")
        return self.selected

    def action_approve(self) -> None:
        self._ask_note(True)

    def action_reject(self) -> None:
        self._ask_note(False)

    def _ask_note(self, approve: bool) -> None:
        key = self._battle()
        if key is None:
            return

        def send(note: str | None) -> None:
            if note is not None:  # None: escape, nothing done
                self._control("battle.approve", key, approve=approve, note=note.strip() or None)

        verb = "approve" if approve else "reject"
        self.push_screen(NoteScreen(f"{verb} {key[1]} ({key[0]})"), send)

    def action_pause(self) -> None:
        if (key := self._battle()) is not None:
            self._control("battle.pause", key)

    def action_resume(self) -> None:
        if (key := self._battle()) is not None:
            self._control("battle.resume", key)

    def action_cancel(self) -> None:
        key = self._battle()
        if key is None:
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._control("battle.cancel", key)

        self.push_screen(ConfirmScreen(f"cancel the battle of {key[1]} ({key[0]})?"), confirmed)

    @work(thread=True, group="control", exit_on_error=False)
    def _control(self, method: str, key: Key, **params: Any) -> None:
        sent = {"repo": key[0], "taskId": key[1]}
        sent.update({k: v for k, v in params.items() if v is not None})
        try:
            self.link.call(method, sent)
        except RequestFailed as exc:
            self._tell(f"{method}: {exc.message}", "error")
        except (ClientError, OSError) as exc:
            self._tell(f"{method}: {str(exc).splitlines()[0]}", "error")
        else:
            self._tell(f"{method} {key[1]}: done", "information")
        post(self, self.reload)

    def _tell(self, message: str, severity: Any) -> None:
        post(self, partial(self.notify, message, severity=severity))

    @work(thread=True, group="inbox", exclusive=True, exit_on_error=False)
    def _open_item(self, repo: str, item_id: str) -> None:
        try:
            item = self.link.call("inbox.get", {"id": item_id, "repo": repo})
        except (ClientError, OSError) as exc:
            self._tell(f"inbox.get: {str(exc).splitlines()[0]}", "error")
            return
        post(self, self._show_item, {**item, "repo": repo})

    def _show_item(self, item: dict[str, Any]) -> None:
        def answered(done: bool | None) -> None:
            if done:
                self.notify(f"answered {item['delivery']['id']}")
                self.reload()

        self.push_screen(AnswerScreen(self.link, item), answered)


def run(socket_file: str, environ: Mapping[str, str] | None = None) -> int:
    """Run the dashboard on this terminal until the person quits; the exit code."""
    DashboardApp(Link(socket_file, environ)).run()
    return 0
