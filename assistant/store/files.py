"""The index of the user's own files, sealed at rest (schema: ``db.m006_files``).

A file's text is as private as the user's questions: paths, chunk texts, entity
names and every embedding are sealed (:mod:`assistant.store.sealing`); a path, a
file's content and a name are looked up by keyed hash.  Nothing here is ever sent.

``meta.files_generation`` counts changes, so that an index held in memory
(:mod:`assistant.drag.graphsearch`) knows when to load again.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import sqlite_utils
from numpy.typing import NDArray

from assistant.store.cache import pack, unpack_many
from assistant.store.corpus import Corpus
from assistant.store.db import count_up, counter, meta, reading, transaction
from assistant.store.ledger import now
from assistant.store.sealing import Sealer

Vector = NDArray[np.float32]
PERSONAL_TYPES = ("person", "org", "place")


@dataclass(frozen=True)
class NewEntity:
    key: str  # the name's normal form (assistant.privacy.entities.name_key)
    name: str
    type: str
    sender: bool = False  # a chat's sender (a person by the file's own structure)


@dataclass
class NewChunk:
    text: str
    time: str
    page: int
    embedding: Vector
    entities: list[NewEntity] = field(default_factory=list)


@dataclass(frozen=True)
class Source:
    id: int
    path: str
    kind: str
    size: int
    mtime: float
    indexed: str
    chunks: int


GENERATION = "files_generation"


def generation(db: sqlite_utils.Database) -> int:
    return counter(db, GENERATION)


def bump(db: sqlite_utils.Database) -> None:
    """The index changed: one held in memory loads again (:func:`generation`)."""
    count_up(db, GENERATION)


def count(db: sqlite_utils.Database) -> int:
    return int(db.execute("SELECT count(*) FROM file_sources").fetchone()[0])


def path_key(sealer: Sealer, path: Path) -> str:
    return sealer.keyed(str(path), "file-path")


def content_key(sealer: Sealer, data: bytes) -> str:
    return sealer.keyed(data, "file-content")


def indexed_content(db: sqlite_utils.Database, sealer: Sealer, path: Path) -> str | None:
    """The content key ``path`` is indexed with (:func:`content_key`); None when it is
    not indexed."""
    row = db.execute(
        "SELECT content_key FROM file_sources WHERE path_key = ?", [path_key(sealer, path)]
    ).fetchone()
    return None if row is None else str(row[0])


def _opened(sealer: Sealer, blob: bytes, column: str) -> dict[str, Any]:
    """A sealed JSON value (a chunk's body, an entity's), opened."""
    opened: dict[str, Any] = json.loads(sealer.open(blob, column) or "{}")
    return opened


def known_entities(db: sqlite_utils.Database, sealer: Sealer, keys: Sequence[str]) -> set[str]:
    """Which of the name keys ``keys`` the index holds already (their embeddings too)."""
    hashed = {sealer.keyed(k, "file-entity"): k for k in keys}
    found: set[str] = set()
    items = list(hashed)
    for start in range(0, len(items), 500):
        part = items[start : start + 500]
        marks = ",".join("?" for _ in part)
        rows = db.execute(f"SELECT key FROM file_entities WHERE key IN ({marks})", part)
        found.update(hashed[r[0]] for r in rows.fetchall())
    return found


def _entities_of(db: sqlite_utils.Database, source_ids: Sequence[int]) -> list[int]:
    """The entities the chunks of these sources name (before they go)."""
    return [
        int(r[0])
        for r in db.execute(
            "SELECT DISTINCT m.entity_id FROM file_mentions m JOIN file_chunks c "
            "ON c.id = m.chunk_id WHERE c.source_id IN (SELECT value FROM json_each(?))",
            [json.dumps(list(source_ids))],
        )
    ]


def _drop_orphans(db: sqlite_utils.Database, entity_ids: Sequence[int]) -> None:
    """Of ``entity_ids`` (those a removed file named), the ones no chunk names now: the
    work is the removed file's, not the index's (a scan of the whole table per file
    made indexing quadratic in the files)."""
    db.execute(
        "DELETE FROM file_entities WHERE id IN (SELECT value FROM json_each(?)) "
        "AND NOT EXISTS (SELECT 1 FROM file_mentions m WHERE m.entity_id = file_entities.id)",
        [json.dumps(list(entity_ids))],
    )


def replace(
    db: sqlite_utils.Database,
    sealer: Sealer,
    *,
    path: Path,
    content: str,
    kind: str,
    size: int,
    mtime: float,
    chunks: Sequence[NewChunk],
    entity_vectors: dict[str, Vector],
    guard: Callable[[sqlite_utils.Database], None] | None = None,
) -> int:
    """Index ``path`` anew (its old chunks go): one transaction.  ``entity_vectors``
    holds the embedding of each entity key the index does not know yet; ``guard`` runs
    first inside the transaction and stops the write by raising."""
    key = path_key(sealer, path)
    with transaction(db):
        if guard is not None:
            guard(db)
        named_before = _entities_of(db, _ids_of(db, key))
        db.execute("DELETE FROM file_sources WHERE path_key = ?", [key])
        source_id = int(
            db.execute(
                "INSERT INTO file_sources (path_key, path, content_key, kind, size, mtime, "
                "indexed, chunks) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    key,
                    sealer.seal(str(path), "file_sources.path"),
                    content,
                    kind,
                    size,
                    mtime,
                    now(),
                    len(chunks),
                ],
            ).lastrowid
            or 0
        )
        entity_ids: dict[str, int] = {}
        for number, piece in enumerate(chunks):
            body = json.dumps({"text": piece.text, "time": piece.time, "page": piece.page})
            chunk_id = db.execute(
                "INSERT INTO file_chunks (source_id, ord, body, embedding) VALUES (?, ?, ?, ?)",
                [
                    source_id,
                    number,
                    sealer.seal(body, "file_chunks.body"),
                    sealer.seal_bytes(pack(piece.embedding), "file_chunks.embedding"),
                ],
            ).lastrowid
            for entity in piece.entities:
                if entity.key not in entity_ids:
                    entity_ids[entity.key] = _entity_id(db, sealer, entity, entity_vectors)
                db.execute(
                    "INSERT OR IGNORE INTO file_mentions (chunk_id, entity_id) VALUES (?, ?)",
                    [chunk_id, entity_ids[entity.key]],
                )
        _drop_orphans(db, named_before)
        bump(db)
    return source_id


def _entity_id(
    db: sqlite_utils.Database, sealer: Sealer, entity: NewEntity, vectors: dict[str, Vector]
) -> int:
    hashed = sealer.keyed(entity.key, "file-entity")
    row = db.execute("SELECT id FROM file_entities WHERE key = ?", [hashed]).fetchone()
    if row is not None:
        return int(row[0])
    body = json.dumps({"name": entity.name, "sender": entity.sender})
    return int(
        db.execute(
            "INSERT INTO file_entities (key, type, body, embedding) VALUES (?, ?, ?, ?)",
            [
                hashed,
                entity.type,
                sealer.seal(body, "file_entities.body"),
                sealer.seal_bytes(pack(vectors[entity.key]), "file_entities.embedding"),
            ],
        ).lastrowid
        or 0
    )


def sources(db: sqlite_utils.Database, sealer: Sealer) -> list[Source]:
    rows = db.execute(
        "SELECT id, path, kind, size, mtime, indexed, chunks FROM file_sources"
    ).fetchall()
    out = [
        Source(r[0], sealer.open(r[1], "file_sources.path") or "", r[2], r[3], r[4], r[5], r[6])
        for r in rows
    ]
    return sorted(out, key=lambda s: s.path)


def under(path: str, folder: Path) -> bool:
    """Whether the indexed ``path`` is ``folder`` or inside it."""
    return Path(path) == folder or Path(path).is_relative_to(folder)


def forget(db: sqlite_utils.Database, sealer: Sealer, target: Path) -> list[str]:
    """Remove every indexed file at or under ``target`` (chunks, mentions, embeddings, and
    the entities no other file names); returns the paths removed."""
    gone = [s for s in sources(db, sealer) if under(s.path, target)]
    _remove(db, [s.id for s in gone])
    return [s.path for s in gone]


def forget_file(db: sqlite_utils.Database, sealer: Sealer, path: Path) -> bool:
    """Remove one indexed file, found by its key (no other path is opened); whether it
    was there."""
    ids = _ids_of(db, path_key(sealer, path))
    _remove(db, ids)
    return bool(ids)


def _ids_of(db: sqlite_utils.Database, key: str) -> list[int]:
    """The source row of the file with this path key (none, or one)."""
    return [int(r[0]) for r in db.execute("SELECT id FROM file_sources WHERE path_key = ?", [key])]


def _remove(db: sqlite_utils.Database, source_ids: Sequence[int]) -> None:
    if source_ids:
        with transaction(db):
            named = _entities_of(db, source_ids)
            db.execute(
                "DELETE FROM file_sources WHERE id IN (SELECT value FROM json_each(?))",
                [json.dumps(list(source_ids))],
            )
            _drop_orphans(db, named)
            bump(db)
        # The log still holds the pages as they were: copied back, then emptied (best
        # effort: a reader in another process may hold it; the next checkpoint does it).
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def load(db: sqlite_utils.Database, sealer: Sealer, dim: int) -> Corpus:
    """The whole index, opened (one read transaction, so its parts agree)."""
    with reading(db):
        paths = {
            r[0]: sealer.open(r[1], "file_sources.path") or ""
            for r in db.execute("SELECT id, path FROM file_sources").fetchall()
        }
        chunk_rows = db.execute(
            "SELECT id, source_id, body, embedding FROM file_chunks ORDER BY id"
        ).fetchall()
        entity_rows = db.execute(
            "SELECT id, type, body, embedding FROM file_entities ORDER BY id"
        ).fetchall()
        mention_rows = db.execute("SELECT chunk_id, entity_id FROM file_mentions").fetchall()
    texts, where, vectors = [], [], []
    for _id, source_id, body, embedding in chunk_rows:
        opened = _opened(sealer, body, "file_chunks.body")
        texts.append(str(opened.get("text", "")))
        where.append(
            (paths.get(source_id, ""), str(opened.get("time", "")), int(opened.get("page", 0)))
        )
        vectors.append(sealer.open_bytes(embedding, "file_chunks.embedding") or b"")
    names, types, evectors = [], [], []
    for _id, kind, body, embedding in entity_rows:
        names.append(str(_opened(sealer, body, "file_entities.body").get("name", "")))
        types.append(kind)
        evectors.append(sealer.open_bytes(embedding, "file_entities.embedding") or b"")
    chunk_ids = np.array([r[0] for r in chunk_rows], dtype=np.int64)
    entity_ids = np.array([r[0] for r in entity_rows], dtype=np.int64)
    chunk_row = {int(c): i for i, c in enumerate(chunk_ids)}
    entity_row = {int(e): i for i, e in enumerate(entity_ids)}
    mentions = [
        (chunk_row[c], entity_row[e]) for c, e in mention_rows if c in chunk_row and e in entity_row
    ]

    return Corpus(
        chunk_ids,
        texts,
        where,
        unpack_many(vectors, dim),
        entity_ids,
        names,
        types,
        unpack_many(evectors, dim),
        mentions,
    )


def personal_names(db: sqlite_utils.Database, sealer: Sealer) -> list[tuple[str, bool, bool]]:
    """(name, whether a chat's sender, whether a person) of the people, organisations and
    places the user's files name."""
    marks = ",".join("?" for _ in PERSONAL_TYPES)
    rows = db.execute(
        f"SELECT type, body FROM file_entities WHERE type IN ({marks}) ORDER BY id",
        list(PERSONAL_TYPES),
    ).fetchall()
    out = []
    for kind, body in rows:
        opened = _opened(sealer, body, "file_entities.body")
        sender = bool(opened.get("sender", False))
        out.append((str(opened.get("name", "")), sender, sender or kind == "person"))
    return out


@dataclass(frozen=True)
class Learnt:
    """The names the detector learns from the files; ``people``: those of persons (a
    person's placeholder, and each part of the name kept from the teacher)."""

    names: tuple[str, ...] = ()
    people: tuple[str, ...] = ()
    # Those made of everyday words alone (a chat's sender "Will"): only as written.
    written: tuple[str, ...] = ()


def save_learnt(db: sqlite_utils.Database, sealer: Sealer, learnt: Learnt) -> None:
    """The names the detector learns from the files (assistant.privacy.entities.personal),
    sealed in one value, so that a question's detector need not open every chunk."""
    value = json.dumps(
        {"names": learnt.names, "people": learnt.people, "written": learnt.written},
        ensure_ascii=False,
    )
    sealed = sealer.seal(value, "meta.files_learnt")
    with transaction(db):
        db.execute(
            "INSERT INTO meta (key, value) VALUES ('files_learnt', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [base64.b64encode(sealed).decode("ascii")],
        )
        bump(db)


def learnt(db: sqlite_utils.Database, sealer: Sealer) -> Learnt:
    value = meta(db, "files_learnt")
    if value is None:
        return Learnt()
    opened = json.loads(sealer.open(base64.b64decode(value), "meta.files_learnt") or "[]")
    if isinstance(opened, list):  # written before people were told apart: names only
        return Learnt(tuple(str(n) for n in opened))
    names = tuple(str(n) for n in opened.get("names", []))
    return Learnt(
        names,
        tuple(str(n) for n in opened.get("people", []) if n in names),
        tuple(str(n) for n in opened.get("written", []) if n in names),
    )


def chunk_texts(db: sqlite_utils.Database, sealer: Sealer) -> Iterator[str]:
    for (body,) in db.execute("SELECT body FROM file_chunks ORDER BY id").fetchall():
        yield str(_opened(sealer, body, "file_chunks.body").get("text", ""))


def size_on_disk(db: sqlite_utils.Database) -> int:
    """Bytes the index's tables and indexes take (SQLite's dbstat where it has it)."""
    try:
        row = db.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'file\\_%' ESCAPE '\\' "
            "OR name LIKE 'sqlite_autoindex_file\\_%' ESCAPE '\\'"
        ).fetchone()
    except Exception:  # dbstat is a compile-time option
        return 0
    return int(row[0] or 0)


