"""Text from outside is data: never a terminal control, never markup, never a live link.

The teacher is assumed hostile (and the student repeats what it read), so every
string that came from a model, the user or the database goes through
:func:`plain` before a terminal or the app shows it: escape sequences (CSI,
OSC -- hyperlinks, clipboard writes, titles --, DCS, APC, PM, SOS) and C0/C1
controls are removed, carriage returns and Unicode line separators become line
breaks, and the bidi controls that make text read differently from its bytes and
the invisible characters that hide text (zero-width space, word joiner, BOM, tag
characters) are dropped.  Line breaks, tabs and the zero-width joiners stay.
Rendering as plain ``rich.text.Text`` (never markup or Markdown) is the TUI's half
of the rule; :func:`link_spans` is the vault's (no value is restored inside a link
target, judged on the text as it will be shown).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from assistant.base.textform import invisible

# ESC-introduced sequences first (whole), then single controls.  A string sequence
# (OSC, DCS, SOS, PM, APC) is removed whole only up to its terminator; without one
# before the next line break (in any form) or the next introducer, only its introducer
# goes (the text after it stays: a stray introducer must not hide the lines that follow
# it).  Stopping at the next introducer keeps the work linear.
_STOP = "\x07\x1b\x9c\x90\x98\x9d\x9e\x9f\n\r\u2028\u2029"
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI
    rf"|\x1b[\]PX^_](?:[^{_STOP}]*(?:\x07|\x1b\\|\x9c))?"  # OSC, DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]?"  # other ESC sequences (charset, keypad ...)
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # 8-bit CSI
    rf"|[\x90\x98\x9d\x9e\x9f](?:[^{_STOP}]*(?:\x07|\x1b\\|\x9c))?"  # 8-bit OSC and kin
)
# C0 and C1 controls, bidi embeddings, overrides and isolates, and invisible characters
# no text needs: zero-width space, word joiner and invisible operators, BOM.  What
# right-to-left text and emoji need stays (the bidi marks, the zero-width joiners, the
# tag characters of a region's flag); link_spans reads past all of them.
_CONTROLS = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)
_LINE_BREAKS = re.compile("\r\n?|[\u2028\u2029]")


def plain(text: str) -> str:
    """``text`` with no escape sequence or control character left (line breaks and tabs
    kept; a carriage return becomes a line break)."""
    if not text:
        return ""
    text = _LINE_BREAKS.sub("\n", text)
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


# A name's characters that would start a line once shown (plain() makes line breaks of
# carriage returns and the Unicode separators), and tabs, as escapes.
_NAME_ESCAPES = {10: "\\n", 13: "\\r", 9: "\\t", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def name_line(name: object) -> str:
    """A file's name on one line of a list or a message: bytes that are not UTF-8 (a
    name from an old disk) and line breaks or tabs are written as escapes, so a crafted
    name cannot make a line of its own."""
    shown = str(name).encode("utf-8", "backslashreplace").decode("utf-8")
    return shown.translate(_NAME_ESCAPES)


def one_line(text: str) -> str:
    """:func:`plain`, on one line (for lists, titles and error lines)."""
    return " ".join(plain(text).split())


# Where a link's target is written, besides a Markdown link's destination (read by
# CommonMark's own rule below): a reference definition's line, any URL (any scheme, to the
# next white space: a terminal may make it clickable, quotes and backticks included), a
# domain with a path, www. addresses, and an OSC 8 hyperlink (before plain() removes it).
# "To the next white space" as the reader will see it: the controls plain() removes
# (\x0b, \x0c, \x1c-\x1f, \x85) are white space to a regex but gone once shown, so they
# never end a link here (a value after one would be inside the link on the screen).
_VISIBLE = r"(?:[^\s]|[\x0b\x0c\x1c-\x1f\x85])"
_LINKS = re.compile(
    r"^[ \t]*\[[^\]\n]+\]:[^\n]*"
    rf"|(?<![\w+.-])[A-Za-z][\w+.-]{{0,31}}:(?={_VISIBLE}){_VISIBLE}*"
    rf"|(?<![\w+.-])[\w+.-]*://{_VISIBLE}*"  # a scheme glued to a word ("_https://…")
    rf"|(?<![\w@.-])(?:[\w-]+\.)+[A-Za-z]{{2,}}/{_VISIBLE}*"
    rf"|www\.{_VISIBLE}*",
    re.IGNORECASE | re.MULTILINE,
)
_OSC8 = re.compile(r"(?:\x1b\]|\x9d)8;[^\x07\x1b\x9c\n]*")


_RUN = re.compile(f"{_VISIBLE}*")


def _destination_end(text: str, start: int) -> int:
    """Where the destination and title of a Markdown link that opens at ``start`` (just
    after its ``](``) end: CommonMark's link destination (markdown-it-py's reading of it:
    ``<…>``, or a run with balanced parentheses), then up to the link's ``)``.  Where
    that rule finds none, the run of text up to the next white space (what a terminal
    would take for a link), or for a ``<`` that opens none, the rest of the line."""
    from markdown_it.helpers import parseLinkDestination

    line_end = text.find("\n", start)
    line_end = len(text) if line_end < 0 else line_end
    pos = start
    while pos < line_end and text[pos] in " \t":
        pos += 1
    found = parseLinkDestination(text, pos, line_end)
    if not found.ok and text.startswith("<", pos):
        # A <…> destination that a placeholder's own brackets keep from being one
        # ("<https://e.x/a b?<PERSON_1>>"): with the value put back it would be.
        return line_end
    if not found.ok:
        return _RUN.match(text, pos).end()  # type: ignore[union-attr]
    close = text.find(")", found.pos, line_end)  # past a title, to the link's end
    return line_end if close < 0 else close + 1


def _shown(text: str) -> tuple[str, list[int] | None]:
    """``text`` as a reader sees it once :func:`plain` has removed what it removes, and
    invisible (format) characters left out too, with where each character came from
    (None: the text is its own).  Links are looked for in this form: a control or an
    invisible character inside ``https://`` splits it in the bytes, not on the screen."""
    if text.isascii() and not _CONTROLS.search(text):
        return text, None
    hidden = bytearray(len(text))
    for m in _ESCAPES.finditer(text):
        hidden[m.start() : m.end()] = b"\x01" * (m.end() - m.start())
    for m in _CONTROLS.finditer(text):  # what plain() removes one by one
        hidden[m.start()] = 1
    for i, char in enumerate(text):  # and every invisible character, asked one by one
        if char >= "\x80" and invisible(char):
            hidden[i] = 1
    at = [i for i, h in enumerate(hidden) if not h]
    return "".join(text[i] for i in at), at


