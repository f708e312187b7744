"""The audit screen: every upload, its exact bytes and reply, and the chain check."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Input

from assistant.base import paths
from assistant.base.errors import DragError
from assistant.store import ledger
from assistant.tui.widgets import DragScreen, Plain, StatusBar, plain_text


def redaction_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}×{v}" for k, v in sorted(counts.items())) or "-"


def detail_text(d: dict[str, Any]) -> str:
    head = [
        f"upload #{d['id']} · {d['created']} · {d['purpose']} · {d['model']} · {d['status']}",
        f"endpoint {d['endpoint']} · prompt {d['prompt_version']} · "
        f"{d['prompt_tokens']}+{d['completion_tokens']} tokens · {d['seconds']} s",
        f"redacted: {redaction_text(d['redaction'])}",
        *([f"error: {d['error']}"] if d.get("error") else []),
        f"hash {d['hash']}",
        "",
    ]
    if d["deleted"]:
        return "\n".join([*head, f"payload removed {d['deleted']}; the row keeps the chain whole"])
    request = str(d["request"] or "")
    with contextlib.suppress(ValueError):  # shown as sent when it is not JSON
        request = json.dumps(json.loads(request), indent=1, ensure_ascii=False)
    return "\n".join(
        [
            *head,
            f"REQUEST (the exact {d['bytes']} bytes, shown indented):",
            request,
            "",
            "REPLY:",
            str(d["reply"] or "(none)"),
        ]
    )


class AuditScreen(DragScreen):
    BINDINGS = [
        Binding("v", "verify", "Verify ledger"),
        Binding("e", "export", "Export"),
        Binding("r", "reload", "Reload"),
        Binding("/", "focus_search", "Search"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="audit"):
            with Horizontal(id="audit-bar"):
                yield Input(placeholder="search request and reply text", id="audit-search")
                yield Plain("", id="verdict")
            yield DataTable(id="uploads", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="audit-detail"):
                yield Plain("Select an upload to see exactly what was sent.", id="detail")
        yield StatusBar()
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#uploads", DataTable)
        table.add_columns("id", "time (UTC)", "teacher model", "purpose", "bytes", "redacted")
        self.action_reload()
        table.focus()  # v, e, r act on the table; "/" goes to the search box

    def on_screen_resume(self) -> None:
        self.action_reload()

    def action_reload(self, search: str | None = None) -> None:
        try:  # what a killed drag had under way; the list works without it
            self.drag.ui_store.settle_uploads()
        except (DragError, sqlite3.Error) as exc:
            self.notify(f"uploads a stopped drag left noted are not listed yet ({exc})")
        table = self.query_one("#uploads", DataTable)
        table.clear()
        text = self.query_one("#audit-search", Input).value.strip() if search is None else search
        for row in ledger.select(self.drag.ui_store.db, search=text or None):
            s = ledger.summary(row)
            cells = [
                str(s["id"]),
                s["created"][:19].replace("T", " "),
                s["model"],
                s["purpose"],
                "deleted" if s["deleted"] else f"{s['bytes']:,}",
                redaction_text(s["redaction"]),
            ]
            # Text cells: a DataTable reads a str cell as markup.
            table.add_row(*(plain_text(c) for c in cells), key=str(s["id"]))

    @on(Input.Changed, "#audit-search")
    def search(self, event: Input.Changed) -> None:
        self.action_reload(event.value.strip())

    @on(DataTable.RowHighlighted, "#uploads")
    def show(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is None:
            return
        row = ledger.get(self.drag.ui_store.db, int(event.row_key.value))
        if row is not None:
            self.query_one("#detail", Plain).update(detail_text(ledger.detail(row)))

    def action_verify(self) -> None:
        verdict = self.drag.ui_store.verify_ledger()
        widget = self.query_one("#verdict", Plain)
        if verdict.ok:
            widget.update(f"✓ ledger ok: {verdict.rows} uploads, chain intact")
        else:
            widget.update(f"✗ ledger BROKEN at #{verdict.bad_id}: {verdict.reason}")
        widget.set_class(not verdict.ok, "error")

    def action_export(self) -> None:
        target = paths.data_dir() / "ledger-export.jsonl"
        rows = [ledger.detail(r) for r in ledger.select(self.drag.ui_store.db)]
        try:
            paths.write_private(target, ledger.jsonl(rows))
        except OSError as exc:  # a full disk, a folder in its place: said, the app goes on
            self.notify(f"not exported to {target}: {exc.strerror or exc}", severity="error")
            return
        self.notify(f"exported {len(rows)} uploads to {target}")  # plain: DragApp.notify

    def action_focus_search(self) -> None:
        self.query_one("#audit-search", Input).focus()
