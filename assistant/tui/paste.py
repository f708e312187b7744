"""Pasted text is text: the escape characters inside a bracketed paste are dropped before
Textual's terminal parser reads them.

Textual 8's parser reads an escape character inside a paste as the start of a key
sequence it does not know and replays what follows as key presses: the paste came out
reordered, and a line break in it was an Enter that asked the question (an exploratory
test: `P1 ESC[2J P2 ⏎ P3` pasted sent "^[2J P2P3P1" to the teacher with no key
pressed).  Terminals such as Alacritty drop them from what they paste for the same
reason.  :func:`install` puts :class:`PasteFilter` in front of the Linux driver's parser.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

START = "\x1b[200~"  # a terminal's bracketed paste begins
END = "\x1b[201~"  # ... and ends
ESC = "\x1b"


def _held_prefix(text: str, marker: str) -> int:
    """How many of ``text``'s last characters begin ``marker`` (a marker cut by a read)."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0


class PasteFilter:
    """Terminal input with the escape characters between a paste's start and end
    markers removed, the markers kept; across reads (a marker cut in two is held until
    the next).  Outside a paste the input passes as it is, at once: a lone Escape key is
    never held back.  A paste holding the end marker's own text ends there, as the
    terminal's would."""

    def __init__(self) -> None:
        self.pasting = False
        self._held = ""

    def __call__(self, data: str) -> str:
        text, self._held = self._held + data, ""
        out: list[str] = []
        at = 0
        while at < len(text):
            if not self.pasting:
                begins = text.find(START, at)
                if begins < 0:
                    # A start marker cut by a read is held, from its third character on
                    # ("ESC [ 2"): no key is that, so a lone Escape or alt+[ goes at once.
                    keep = _held_prefix(text[at:], START)
                    keep = keep if keep >= 3 else 0
                    out.append(text[at : len(text) - keep])
                    self._held = text[len(text) - keep :]
                    break
                out.append(text[at : begins + len(START)])
                self.pasting, at = True, begins + len(START)
                continue
            ends = text.find(END, at)
            if ends < 0:
                keep = _held_prefix(text[at:], END)
                out.append(text[at : len(text) - keep].replace(ESC, ""))
                self._held = text[len(text) - keep :]
                break
            out.append(text[at:ends].replace(ESC, "") + END)
            self.pasting, at = False, ends + len(END)
        return "".join(out)

    def flush(self) -> str:
        """What is held at the end of the input."""
        held, self._held = self._held, ""
        return held


def install() -> None:
    """The Linux driver's parser reads terminal input through a :class:`PasteFilter`
    (once per process; other drivers are left as they are)."""
    try:
        from textual.drivers import linux_driver
    except ImportError:  # not on this platform
        return
    parser = linux_driver.XTermParser  # type: ignore[attr-defined]
    if getattr(parser, "pastes_text", False):
        return

    class PasteTextParser(parser):  # type: ignore[misc,valid-type]
        pastes_text = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._pasted = PasteFilter()

        def feed(self, data: str) -> Iterable[Any]:
            if not data:  # the end of the input: what was held, then the end
                held = self._pasted.flush()
                if held:
                    yield from super().feed(held)
                yield from super().feed("")
                return
            filtered = self._pasted(data)
            if filtered:  # "" would be read as the end of the input
                yield from super().feed(filtered)

    linux_driver.XTermParser = PasteTextParser  # type: ignore[attr-defined]
