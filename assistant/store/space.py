"""Which embedder made the store's embeddings, and making them again with another.

The store keeps embeddings (the cache's questions, statements, triples and names; the
files' chunks and names), and every use compares them with a text embedded now: they
mean something together only when one embedder made both.  Another model of the same
size gives vectors of the same shape and a recall of nonsense, so the store records
which embedder wrote it, by what it does rather than by its name: its embeddings of
a few fixed sentences (:data:`PROBES`, public text), in ``meta.embedder_space``.  An
embedder is the one that wrote the store when it embeds those sentences within
:data:`SAME` of the record (the same folder moved is the same embedder).

A store that records none (it holds nothing yet, or an earlier drag wrote it): the
first embedder to use it is recorded when the store holds no embedding, or when it
embeds as they are kept the texts of a sample of every table with embeddings (the
first and the last :data:`SAMPLE` rows of each).  Otherwise the store was written by
an embedder it cannot name, and :func:`reembed` makes everything again with this one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import sqlite_utils

from assistant.base.errors import StoreError
from assistant.store import files
from assistant.store.cache import Vector, pack, unpack
from assistant.store.db import count_up, counter, meta, reading, transaction
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
SAMPLE = 2
BATCH = 128
UNKNOWN = "an embedder the store cannot name"
REPLACING = "being made again"  # the record while :func:`reembed` runs: no embedder's

Embed = Callable[[Sequence[str]], Vector]

# The cache's tables with embeddings, and the column each row's embedding was made from.
_CACHE = (
    ("cache_entries", "question"),
    ("cache_evidence", "text"),
    ("cache_triples", "text"),
    ("cache_entities", "name"),
)


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
    return meta(db, KEY)


def generation(db: sqlite_utils.Database) -> int:
    """How many times :func:`reembed` started or ended on this store: what a process
    holds in memory of the cache's embeddings from an earlier generation is read again."""
    return counter(db, GENERATION)


def recorded(db: sqlite_utils.Database) -> Space | str | None:
    """The embedder the store records; None when it records none; :data:`REPLACING`
    while :func:`reembed` runs (or after one was cut short); :data:`UNKNOWN` when the
    record cannot be read."""
    value = raw(db)
    if value is None or value == REPLACING:
        return value
    return Space.from_json(value) or UNKNOWN


def advice(writer: str, model: str, *, files: bool = False) -> str:
    """What a user is told when ``writer``, not embedder.model ``model``, made the
    store's embeddings (the command first: a message cut to one line keeps it)."""
    if files:
        what = "your files' index cannot be searched or added to"
    else:
        what = "the cache recalls only questions asked again word for word and keeps nothing new"
    if writer == REPLACING:
        return (
            "the store's embeddings are being made again (a `drag reembed` runs, or one "
            f"was cut short: run it again); until then {what}"
        )
    return (
        f"`drag reembed` needed: {writer} made the store's embeddings, not embedder.model "
        f"{model!r}; until then {what}"
    )


def record(db: sqlite_utils.Database, space: Space) -> None:
    with transaction(db):
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [KEY, space.to_json()])


Sample = list[tuple[str, Vector]]


def samples(db: sqlite_utils.Database, sealer: Sealer) -> Sample:
    """Texts the store keeps, each with the embedding it keeps of it: the first and the
    last :data:`SAMPLE` rows of every table with embeddings."""
    out: Sample = []
    with reading(db):
        for table, column in _CACHE:
            for order in ("ASC", "DESC"):
                rows = db.execute(
                    f"SELECT {column}, embedding FROM {table} ORDER BY id {order} LIMIT ?",
                    [SAMPLE],
                ).fetchall()
                out += [(str(text), unpack(blob)) for text, blob in rows]
        out += files.samples(db, sealer, SAMPLE)
    return out


def writer(
    db: sqlite_utils.Database,
    here: Space,
    embed: Embed,
    sample: Callable[[], Sample],
    *,
    keep: bool = True,
) -> str | None:
    """None when ``here`` made the store's embeddings (recorded now if the store records
    none and ``here`` embeds the texts of ``sample()`` as they are kept, unless ``keep``
    is False); else the name of the embedder that did."""
    kept = recorded(db)
    if isinstance(kept, Space):
        if here.same(kept):
            return None
        if not keep or _holds_embeddings(db):
            return kept.model
        kept = None  # it holds none now (purged, forgotten): this embedder's from here on
        with transaction(db):
            db.execute("DELETE FROM meta WHERE key = ? AND value = ?", [KEY, raw(db)])
    if kept is not None:
        return kept
    found = sample()
    if found:
        now = np.asarray(embed([text for text, _ in found]), dtype=np.float32)
        then = [vector for _, vector in found]
        if any(v.shape != now[0].shape for v in then):
            return UNKNOWN
        if not np.all(_cosines(now, np.vstack(then)) >= SAME):
            return UNKNOWN
    if not keep:
        return None
    with transaction(db):  # two processes at once: the first record stands
        db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", [KEY, here.to_json()])
    after = recorded(db)
    if isinstance(after, Space):
        return None if here.same(after) else after.model
    return UNKNOWN if after is None else after


