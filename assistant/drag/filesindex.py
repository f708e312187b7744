"""Index the user's own files: MiniRAG's heterogeneous graph, built without a language model.

For each file that is new or changed (by keyed content hash; an unchanged file is
not read twice): its chunks (:mod:`assistant.files.chunks`) with their embeddings,
the named entities of each chunk (spaCy's recognizer, typed; a chat's senders are
people), and which chunk names which entity.  Entity-entity edges are the
co-occurrences within a chunk (``file_edges``).  Everything is stored sealed
(:mod:`assistant.store.files`).  The work is linear in the text added: files are
read in batches, each batch's chunks go through spaCy and the embedder once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import sqlite_utils

from assistant.base import calloff
from assistant.drag.ranking import Embedder
from assistant.files import chunks as chunking
from assistant.files import readers
from assistant.privacy.entities import EntityReader, Named, name_key
from assistant.store import Store
from assistant.store import files as stored

# Part of each file's content key: a file read or cut another way is indexed anew.
VERSION = "files-index-v2"
BATCH_CHUNKS = 256
# The most passages one file gives (a chat with a time line per message makes one a
# message: 7,400 from 200 KB); past it the file is cut there, and the index says so.
MAX_CHUNKS = 4000
# A date worth a node names a day: digits or a month ("May 3", "2026"); "tomorrow",
# "the weekend" would tie every chat to every other.
_MONTHS = re.compile(r"(?i)\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b|\d")
Progress = Callable[[int, int, str], None]  # files done, files in all, the file now


def _quiet(_done: int, _total: int, _path: str) -> None:
    pass


@dataclass
class Report:
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[readers.Skipped] = field(default_factory=list)
    cut: list[readers.Cut] = field(default_factory=list)  # indexed in part, and why
    # Indexed before, unreadable or empty now: their old chunks are gone too.
    removed: list[str] = field(default_factory=list)
    chunks: int = 0
    text_bytes: int = 0
    seconds: float = 0.0
    stopped: str = ""  # why the run stopped before its last file (the app closed)

    def line(self) -> str:
        """What was done, in one line (the CLI prints it, the app shows it)."""
        return (
            f"indexed {len(self.added)} new and {len(self.replaced)} changed file(s), "
            f"{self.chunks} chunks; {len(self.unchanged)} unchanged; "
            + (f"{len(self.cut)} read in part; " if self.cut else "")
            + f"{len(self.skipped)} skipped ({self.seconds:.1f} s)"
            + (f"; stopped: {self.stopped}" if self.stopped else "")
        )


@dataclass
class _Pending:
    found: readers.Found
    content: str
    kind: str
    pieces: list[chunking.Chunk]
    replacing: bool


def said(piece: chunking.Chunk) -> str:
    """The chunk's text without its chat senders' ``Name:`` heads, for the entity
    recognizer (it would read ``LiHua: Awesome`` as one person)."""
    if not piece.speakers:
        return piece.text
    heads = "|".join(re.escape(s) for s in sorted(piece.speakers, key=len, reverse=True))
    return re.sub(rf"(?m)^(?:{heads}):\s*", "", piece.text)


def _node(named: Named) -> bool:
    return named.type != "date" or bool(_MONTHS.search(named.name))


def entities_of(piece: chunking.Chunk, found: Sequence[Named]) -> list[stored.NewEntity]:
    """The chunk's entity nodes: its chat senders (people), then what spaCy found."""
    out: dict[str, stored.NewEntity] = {}
    for speaker in piece.speakers:
        key = name_key(speaker)
        if key:
            out.setdefault(key, stored.NewEntity(key, speaker, "person", sender=True))
    for named in found:
        key = name_key(named.name)
        if key and _node(named):
            out.setdefault(key, stored.NewEntity(key, named.name, named.type))
    return list(out.values())


