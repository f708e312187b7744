"""The benchmark screen: the privacy-leakage and accuracy benchmarks, with a progress bar,
live counts, then the table and a plot in the terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import (
    Button,
    Footer,
    Header,
    Input,
    Markdown,
    ProgressBar,
    Select,
    Static,
)

from assistant.base import calloff, paths
from assistant.base.errors import DragError
from assistant.core.bench_package import installed
from assistant.privacy.detector import Detector
from assistant.tui.widgets import DragScreen, Plain, PlainLabel, StatusBar, bar_chart


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


def accuracy_groups(summary: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Accuracy per column (mode and K), per student: the bars of the text plot."""
    return {
        column: {
            name: row["cells"][column]["accuracy"] or 0.0
            for name, row in summary["rows"].items()
            if row["cells"][column]["total"]
        }
        for column in summary["columns"]
    }


ABOUT = {
    "privacy": (
        "Privacy leakage: bundled MMLU questions with synthetic personal data go through the "
        "real redaction path; what would be sent is measured, nothing is sent. Baseline: "
        "Presidio with its default settings. With them, one question in five without "
        "personal data (a control): what changes in those is counted too."
    ),
    "accuracy": (
        "Accuracy (the DRAG effect): ARC-Challenge questions answered by the student alone "
        "and with the teacher's evidence, graph or both, at K = 5 and 10. The questions go "
        "to the teacher through the real upload path (they are in the ledger, F2); on a "
        "CPU this takes minutes per question. Resumes where it stopped."
    ),
}


class BenchScreen(DragScreen):
    """Runs a benchmark in a worker; the privacy one sends nothing."""

    BINDINGS = [Binding("ctrl+b", "run", "Run benchmark")]

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="bench"):
            yield Plain(ABOUT["privacy"], id="bench-about")
            with Horizontal(id="bench-bar"):
                yield Select(
                    [("privacy leakage", "privacy"), ("accuracy", "accuracy")],
                    value="privacy",
                    allow_blank=False,
                    id="bench-kind",
                )
                yield PlainLabel("questions:")
                yield Input("50", id="bench-limit", type="integer")
                yield Button("Run (ctrl+b)", id="bench-run", variant="primary")
            yield ProgressBar(id="bench-progress", show_eta=False)
            yield Plain("", id="bench-live")
            with VerticalScroll(id="bench-results"):
                yield Markdown("", id="bench-table")
                yield Plain("", id="bench-plot")
        yield StatusBar()
        yield Footer()

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "bench-kind":
            kind = str(event.value)
            self.query_one("#bench-about", Static).update(ABOUT[kind])
            self.query_one("#bench-limit", Input).value = "50" if kind == "privacy" else "10"

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
        if self.query_one("#bench-kind", Select).value == "accuracy":
            self.run_accuracy(int(text))
        else:
            self.run_bench(int(text))

    @work(thread=True, exclusive=True, group="bench")
    def run_bench(self, limit: int) -> None:
        app = self.drag
        try:
            with installed():
                from drag_bench import privacy as leakage
        except DragError as exc:
            app.call_from_thread(self._failed, str(exc))
            return
        items = leakage.load_dataset("bundled")
        pii = [i for i in items if not i.control][:limit]
        controls = [i for i in items if i.control][: max(1, limit // 5)]
        items = pii + controls
        methods = {
            "full": leakage.make_full(Detector(), None, None),  # its own: the chat may run
            "presidio-default": leakage.make_presidio_default(),
        }
        app.call_from_thread(self._start, len(items) * len(methods))

        def progress(done: int, total: int, method: str, leaks: int) -> None:
            calloff.check()  # the app ends: the run stops at its next question
            line = f"{done}/{total} · {method}: {leaks} values leaked so far (partial form)"
            app.call_from_thread(self._progress, done, line)

        out = Path(paths.data_dir()) / "bench"
        try:
            with calloff.scope(app.closing):  # the app ends: its models stop
                summaries = leakage.run(
                    items, methods, out, resume=False, progress=False, on_item=progress
                )
        except (DragError, OSError) as exc:
            app.call_from_thread(self._failed, str(exc))
        else:
            app.call_from_thread(self._show_privacy, summaries, len(pii), len(controls))

    @work(thread=True, exclusive=True, group="bench")
    def run_accuracy(self, limit: int) -> None:
        """`drag bench accuracy` with its own runtime (the chat keeps its models)."""
        app = self.drag
        try:
            with installed():
                from drag_bench import accuracy
        except DragError as exc:
            app.call_from_thread(self._failed, str(exc))
            return
        out = Path(paths.data_dir()) / "bench" / f"accuracy-tui-n{limit}"
        args = accuracy.parse(["--n", str(limit), "--k", "5,10", "--out", str(out)])
        steps = 2 * limit  # the teacher's part, then the student's, per question
        app.call_from_thread(self._start, steps)
        done = [0]

        def log(line: str) -> None:
            calloff.check()  # the app ends: the run stops at its next step
            if line.startswith(("teacher ", "student ")):
                done[0] += 1
            app.call_from_thread(self._progress, min(done[0], steps), line[:160])

        try:
            with calloff.scope(app.closing):  # the app ends: its own teacher's waits
                folder = accuracy.run(args, log=log)
            summary = json.loads((folder / "summary.json").read_text("utf-8"))
            table = (folder / "summary.md").read_text("utf-8")
        except (DragError, OSError, ValueError) as exc:
            app.call_from_thread(self._failed, str(exc))
        else:
            app.call_from_thread(self._show_accuracy, summary, table, folder)

    def _start(self, total: int) -> None:
        self.query_one("#bench-progress", ProgressBar).update(total=total, progress=0)

    def _progress(self, done: int, line: str) -> None:
        self.query_one("#bench-progress", ProgressBar).update(progress=done)
        self.query_one("#bench-live", Static).update(line)

    def _failed(self, message: str) -> None:
        self.query_one("#bench-live", Static).update(f"✗ the benchmark stopped: {message}")
        self.query_one("#bench-run", Button).disabled = False

    def _show_privacy(self, summaries: dict[str, dict[str, Any]], pii: int, controls: int) -> None:
        from drag_bench import privacy as leakage  # installed: the run used it

        asked = f"{pii} question{'s' * (pii != 1)} with personal data"
        title = f"Privacy leakage · bundled · {asked} and {controls} without (controls)"
        self.query_one("#bench-live", Static).update(  # not the last item's "so far"
            f"✓ finished: {pii + controls} items × {len(summaries)} methods · the table below"
        )
        self.query_one("#bench-table", Markdown).update(leakage.render(summaries, title))
        self.query_one("#bench-plot", Static).update(
            "Values leaked (partial form), by type:\n\n" + bar_chart(leakage_groups(summaries))
        )
        self.query_one("#bench-run", Button).disabled = False

    def _show_accuracy(self, summary: dict[str, Any], table: str, folder: Path) -> None:
        self.query_one("#bench-table", Markdown).update(table)
        self.query_one("#bench-plot", Static).update(
            "Accuracy by context mode and K:\n\n"
            + bar_chart(accuracy_groups(summary))
            + f"\n\nFiles (PNG plot, per-question answers): {folder}"
        )
        self.query_one("#bench-run", Button).disabled = False
