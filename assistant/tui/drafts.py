"""The drafts screen: what was not sent or not answered, kept sealed (`drag drafts`).

A request that `drag serve` kept because it needed a review shows what would leave
(placeholders in place); ``r`` lets that program's same request through once
(`drag drafts release`), ``d`` drops a draft."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Footer, Header

from assistant.base import safetext
from assistant.base.errors import DragError
from assistant.core import drafts
from assistant.tui.dialogs import Confirm
from assistant.tui.widgets import DragScreen, Plain, StatusBar, plain_text


def detail_text(record: dict[str, Any]) -> str:
    why = str(record.get("error") or "")
    if not why.lower().startswith(("not sent", "nothing was sent", "not answered")):
        why = f"not sent or not answered: {why}"  # not "not sent or not answered: not sent…"
    parts = [
        f"{record['name']} · {record.get('created', '')}",
        why,
        "",
        str(record.get("question") or ""),
    ]
    if record.get("would_send"):
        parts += ["", "WHAT WOULD BE SENT (r lets it through once):", str(record["would_send"])]
    if record.get("released"):
        parts += ["", f"released {record['released']}: the next identical request goes, once"]
    if record.get("teacher_reply"):
        parts += ["", "THE TEACHER HAD REPLIED:", str(record["teacher_reply"])]
    return "\n".join(parts)


class DraftsScreen(DragScreen):
    BINDINGS = [
        Binding("r", "release", "Release once"),
        Binding("d", "drop", "Drop"),
        Binding("l", "reload", "Reload"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="drafts"):
            yield DataTable(id="draft-list", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="draft-detail"):
                yield Plain("Nothing kept.", id="draft-text")
        yield StatusBar()
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#draft-list", DataTable)
        table.add_columns("name", "kept (UTC)", "from", "why")
        self.action_reload()
        table.focus()

    def on_screen_resume(self) -> None:
        self.action_reload()

    def action_reload(self) -> None:
        table = self.query_one("#draft-list", DataTable)
        chosen = self._chosen()  # kept chosen when it is still there (after a dialog)
        table.clear()
        try:
            rows = drafts.listing()
        except DragError as exc:
            self.query_one("#draft-text", Plain).update(f"the drafts cannot be read: {exc}")
            return
        for r in rows:
            source = "a program (drag serve)" if "release_key" in r else "you"
            if r.get("released"):
                source += ", released"
            cells = [
                r["name"],
                str(r.get("created", ""))[:19].replace("T", " "),
                source,
                safetext.one_line(str(r.get("error") or ""))[:80],
            ]
            table.add_row(*(plain_text(c) for c in cells), key=r["name"])
        if chosen is not None and any(r["name"] == chosen for r in rows):
            table.move_cursor(row=table.get_row_index(chosen))
        if not rows:
            self.query_one("#draft-text", Plain).update("Nothing kept.")

    def _chosen(self) -> str | None:
        table = self.query_one("#draft-list", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return str(key) if key is not None else None

    @on(DataTable.RowHighlighted, "#draft-list")
    def show(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is None:
            return
        try:
            record = drafts.read(str(event.row_key.value))
        except DragError as exc:
            self.query_one("#draft-text", Plain).update(str(exc))
            return
        self.query_one("#draft-text", Plain).update(detail_text(record))

    def _act(self, act: Callable[[str], None], done: str) -> None:
        """``act`` on the chosen draft; ``done`` (its name in ``{}``) told, or the error."""
        name = self._chosen()
        if name is None:
            return
        try:
            act(name)
        except DragError as exc:
            self.notify(str(exc), severity="warning")
            return
        self.notify(done.format(name))
        self.action_reload()

    def action_release(self) -> None:
        self._act(drafts.release, "{} is released: its program's same request goes once")

    def action_drop(self) -> None:
        """Drop the chosen draft once the user says so: its text is kept nowhere else."""
        name = self._chosen()
        if name is None:
            return

        def done(yes: bool | None) -> None:
            if yes and self._chosen() == name:
                self._act(drafts.remove, "{} is dropped")

        self.app.push_screen(Confirm(f"Drop {name}? Its text is kept nowhere else."), done)