def index(
    store: Store,
    embedder: Embedder,
    reader: EntityReader,
    paths: Iterable[Path],
    *,
    progress: Progress | None = None,
    check: Callable[[], None] | None = None,
    guard: Callable[[sqlite_utils.Database], None] | None = None,
) -> Report:
    """Add ``paths`` (files and folders) to the index; see the module's docstring.
    ``check`` runs before each batch is stored, ``guard`` inside each file's write; each
    stops the run by raising (the store's embeddings made by another embedder, or being
    made again, meanwhile: :mod:`assistant.store.space`)."""
    started = time.perf_counter()
    progress = progress or _quiet
    report = Report()
    sealer = store.sealer
    walked = list(readers.walk(paths))
    found = [f for f in walked if isinstance(f, readers.Found)]
    read_now = {f.path for f in found}  # never forgotten for another name's sake
    for skipped in (s for s in walked if isinstance(s, readers.Skipped)):
        # A file indexed before and not read now (grown too large, no longer a regular
        # file) must not stay as if it were current; one that is gone waits for --forget.
        try:  # a name that is not UTF-8, a folder that cannot be entered: never indexed
            known = readers.absolute(skipped.path)
            forgot = (
                known not in read_now
                and skipped.path.exists()
                and stored.forget_file(store.db, sealer, known)
            )
        except (OSError, UnicodeError):
            forgot = False
        if forgot:
            report.removed.append(str(known))
            why = f"{skipped.reason}; its earlier text was removed from the index"
            skipped = readers.Skipped(skipped.path, why)
        report.skipped.append(skipped)
    batch: list[_Pending] = []
    size = 0
    for number, item in enumerate(found, start=1):
        if calloff.called_off():  # what is read so far is stored, the names relearnt
            report.stopped = f"{calloff.CALLED_OFF}; {len(found) - number + 1} file(s) not read"
            break
        progress(number - 1, len(found), str(item.path))
        before = stored.indexed_content(store.db, sealer, item.path)
        replacing = before is not None
        try:
            data = readers.read_bytes(item.path)
            content = stored.content_key(sealer, VERSION.encode() + b"\0" + data)
            if content == before:
                report.unchanged.append(str(item.path))
                continue
            document = readers.read(item.path, data)
            pieces = chunking.chunk(document)
            if not pieces:
                raise readers.Unreadable(document.cut or "no text in it")
            cut = document.cut
            if len(pieces) > MAX_CHUNKS:
                pieces = pieces[:MAX_CHUNKS]
                cut = cut or f"it makes more than {MAX_CHUNKS:,} passages"
        except Exception as exc:  # one file's trouble never stops the rest
            reason = (
                str(exc)
                if isinstance(exc, readers.Unreadable)
                else f"could not be read ({type(exc).__name__})"
            )
            if replacing:  # what it held before must not stay as if it were current
                stored.forget_file(store.db, sealer, item.path)
                report.removed.append(str(item.path))
                reason += "; its earlier text was removed from the index"
            report.skipped.append(readers.Skipped(item.path, reason))
            continue
        if cut:
            report.cut.append(readers.Cut(item.path, cut))
        batch.append(_Pending(item, content, document.kind, pieces, replacing))
        report.text_bytes += sum(len(p.text.encode("utf-8")) for p in pieces)
        size += len(pieces)
        if size >= BATCH_CHUNKS:
            _store_batch(store, embedder, reader, batch, report, check, guard)
            batch, size = [], 0
    _store_batch(store, embedder, reader, batch, report, check, guard)
    progress(len(found), len(found), "")
    report.seconds = time.perf_counter() - started
    return report


def _store_batch(
    store: Store,
    embedder: Embedder,
    reader: EntityReader,
    batch: list[_Pending],
    report: Report,
    check: Callable[[], None] | None,
    guard: Callable[[sqlite_utils.Database], None] | None,
) -> None:
    if not batch:
        return
    if check is not None:
        check()
    texts = [p.text for pending in batch for p in pending.pieces]
    vectors = embedder.embed(texts)
    named = list(reader.read([said(p) for pending in batch for p in pending.pieces]))
    per_chunk: list[list[stored.NewEntity]] = []
    row = 0
    for pending in batch:
        for piece in pending.pieces:
            per_chunk.append(entities_of(piece, named[row]))
            row += 1
    names = {e.key: e.name for ents in per_chunk for e in ents}
    missing = sorted(set(names) - stored.known_entities(store.db, store.sealer, list(names)))
    entity_vectors = (
        dict(zip(missing, embedder.embed([names[k] for k in missing]), strict=True))
        if missing
        else {}
    )
    row = 0
    for pending in batch:
        new = []
        for piece in pending.pieces:
            new.append(
                stored.NewChunk(piece.text, piece.time, piece.page, vectors[row], per_chunk[row])
            )
            row += 1
        # A name the batch found known may have gone with a file replaced just before.
        keys = {e.key: e.name for c in new for e in c.entities}
        gone = sorted(
            set(keys)
            - set(entity_vectors)
            - stored.known_entities(store.db, store.sealer, list(keys))
        )
        if gone:
            entity_vectors.update(zip(gone, embedder.embed([keys[k] for k in gone]), strict=True))
        stored.replace(
            store.db,
            store.sealer,
            path=pending.found.path,
            content=pending.content,
            kind=pending.kind,
            size=pending.found.size,
            mtime=pending.found.mtime,
            chunks=new,
            entity_vectors=entity_vectors,
            guard=guard,
        )
        (report.replaced if pending.replacing else report.added).append(str(pending.found.path))
        report.chunks += len(new)
