"""Review before upload: your question and what would be sent, side by side."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, SelectionList, Static
from textual.widgets.selection_list import Selection

from assistant.privacy.placeholders import PLACEHOLDER
from assistant.privacy.sanitize import Sanitized, rewrite_line
from assistant.tui.widgets import Plain, PlainLabel, highlighted


def highlighted_original(sanitized: Sanitized) -> Text:
    """The question with each detected value marked (plain text: no control sequence)."""
    spans = [(f.start, f.end) for f in sanitized.findings]
    return highlighted(sanitized.original, spans, "bold reverse red")


def highlighted_sent(sanitized: Sanitized) -> Text:
    """The text to be sent with each placeholder marked."""
    spans = [m.span() for m in PLACEHOLDER.finditer(sanitized.text)]
    return highlighted(sanitized.text, spans, "bold green")


def entity_label(sanitized: Sanitized, value: str, *, kept: bool = False) -> Text:
    """One detected value's line: its category and mode (privacy.categories), the value,
    and what goes in its place (its placeholder, and the coarser value sent after it
    where there is one), or that it goes as it is when the user keeps it."""
    r = next(r for r in sanitized.redacted.replacements if r.value == value)
    mode = sanitized.modes.get(r.entity, "")
    category = f"{r.entity} ({mode})" if mode else r.entity
    hint = sanitized.hints.get(r.placeholder)
    sent = "sent as it is" if kept else f"{r.placeholder} ({hint})" if hint else r.placeholder
    # Text(), not a markup string: a value may hold "[/]" and must show as written.
    by = " · found by the local model" if r.value in sanitized.read_values else ""
    return Text(f"{category:<27} {r.value!r:<32} → {sent}{by}")


def entity_choices(sanitized: Sanitized) -> list[Selection[str]]:
    """One line per detected value: checked = sent as its placeholder (the default)."""
    values = dict.fromkeys(r.value for r in sanitized.redacted.replacements)
    return [Selection(entity_label(sanitized, v), v, True) for v in values]


Verdict = bool | Sanitized  # what a privacy.review.Review returns


class ReviewModal(ModalScreen[Verdict]):
    """Approve, approve with some values kept as they are, or cancel one upload."""

    BINDINGS = [
        Binding("y", "approve", "Send"),
        Binding("n,escape", "cancel", "Don't send"),
    ]

    def __init__(
        self, sanitized: Sanitized, decide: Callable[[Verdict], None] | None = None
    ) -> None:
        super().__init__()
        self.sanitized = sanitized  # as detected
        self.chosen = sanitized  # with the user's choices
        self.decide = decide  # told the answer at once (a worker thread waits on it)

    def _decided(self, verdict: Verdict) -> None:
        if self.decide is not None:
            self.decide(verdict)
            self.decide = None
        self.dismiss(verdict)

    def compose(self) -> ComposeResult:
        s = self.sanitized
        # It scrolls: on a short terminal the two sides keep their height (what is sent
        # must be readable) and the buttons are below them.
        with VerticalScroll(id="review"):
            yield PlainLabel(
                "Review before upload: only the right side leaves this machine", id="title"
            )
            with Horizontal(id="sides"):
                with VerticalScroll(classes="side"):
                    yield PlainLabel("YOUR QUESTION (stays here)", classes="heading")
                    yield Plain(highlighted_original(s), id="original")
                with VerticalScroll(classes="side"):
                    yield PlainLabel("SENT TO THE TEACHER", classes="heading")
                    yield Plain(highlighted_sent(s), id="sanitized")
            choices = entity_choices(s)
            if choices:
                yield PlainLabel(
                    "Detected (tab here, then space: keep a value as it is, e.g. a famous "
                    "name the question is about)",
                    classes="heading",
                )
                yield SelectionList[str](*choices, id="entities")
            else:
                yield Plain("no personal data detected", id="entities")
            yield Plain(self._note(), id="rewrite-note")
            if s.unchecked:
                yield Plain(
                    "\n".join(f"{line}: read the right side yourself" for line in s.unchecked),
                    id="unread",
                    classes="warning",
                )
            with Horizontal(id="buttons"):
                yield Button("Send (y)", variant="success", id="send")
                yield Button("Don't send (n)", variant="error", id="cancel")

    def _note(self) -> str:
        return rewrite_line(self.sanitized.rewrite_used, self.sanitized.rewrite_note)

    def on_mount(self) -> None:
        # The safe choice has the focus; the view stays on what is sent (on a short
        # terminal the buttons are below it).
        self.query_one("#cancel", Button).focus(scroll_visible=False)

    @on(SelectionList.SelectedChanged, "#entities")
    def _toggled(self, event: SelectionList.SelectedChanged[str]) -> None:
        entities = event.selection_list
        placeholder = set(entities.selected)
        keep = [r.value for r in self.sanitized.redacted.replacements if r.value not in placeholder]
        self.chosen = self.sanitized.keeping(keep)
        for i in range(entities.option_count):  # each line says what is sent for it now
            value = entities.get_option_at_index(i).value
            label = entity_label(self.sanitized, value, kept=value not in placeholder)
            entities.replace_option_prompt_at_index(i, label)
        self.query_one("#sanitized", Static).update(highlighted_sent(self.chosen))
        note = self.query_one("#rewrite-note", Static)
        if self.chosen.kept:
            note.update(f"{len(self.chosen.kept)} value(s) will be sent as they are")
            note.add_class("warning")
        else:
            note.update(self._note())
            note.remove_class("warning")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "send":
            self.action_approve()
        else:
            self.action_cancel()

    def action_approve(self) -> None:
        self._decided(self.chosen if self.chosen.kept else True)

    def action_cancel(self) -> None:
        self._decided(False)
