"""The settings screen: the keys people change, validated, saved to the CLI's config file."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Footer, Header, Input, Select, Static, Switch

from assistant.base import config, secrets
from assistant.base.errors import ConfigError
from assistant.tui.widgets import DragScreen, Plain, PlainLabel, StatusBar

# (key, widget kind) in the order shown; every other key stays as the file has it.
FIELDS: tuple[tuple[str, str], ...] = (
    ("teacher.endpoint", "text"),
    ("teacher.model", "text"),
    ("student.model", "text"),
    ("pipeline.mode", "choice"),
    ("pipeline.n", "text"),
    ("pipeline.k", "text"),
    ("privacy.review", "choice"),
    ("store.offline", "switch"),
)


def _field_id(key: str) -> str:
    return "set-" + key.replace(".", "-")


class SettingsScreen(DragScreen):
    BINDINGS = [Binding("ctrl+s", "save", "Save")]

    def compose(self) -> ComposeResult:
        settings = self.drag.settings
        yield Header()
        with VerticalScroll(id="settings"):
            yield Plain(
                f"Save (ctrl+s) writes what you change to {settings.config_file}, "
                "the file `drag` reads.",
                id="where",
            )
            for key, kind in FIELDS:
                spec = config.SCHEMA[key]
                value = settings.get(key)
                with Horizontal(classes="field"):
                    yield PlainLabel(key, classes="key")
                    if kind == "choice":
                        yield Select(
                            [(c, c) for c in spec.choices or ()],
                            value=value,
                            allow_blank=False,
                            id=_field_id(key),
                        )
                    elif kind == "switch":
                        yield Switch(bool(value), id=_field_id(key))
                    else:
                        yield Input(str(value), id=_field_id(key))
                    yield PlainLabel(spec.help, classes="help")
                yield Plain("", id=_field_id(key) + "-error", classes="field-error")
            with Horizontal(classes="field"):
                yield PlainLabel("teacher API key", classes="key")
                yield Input(
                    placeholder=f"currently: {secrets.key_source()}; type a new one to store it",
                    password=True,
                    id="set-api-key",
                )
                yield PlainLabel("kept in the system keyring, never shown again", classes="help")
            yield Plain("", id="set-api-key-error", classes="field-error")
            yield Button("Save (ctrl+s)", variant="primary", id="save")
        yield StatusBar()
        yield Footer()

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, _kind in FIELDS:
            widget = self.query_one("#" + _field_id(key))
            if isinstance(widget, Switch | Select | Input):
                out[key] = widget.value
        return out

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save":
            self.action_save()

    def action_save(self) -> None:
        settings = self.drag.settings
        changes: dict[str, Any] = {}
        problems = 0
        for key, value in self.values().items():  # each field says what is wrong with it
            error = self.query_one("#" + _field_id(key) + "-error", Static)
            try:
                typed = config.coerce(config.SCHEMA[key], value, "this field")
            except ConfigError as exc:
                error.update(f"✗ {exc}")
                problems += 1
                continue
            error.update("")
            if typed != settings.get(key):  # "4" typed is the 4 in use: not a change
                changes[key] = value
        key_input = self.query_one("#set-api-key", Input)
        key_error = self.query_one("#set-api-key-error", Static)
        if key_input.value.strip():
            try:
                secrets.store_api_key(key_input.value)
                key_error.update("✓ stored in the system keyring")
            except ConfigError as exc:
                key_error.update(f"✗ {exc}")
                problems += 1
            key_input.value = ""  # never shown again
            key_input.placeholder = f"currently: {secrets.key_source()}"
        if problems:
            self.notify(f"{problems} field(s) need fixing; nothing else was lost", severity="error")
            return
        if changes:
            path = config.save(changes, settings.config_file)
            self.drag.reload_settings()
            self.notify(f"saved {len(changes)} setting(s) to {path}")
        else:
            self.notify("nothing changed")