# The tables with embeddings, and the field of each row's sealed body its embedding is
# made from (:func:`assistant.store.space.reembed` makes them again).
EMBEDDED = (("file_chunks", "text"), ("file_entities", "name"))


def embedding_source(sealer: Sealer, table: str, body: bytes, field_name: str) -> str:
    """What the embedding of a row of ``table`` (one of :data:`EMBEDDED`) is made from."""
    return str(_opened(sealer, body, f"{table}.body").get(field_name, ""))


def sealed_embedding(sealer: Sealer, table: str, vector: Vector) -> bytes:
    return sealer.seal_bytes(pack(vector), f"{table}.embedding")


def samples(db: sqlite_utils.Database, sealer: Sealer, n: int) -> list[tuple[str, Vector]]:
    """The first and the last ``n`` rows of each table with embeddings: the text each
    embedding was made from, and the embedding."""
    out: list[tuple[str, Vector]] = []
    for table, field_name in EMBEDDED:
        for order in ("ASC", "DESC"):
            rows = db.execute(
                f"SELECT body, embedding FROM {table} ORDER BY id {order} LIMIT ?", [n]
            ).fetchall()
            for body, blob in rows:
                vector = unpack_many([sealer.open_bytes(blob, f"{table}.embedding") or b""], 0)
                out.append((embedding_source(sealer, table, body, field_name), vector[0]))
    return out
