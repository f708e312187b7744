"""The benchmark screen: the privacy-leakage benchmark with live counts, table and plot."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Footer, Header, Input, Label, Markdown, ProgressBar, Static

from assistant import paths
from assistant.bench import privacy
from assistant.errors import DragError
from assistant.privacy.detect import Detector
from assistant.tui.widgets import StatusBar, bar_chart

if TYPE_CHECKING:
    from assistant.tui.app import DragApp


def leakage_groups(summaries: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Partial leakage, overall and per entity type, per method (what the PNG shows)."""
    groups: dict[str, dict[str, float]] = {
        "all values": {m: s["leak_rate"]["partial"] for m, s in summaries.items()}
    }
    for t in sorted({t for s in summaries.values() for t in s["by_type"]}):
        groups[t] = {
            m: s["by_type"][t]["partial"] / s["by_type"][t]["injected"]
            for m, s in summaries.items()
            if t in s["by_type"] and s["by_type"][t]["injected"]
        }
    return groups


class BenchScreen(Screen[None]):
    """Runs `drag bench privacy --no-teacher` in a worker: nothing is sent."""

    BINDINGS = [Binding("ctrl+b", "run", "Run benchmark")]

    @property
    def drag(self) -> DragApp:
        from assistant.tui.app import DragApp

        assert isinstance(self.app, DragApp)
        return self.app

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="bench"):
            yield Static(
                "Privacy leakage: bundled MMLU questions with synthetic personal data go "
                "through the real redaction path; what would be sent is measured, nothing "
                "is sent. Baseline: Presidio with its default settings.",
                id="bench-about",
            )
            with Horizontal(id="bench-bar"):
                yield Label("questions:")
                yield Input("50", id="bench-limit", type="integer")
                yield Button("Run (ctrl+b)", id="bench-run", variant="primary")
            yield ProgressBar(id="bench-progress", show_eta=False)
            yield Static("", id="bench-live")
            with VerticalScroll(id="bench-results"):
                yield Markdown("", id="bench-table")
                yield Static("", id="bench-plot")
        yield StatusBar()
        yield Footer()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "bench-run":
            self.action_run()

    def action_run(self) -> None:
        text = self.query_one("#bench-limit", Input).value.strip()
        if not text.isdigit() or int(text) < 1:
            self.notify("questions: a whole number, 1 or more", severity="error")
            return
        self.query_one("#bench-run", Button).disabled = True
        self.query_one("#bench-progress", ProgressBar).display = True
        self.run_bench(int(text))

    @work(thread=True, exclusive=True, group="bench")
    def run_bench(self, limit: int) -> None:
        app = self.drag
        items = privacy.load_dataset("bundled")
        pii = [i for i in items if not i.control][:limit]
        items = pii + [i for i in items if i.control][: max(1, limit // 5)]
        methods = {
            "full": privacy.make_full(Detector(), None, None),  # its own: the chat may run
            "presidio-default": privacy.make_presidio_default(),
        }
        app.call_from_thread(
            self.query_one("#bench-progress", ProgressBar).update,
            total=len(items) * len(methods),
            progress=0,
        )

        def progress(done: int, total: int, method: str, leaks: int) -> None:
            app.call_from_thread(self._progress, done, total, method, leaks)

        out = Path(paths.data_dir()) / "bench"
        try:
            summaries = privacy.run(
                items, methods, out, resume=False, progress=False, on_item=progress
            )
        except (DragError, OSError) as exc:
            app.call_from_thread(self._failed, str(exc))
        else:
            app.call_from_thread(self._show, summaries, len(items))

    def _failed(self, message: str) -> None:
        self.query_one("#bench-live", Static).update(f"✗ the benchmark stopped: {message}")
        self.query_one("#bench-run", Button).disabled = False

    def _progress(self, done: int, total: int, method: str, leaks: int) -> None:
        self.query_one("#bench-progress", ProgressBar).update(progress=done)
        self.query_one("#bench-live", Static).update(
            f"{done}/{total} · {method}: {leaks} values leaked so far (partial form)"
        )

    def _show(self, summaries: dict[str, dict[str, Any]], count: int) -> None:
        title = f"Privacy leakage · bundled · {count} items"
        self.query_one("#bench-table", Markdown).update(privacy.render(summaries, title))
        self.query_one("#bench-plot", Static).update(
            "Values leaked (partial form), by type:\n\n" + bar_chart(leakage_groups(summaries))
        )
        self.query_one("#bench-run", Button).disabled = False