def _holds_embeddings(db: sqlite_utils.Database) -> bool:
    tables = [t for t, _ in _CACHE] + [t for t, _ in files.EMBEDDED]
    return any(db.execute(f"SELECT EXISTS (SELECT 1 FROM {t})").fetchone()[0] == 1 for t in tables)


def unchanged(seen: str | None, db: sqlite_utils.Database) -> None:
    """Inside a write's transaction: a StoreError unless the store still records what it
    did (``seen``, :func:`raw`) when the embedder writing was found to be its own (a
    ``drag reembed`` may have begun meanwhile)."""
    if raw(db) != seen:
        raise StoreError(
            "the store's embeddings were being made again meanwhile (drag reembed): not written"
        )


def describe(writer: str, model: str) -> str:
    """Who made the store's embeddings, for ``drag doctor``."""
    if writer == REPLACING:
        return "being made again: a `drag reembed` runs, or one was cut short (run it again)"
    return f"made by {writer}, not by embedder.model {model!r}"


Progress = Callable[[str, int, int], None]


@contextlib.contextmanager
def alone(database: Path) -> Iterator[None]:
    """One :func:`reembed` at a time on ``database`` (a lock file beside it)."""
    lock = database.with_name(database.name + ".reembed-lock")
    try:
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot make the lock file {lock}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(
                "another drag reembed is making this store's embeddings again; let it end"
            ) from None
        yield  # the file stays: removed, a run could lock one another had just opened
    finally:
        os.close(fd)


def reembed(
    db: sqlite_utils.Database,
    sealer: Sealer,
    here: Space,
    embed: Embed,
    progress: Progress | None = None,
) -> int:
    """Every embedding the store keeps made again by ``embed``, a batch of
    :data:`BATCH` a transaction, each table read on until no row is left (rows another
    process adds meanwhile too), then ``here`` recorded.  While it runs the store records
    :data:`REPLACING`, which is no embedder's: no process compares a question with a
    half-made store or adds to it, and a run cut short is made again by the next.
    Returns how many.  One at a time: :func:`alone`."""
    with transaction(db):
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [KEY, REPLACING])
        count_up(db, GENERATION)
    done = 0
    for table, column in _CACHE:

        def made(rows: list[tuple[int, Any]]) -> list[tuple[int, bytes]]:
            vectors = embed([str(text) for _, text in rows])
            return [(row_id, pack(v)) for (row_id, _), v in zip(rows, vectors, strict=True)]

        done += batches(db, table, f"SELECT id, {column} FROM {table}", made, progress)
    for table, field_name in files.EMBEDDED:

        def sealed(
            rows: list[tuple[int, Any]], table: str = table, field_name: str = field_name
        ) -> list[tuple[int, bytes]]:
            texts = [files.embedding_source(sealer, table, body, field_name) for _, body in rows]
            vectors = embed(texts)
            return [
                (row_id, files.sealed_embedding(sealer, table, v))
                for (row_id, _), v in zip(rows, vectors, strict=True)
            ]

        select = f"SELECT id, body FROM {table}"
        done += batches(db, table, select, sealed, progress, after=files.bump)
    with transaction(db):
        record(db, here)
        count_up(db, GENERATION)
    return done


def batches(
    db: sqlite_utils.Database,
    table: str,
    select: str,
    made: Callable[[list[tuple[int, Any]]], list[tuple[int, bytes]]],
    progress: Progress | None,
    after: Callable[[sqlite_utils.Database], None] | None = None,
) -> int:
    """Each row of ``select`` (its id and what its embedding is made from), by id, a
    batch at a time until none is left: its embedding set to what ``made`` makes of it
    (``after`` runs in each batch's transaction).  Returns how many."""
    total = int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    last, done = 0, 0
    while True:
        rows = db.execute(f"{select} WHERE id > ? ORDER BY id LIMIT ?", [last, BATCH]).fetchall()
        if not rows:
            return done
        new = made([(int(r[0]), r[1]) for r in rows])
        with transaction(db):
            for row_id, blob in new:
                db.execute(f"UPDATE {table} SET embedding = ? WHERE id = ?", [blob, row_id])
            if after is not None:
                after(db)
        last, done = int(rows[-1][0]), done + len(rows)
        if progress is not None:
            progress(table, done, max(total, done))
