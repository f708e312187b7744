"""Cut a read file into chunks: whole units, up to :data:`CHUNK_CHARS` characters.

A chunk never joins two chat times or two PDF pages (its source is one place a user
can look up), and a unit longer than a chunk is cut at a sentence end, else at a
space, else anywhere.  Work is linear in the text's length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from assistant.files.readers import Document, Unit

CHUNK_CHARS = 800
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


@dataclass(frozen=True)
class Chunk:
    ord: int
    text: str
    time: str = ""
    page: int = 0
    speakers: tuple[str, ...] = ()


def _line(unit: Unit) -> str:
    return f"{unit.speaker}: {unit.text}" if unit.speaker else unit.text


def _pieces(text: str, limit: int) -> list[str]:
    """``text`` cut into pieces of at most ``limit`` characters."""
    out: list[str] = []
    start = 0
    while len(text) - start > limit:
        head = text[start : start + limit]
        cut = max((m.end() for m in _SENTENCE_END.finditer(head)), default=0)
        if cut < limit // 3:
            cut = head.rfind(" ") + 1
        if cut < limit // 3:
            cut = limit
        out.append(head[:cut].strip())
        start += cut
    out.append(text[start:].strip())
    return [p for p in out if p]


def chunk(document: Document, limit: int = CHUNK_CHARS) -> list[Chunk]:
    chunks: list[Chunk] = []
    lines: list[str] = []
    speakers: dict[str, None] = {}
    size = 0
    where: tuple[str, int] | None = None

    def close() -> None:
        nonlocal lines, speakers, size
        if lines and where is not None:
            chunks.append(Chunk(len(chunks), "\n".join(lines), where[0], where[1], tuple(speakers)))
        lines, speakers, size = [], {}, 0

    for unit in document.units:
        here = (unit.time, unit.page)
        if here != where:
            close()
            where = here
        for piece in _pieces(_line(unit), limit):
            if size and size + len(piece) + 1 > limit:
                close()
            lines.append(piece)
            size += len(piece) + 1
            if unit.speaker:
                speakers.setdefault(unit.speaker, None)
    close()
    return chunks
