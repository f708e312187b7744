"""Which embedder made the store's embeddings, and making them again with another.

The store keeps embeddings (the cache's questions, statements, triples and names; the
files' chunks and names), and every use compares them with a text embedded now: they
mean something together only when one embedder made both.  Another model of the same
size gives vectors of the same shape and a recall of nonsense, so the store records
which embedder wrote it, by what it does rather than by its name: its embeddings of
a few fixed sentences (:data:`PROBES`, public text), in ``meta.embedder_space``.  An
embedder is the one that wrote the store when it embeds those sentences within
:data:`SAME` of the record (the same model on ONNX Runtime or on torch is one
embedder; the same folder moved too).

A store that records none (it holds nothing yet, or an earlier drag wrote it): the
first embedder to use it is recorded when the store holds no embedding, when the
cache's statements it holds are embedded as it embeds them (a sample of
:data:`SAMPLE`), or when only the files' (sealed) embeddings are there and it is the
bundled model, the only one an earlier drag could have used without a setting.
Otherwise the store was written by an embedder it cannot name, and
:func:`reembed` makes everything again with this one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import sqlite_utils

from assistant.store import files
from assistant.store.cache import Vector, pack, unpack
from assistant.store.db import reading, transaction
from assistant.store.sealing import Sealer

KEY = "embedder_space"
GENERATION = "embedder_generation"
PROBES = (
    "Plants take in carbon dioxide through small openings in their leaves.",
    "Where can I buy a second-hand bicycle near the station?",
    "Die Katze schläft auf dem warmen Sofa.",
)
# The cosine between an embedding now and the one kept, at or above which the same
# embedder made both (float16 storage moves it by about 1e-5; another model of the
# same size is far below).
SAME = 0.99
SAMPLE = 3
BATCH = 128
UNKNOWN = "an embedder the store cannot name"
REPLACING = "being replaced"  # the record while :func:`reembed` runs: no embedder's

Embed = Callable[[Sequence[str]], Vector]


@dataclass(frozen=True)
class Space:
    """An embedder as the store knows it: its name, and its embeddings of :data:`PROBES`."""

    model: str
    probes: Vector

    @classmethod
    def of(cls, model: str, embed: Embed) -> Space:
        return cls(model, np.asarray(embed(list(PROBES)), dtype=np.float32))

    def same(self, other: Space) -> bool:
        if self.probes.shape != other.probes.shape:
            return False
        return bool(np.all(_cosines(self.probes, other.probes) >= SAME))

    def to_json(self) -> str:
        return json.dumps(
            {"model": self.model, "probes": [[round(float(x), 5) for x in v] for v in self.probes]}
        )

    @classmethod
    def from_json(cls, value: str) -> Space | None:
        try:
            raw = json.loads(value)
            probes = np.asarray(raw["probes"], dtype=np.float32)
            model = str(raw["model"])
        except (ValueError, KeyError, TypeError):
            return None
        if probes.ndim != 2 or len(probes) != len(PROBES):
            return None
        return cls(model, probes)


def _cosines(a: Vector, b: Vector) -> Vector:
    na = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.asarray(np.sum(a * b, axis=1) / np.where(na == 0, 1.0, na), dtype=np.float32)


def raw(db: sqlite_utils.Database) -> str | None:
    """The record as it is kept (None: none)."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", [KEY]).fetchone()
    return None if row is None else str(row[0])


def generation(db: sqlite_utils.Database) -> int:
    """How many times :func:`reembed` started or ended on this store: what a process
    holds in memory of the cache's embeddings from an earlier generation is read again."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", [GENERATION]).fetchone()
    return int(row[0]) if row else 0


def _bump(db: sqlite_utils.Database) -> None:
    db.execute(
        "INSERT INTO meta (key, value) VALUES (?, '1') "
        "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
        [GENERATION],
    )


def recorded(db: sqlite_utils.Database) -> Space | str | None:
    """The embedder the store records; None when it records none; :data:`UNKNOWN`
    when the record cannot be read (or :func:`reembed` is under way)."""
    value = raw(db)
    if value is None:
        return None
    return Space.from_json(value) or UNKNOWN


def advice(writer: str, model: str, *, files: bool = False) -> str:
    """What a user is told when ``writer``, not embedder.model ``model``, made the
    store's embeddings (the command first: a message cut to one line keeps it)."""
    if files:
        what = "your files' index cannot be searched or added to"
    else:
        what = "the cache recalls only questions asked again word for word"
    return (
        f"`drag reembed` needed: {writer} made the store's embeddings, not embedder.model "
        f"{model!r}; until then {what}"
    )


def record(db: sqlite_utils.Database, space: Space) -> None:
    with transaction(db):
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [KEY, space.to_json()])


def _holds(db: sqlite_utils.Database, table: str) -> bool:
    return bool(db.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone()[0] == 1)


def writer(
    db: sqlite_utils.Database, here: Space, embed: Embed, *, bundled: bool, keep: bool = True
) -> str | None:
    """None when ``here`` made the store's embeddings (recorded now if the store records
    none and nothing says otherwise, unless ``keep`` is False); else the name of the
    embedder that did."""
    kept = recorded(db)
    if isinstance(kept, Space):
        return None if here.same(kept) else kept.model
    if kept is not None:
        return kept
    with reading(db):
        sample = db.execute(
            f"SELECT text, embedding FROM cache_evidence ORDER BY id LIMIT {SAMPLE}"
        ).fetchall()
        files = _holds(db, "file_chunks")
        cached = _holds(db, "cache_entries")
    if sample:
        now = np.asarray(embed([r[0] for r in sample]), dtype=np.float32)
        then = np.vstack([unpack(r[1]) for r in sample])
        if now.shape != then.shape or not np.all(_cosines(now, then) >= SAME):
            return UNKNOWN
    elif (files or cached) and not bundled:
        return UNKNOWN
    if not keep:
        return None
    with transaction(db):  # two processes at once: the first record stands
        db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", [KEY, here.to_json()])
    after = recorded(db)
    if isinstance(after, Space):
        return None if here.same(after) else after.model
    return UNKNOWN


Progress = Callable[[str, int, int], None]

# The cache's tables with embeddings, and the column each row's embedding was made from.
_CACHE = (
    ("cache_entries", "question"),
    ("cache_evidence", "text"),
    ("cache_triples", "text"),
    ("cache_entities", "name"),
)


def reembed(
    db: sqlite_utils.Database,
    sealer: Sealer,
    here: Space,
    embed: Embed,
    progress: Progress | None = None,
) -> int:
    """Every embedding the store keeps made again by ``embed``, a batch of
    :data:`BATCH` a transaction, then ``here`` recorded.  While it runs the store
    records :data:`REPLACING`, which is no embedder's: no process compares a question
    with a half-made store, and a run cut short is made again by the next.  Returns how
    many."""
    with transaction(db):
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [KEY, REPLACING])
        _bump(db)
    done = 0
    for table, column in _CACHE:
        rows = db.execute(f"SELECT id, {column} FROM {table} ORDER BY id").fetchall()
        for start in range(0, len(rows), BATCH):
            part = rows[start : start + BATCH]
            vectors = embed([r[1] for r in part])
            with transaction(db):
                for (row_id, _text), vector in zip(part, vectors, strict=True):
                    db.execute(
                        f"UPDATE {table} SET embedding = ? WHERE id = ?", [pack(vector), row_id]
                    )
            done += len(part)
            if progress is not None:
                progress(table, start + len(part), len(rows))
    done += files.reembed(db, sealer, embed, BATCH, progress)
    with transaction(db):
        record(db, here)
        _bump(db)
    return done