def _targets(text: str) -> list[tuple[int, int]]:
    found = [m.span() for m in _LINKS.finditer(text)]
    pos = text.find("](")
    while pos >= 0:
        end = _destination_end(text, pos + 2)
        found.append((pos, end))
        pos = text.find("](", max(end, pos + 2))
    return found


def merged_spans(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` sorted, those that meet or touch joined into one."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def link_spans(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that are link targets, read both as written and as shown (see
    :func:`_shown`): nothing private may be put there.  Both, because text that streams
    is shown piece by piece, and a sequence :func:`plain` removes whole from a line may
    be cut in two and shown in part.  Each character is read a bounded number of times
    (a reply of 2 MB of ``](`` included)."""
    found = _targets(text)
    shown, at = _shown(text)
    if at is not None:
        found += [(at[a], at[b - 1] + 1) for a, b in _targets(shown) if b > a]
        found += [m.span() for m in _OSC8.finditer(text)]  # an OSC 8 hyperlink's target
    return sorted(set(found))


_RAW_CONTROLS = re.compile(r"[\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def escape_controls(json_text: str) -> str:
    """JSON text with the controls ``json.dumps(ensure_ascii=False)`` leaves raw (DEL, C1,
    bidi overrides, line separators) written as ``\\uXXXX`` escapes: the same JSON value."""
    return _RAW_CONTROLS.sub(lambda m: f"\\u{ord(m.group(0)):04x}", json_text)
