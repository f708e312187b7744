"""Review before upload: your question and what would be sent, side by side."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from assistant.privacy.placeholders import PLACEHOLDER
from assistant.privacy.sanitize import Sanitized


def highlighted_original(sanitized: Sanitized) -> Text:
    """The question with each detected value marked, labelled with its entity type."""
    text = Text(sanitized.original)
    for f in sanitized.findings:
        text.stylize("bold reverse red", f.start, f.end)
    return text


def highlighted_sent(sanitized: Sanitized) -> Text:
    """The text to be sent with each placeholder marked."""
    text = Text(sanitized.text)
    for m in PLACEHOLDER.finditer(sanitized.text):
        text.stylize("bold green", m.start(), m.end())
    return text


def entity_lines(sanitized: Sanitized) -> list[str]:
    placeholders = {r.value: r.placeholder for r in sanitized.redacted.replacements}
    seen: dict[tuple[str, str], str] = {}
    for f in sanitized.findings:
        seen.setdefault((f.entity, f.text), placeholders.get(f.text, "(kept out)"))
    return [f"{entity:<16} {value!r:<32} → {ph}" for (entity, value), ph in seen.items()]


class ReviewModal(ModalScreen[bool]):
    """Approve (True) or cancel (False) one upload."""

    BINDINGS = [
        Binding("y", "approve", "Send"),
        Binding("n,escape", "cancel", "Don't send"),
    ]

    def __init__(self, sanitized: Sanitized, decide: Callable[[bool], None] | None = None) -> None:
        super().__init__()
        self.sanitized = sanitized
        self.decide = decide  # told the answer at once (a worker thread waits on it)

    def _decided(self, send: bool) -> None:
        if self.decide is not None:
            self.decide(send)
            self.decide = None
        self.dismiss(send)

    def compose(self) -> ComposeResult:
        s = self.sanitized
        with Vertical(id="review"):
            yield Label("Review before upload: only the right side leaves this machine", id="title")
            with Horizontal(id="sides"):
                with VerticalScroll(classes="side"):
                    yield Label("YOUR QUESTION (stays here)", classes="heading")
                    yield Static(highlighted_original(s), id="original")
                with VerticalScroll(classes="side"):
                    yield Label("SENT TO THE TEACHER", classes="heading")
                    yield Static(highlighted_sent(s), id="sanitized")
            lines = entity_lines(s) or ["no personal data detected"]
            yield Static("\n".join(lines), id="entities")
            if s.rewrite_used:
                note = "the student's rewrite is used"
            elif s.rewrite_note:
                note = f"rewrite not used: {s.rewrite_note}"
            else:
                note = ""
            yield Static(note, id="rewrite-note")
            with Horizontal(id="buttons"):
                yield Button("Send (y)", variant="success", id="send")
                yield Button("Don't send (n)", variant="error", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()  # the safe choice has the focus

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self._decided(event.button.id == "send")

    def action_approve(self) -> None:
        self._decided(True)

    def action_cancel(self) -> None:
        self._decided(False)
