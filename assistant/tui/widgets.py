"""Small widgets shared by the screens."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual.screen import Screen
from textual.visual import VisualType
from textual.widgets import Label, Static

from assistant.base import safetext

if TYPE_CHECKING:
    from assistant.tui.app import DragApp


def plain_text(text: str) -> Text:
    """A string as it is written: no markup, no control sequence (assistant.base.safetext)."""
    return Text(safetext.plain(text))


def highlighted(text: str, spans: Iterable[tuple[int, int]], style: str) -> Text:
    """:func:`plain_text` of ``text`` with ``spans`` (of the original) in ``style``: each
    piece is cleaned on its own, so the marks stay on the characters they were for."""
    out, cursor = Text(), 0
    for start, end in sorted(spans):
        if start < cursor:
            continue
        out.append(safetext.plain(text[cursor:start]))
        out.append(safetext.plain(text[start:end]), style=style)
        cursor = end
    out.append(safetext.plain(text[cursor:]))
    return out


def _shown(content: VisualType) -> VisualType:
    """A string as written (:func:`plain_text`); a rich Text (already plain) as it is."""
    return plain_text(content) if isinstance(content, str) else content


class Plain(Static):
    """Static for any text: shown as written, never read as markup, Markdown or terminal
    control; a link is inert text.  Every Static and Label of the app is one of these or
    a :class:`PlainLabel` (issue 30: an error message quoting a teacher is text too)."""

    def __init__(self, content: VisualType = "", **kwargs: Any) -> None:
        super().__init__(_shown(content), markup=False, **kwargs)

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        super().update(_shown(content), layout=layout)


class PlainLabel(Label):
    """Label for any text (a heading, a conversation title, a question to confirm)."""

    def __init__(self, content: VisualType = "", **kwargs: Any) -> None:
        super().__init__(_shown(content), markup=False, **kwargs)

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        super().update(_shown(content), layout=layout)


class DragScreen(Screen[None]):
    """A screen of the app: ``self.drag`` is the app, typed."""

    @property
    def drag(self) -> DragApp:
        # Typed only: the app imports its screens, so a screen does not import the app.
        return cast("DragApp", self.app)


class StatusBar(Plain):
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
        self.update(plain_text(value))  # it quotes errors: never markup


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
