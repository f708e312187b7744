"""Small widgets shared by the screens."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from textual.screen import Screen
from textual.widgets import Static

if TYPE_CHECKING:
    from assistant.tui.app import DragApp


class DragScreen(Screen[None]):
    """A screen of the app: ``self.drag`` is the app, typed."""

    @property
    def drag(self) -> DragApp:
        from assistant.tui.app import DragApp

        assert isinstance(self.app, DragApp)
        return self.app


class StatusBar(Static):
    """One line above the footer: what is loading, what is on (offline, teacher).

    Not docked: the footer docks at the bottom and would cover it; yielded last before
    the footer, after a 1fr body, it sits right above it."""

    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; color: $text-muted; padding: 0 1; }
    """

    def on_mount(self) -> None:
        if hasattr(self.app, "status"):
            self.watch(self.app, "status", self._show)

    def _show(self, value: str) -> None:
        self.update(value)


def bar_chart(
    groups: Mapping[str, Mapping[str, float]], width: int = 40, percent: bool = True
) -> str:
    """Horizontal bars in text: one block per group, one bar per series."""
    top = max((v for g in groups.values() for v in g.values()), default=0.0) or 1.0
    label_w = max((len(s) for g in groups.values() for s in g), default=4)
    lines: list[str] = []
    for group, values in groups.items():
        lines.append(group)
        for series, value in values.items():
            cells = round(width * value / top)
            shown = f"{value:.1%}" if percent else f"{value:g}"
            lines.append(f"  {series:<{label_w}} {'█' * cells}{'▏' if not cells else ''} {shown}")
    return "\n".join(lines)
