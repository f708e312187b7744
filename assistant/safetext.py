"""Text from outside is data: never a terminal control, never markup, never a live link.

The teacher is assumed hostile (and the student repeats what it read), so every
string that came from a model, the user or the database goes through
:func:`plain` before a terminal or the app shows it: escape sequences (CSI,
OSC -- hyperlinks, clipboard writes, titles --, DCS, APC, PM, SOS) and C0/C1
controls are removed, carriage returns become line breaks, and the bidi
overrides that make text read differently from its bytes are dropped.  Line
breaks and tabs stay.  Rendering as plain ``rich.text.Text`` (never markup or
Markdown) is the TUI's half of the rule; :func:`link_spans` is the vault's
(no value is restored inside a link target).
"""

from __future__ import annotations

import re

# ESC-introduced sequences first (whole), then single controls.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC, DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]?"  # other ESC sequences (charset, keypad ...)
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # 8-bit CSI
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # 8-bit OSC and kin
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def plain(text: str) -> str:
    """``text`` with no escape sequence or control character left (line breaks and tabs
    kept; a carriage return becomes a line break)."""
    if not text:
        return ""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


def one_line(text: str) -> str:
    """:func:`plain`, on one line (for lists, titles and error lines)."""
    return " ".join(plain(text).split())


# Where a link's target is written: a Markdown link or image target, a reference
# definition, an autolink, a bare URL, and an OSC 8 hyperlink (before plain() removes it).
_LINKS = re.compile(
    r"\]\([^)\n]*\)?"
    r"|^[ \t]*\[[^\]\n]+\]:[^\n]*"
    r"|<(?:https?|ftp|mailto|file|data|javascript):[^\n]*?>"
    r"|(?:https?|ftp|file)://[^\s\"'`]*"
    r"|(?:mailto|data|javascript):[^\s\"'`]*"
    r"|www\.[^\s\"'`]*"
    r"|\x1b\]8;[^\x07\x1b]*",
    re.IGNORECASE | re.MULTILINE,
)


def link_spans(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that are link targets: nothing private may be put there."""
    return [m.span() for m in _LINKS.finditer(text)]


_RAW_CONTROLS = re.compile(r"[\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def escape_controls(json_text: str) -> str:
    """JSON text with the controls ``json.dumps(ensure_ascii=False)`` leaves raw (DEL, C1,
    bidi overrides, line separators) written as ``\\uXXXX`` escapes: the same JSON value."""
    return _RAW_CONTROLS.sub(lambda m: f"\\u{ord(m.group(0)):04x}", json_text)
