"""The cache of what the teacher returned: evidence, entities and triples with embeddings.

Everything here is in the form that was sent and received (placeholders in
place), so nothing personal is stored and a cached item is restored with the
vault of whichever conversation uses it.

Items live in a *space*: one teacher model and one set of prompt versions.
Switching either starts a new space, so stale items are never served.  An
entry's key is the sanitized question within its space.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sqlite_utils
from numpy.typing import NDArray

from assistant.base.textform import entity_key
from assistant.store.db import transaction
from assistant.store.ledger import now

Vector = NDArray[np.float32]


def pack(vector: Vector) -> bytes:
    """Stored embeddings are float16: half the bytes, cosine error ~1e-3."""
    return np.asarray(vector, dtype=np.float16).tobytes()


def unpack(blob: bytes) -> Vector:
    return np.frombuffer(blob, dtype=np.float16).astype(np.float32)


def unpack_many(blobs: Sequence[bytes], dim: int) -> Vector:
    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    joined = np.frombuffer(b"".join(blobs), dtype=np.float16)
    return joined.reshape(len(blobs), -1).astype(np.float32)


_WITH_VECTORS = ("cache_evidence", "cache_triples")


def stored_vectors(
    db: sqlite_utils.Database, table: str, ids: Sequence[int], texts: Sequence[str]
) -> list[Vector | None]:
    """The embedding ``table`` keeps for each of its rows ``ids`` (item i for ``ids[i]``),
    computed from the row's text when it was cached; None for a row that is gone or
    holds another text than ``texts[i]`` (replaced since it was read, or ranked under
    another spelling)."""
    if table not in _WITH_VECTORS:
        raise ValueError(f"{table} keeps no embeddings")
    if len(ids) != len(texts):
        raise ValueError("one text for each row")
    if not ids:
        return []
    marks = ",".join("?" for _ in ids)
    sql = f"SELECT id, text, embedding FROM {table} WHERE id IN ({marks})"
    rows = {r[0]: (r[1], r[2]) for r in db.execute(sql, list(ids))}
    kept = [rows.get(i) for i in ids]
    return [
        unpack(row[1]) if row is not None and row[0] == text else None
        for row, text in zip(kept, texts, strict=True)
    ]


def question_vector(db: sqlite_utils.Database, entry_id: int) -> Vector | None:
    """The embedding the cache keeps of entry ``entry_id``'s question."""
    row = db.execute("SELECT embedding FROM cache_entries WHERE id = ?", [entry_id]).fetchone()
    return None if row is None else unpack(row[0])


def space_of(teacher_model: str, prompt_versions: dict[str, str]) -> str:
    canonical = json.dumps([teacher_model, dict(sorted(prompt_versions.items()))])
    return hashlib.blake2b(canonical.encode("utf-8"), digest_size=12).hexdigest()


def key_of(space: str, question: str) -> str:
    normal = " ".join(question.split())
    return hashlib.blake2b(f"{space}\n{normal}".encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class CachedEvidence:
    id: int
    entry_id: int
    teacher_rank: int
    text: str
    upload_id: int | None


@dataclass(frozen=True)
class CachedTriple:
    id: int
    entry_id: int
    entity1: str
    entity2: str
    relation: str
    text: str
    sources: tuple[int, ...]
    upload_id: int | None  # the call that gave it its final form (the merge, if any)
    extract_upload_id: int | None = None  # the extraction a merge started from

    @property
    def upload_ids(self) -> tuple[int, ...]:
        return tuple(i for i in (self.upload_id, self.extract_upload_id) if i is not None)


def uploads_of(
    evidence: Iterable[CachedEvidence], triples: Iterable[CachedTriple]
) -> tuple[int, ...]:
    """Every upload that what was recalled came from, in ledger order."""
    ids = {e.upload_id for e in evidence if e.upload_id is not None}
    ids.update(i for t in triples for i in t.upload_ids)
    return tuple(sorted(ids))


@dataclass(frozen=True)
class Entry:
    id: int
    key: str
    question: str
    n: int
    has_graph: bool
    evidence: tuple[CachedEvidence, ...] = ()
    triples: tuple[CachedTriple, ...] = ()

    @property
    def uploads(self) -> tuple[int, ...]:
        return uploads_of(self.evidence, self.triples)


@dataclass(frozen=True)
class NewTriple:
    entity1: str
    entity2: str
    relation: str
    text: str
    sources: tuple[int, ...]


@dataclass
class NewEntry:
    """What one question brought from the teacher, ready to store."""

    space: str
    question: str
    teacher_model: str
    prompt_versions: dict[str, str]
    n: int
    embedding: Vector
    evidence: list[tuple[str, int]] = field(default_factory=list)  # (text, teacher_rank)
    evidence_embeddings: Vector | None = None
    evidence_upload: int | None = None
    triples: list[NewTriple] = field(default_factory=list)
    triple_embeddings: Vector | None = None
    entity_embeddings: dict[str, Vector] = field(default_factory=dict)  # name -> vector
    graph_upload: int | None = None  # the merge, or the extraction when nothing merged
    extract_upload: int | None = None  # the extraction, when a merge followed it
    has_graph: bool = False


def _evidence_of(db: sqlite_utils.Database, where: str, params: Any) -> list[CachedEvidence]:
    rows = db.execute(
        f"SELECT id, entry_id, teacher_rank, text, upload_id FROM cache_evidence {where}", params
    ).fetchall()
    return [CachedEvidence(*row) for row in rows]


_TRIPLE_SELECT = (
    "SELECT t.id, t.entry_id, a.name, b.name, t.relation, t.text, t.sources, t.upload_id, "
    "t.extract_upload_id "
    "FROM cache_triples t JOIN cache_entities a ON a.id = t.entity1_id "
    "JOIN cache_entities b ON b.id = t.entity2_id "
)


def triples_where(db: sqlite_utils.Database, where: str, params: Any) -> list[CachedTriple]:
    rows = db.execute(_TRIPLE_SELECT + where, params).fetchall()
    return [
        CachedTriple(r[0], r[1], r[2], r[3], r[4], r[5], tuple(json.loads(r[6])), r[7], r[8])
        for r in rows
    ]


def load_entry(db: sqlite_utils.Database, entry_id: int) -> Entry | None:
    row = db.execute(
        "SELECT id, key, question, n, has_graph FROM cache_entries WHERE id = ?", [entry_id]
    ).fetchone()
    if row is None:
        return None
    evidence = _evidence_of(db, "WHERE entry_id = ? ORDER BY teacher_rank", [entry_id])
    triples = triples_where(db, "WHERE t.entry_id = ? ORDER BY t.id", [entry_id])
    return Entry(row[0], row[1], row[2], row[3], bool(row[4]), tuple(evidence), tuple(triples))


def find(db: sqlite_utils.Database, key: str) -> Entry | None:
    row = db.execute("SELECT id FROM cache_entries WHERE key = ?", [key]).fetchone()
    return load_entry(db, row[0]) if row else None


def _entity_id(db: sqlite_utils.Database, space: str, name: str, vector: Vector) -> int:
    key = entity_key(name)
    row = db.execute(
        "SELECT id FROM cache_entities WHERE space = ? AND key = ?", [space, key]
    ).fetchone()
    if row:
        return int(row[0])
    cursor = db.execute(
        "INSERT INTO cache_entities (space, key, name, embedding) VALUES (?, ?, ?, ?)",
        [space, key, name, pack(vector)],
    )
    return int(cursor.lastrowid or 0)


def put(
    db: sqlite_utils.Database,
    new: NewEntry,
    guard: Callable[[sqlite_utils.Database], None] | None = None,
) -> int:
    """Store (or replace) the entry for this question and space; returns its id.
    ``guard`` runs first inside the transaction and stops the write by raising."""
    key = key_of(new.space, new.question)
    with transaction(db):
        if guard is not None:
            guard(db)
        old_entities = [
            r[0]
            for r in db.execute(
                "SELECT entity1_id FROM cache_triples t JOIN cache_entries e ON e.id = t.entry_id "
                "WHERE e.key = ? UNION SELECT entity2_id FROM cache_triples t "
                "JOIN cache_entries e ON e.id = t.entry_id WHERE e.key = ?",
                [key, key],
            ).fetchall()
        ]
        db.execute("DELETE FROM cache_entries WHERE key = ?", [key])
        cursor = db.execute(
            "INSERT INTO cache_entries (key, space, question, teacher_model, prompt_versions, n, "
            "created, embedding, has_graph) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                key,
                new.space,
                new.question,
                new.teacher_model,
                json.dumps(new.prompt_versions, sort_keys=True),
                new.n,
                now(),
                pack(new.embedding),
                int(new.has_graph),
            ],
        )
        entry_id = int(cursor.lastrowid or 0)
        ev = new.evidence_embeddings
        for i, (text, rank) in enumerate(new.evidence):
            assert ev is not None
            db.execute(
                "INSERT INTO cache_evidence (entry_id, teacher_rank, text, embedding, upload_id) "
                "VALUES (?, ?, ?, ?, ?)",
                [entry_id, rank, text, pack(ev[i]), new.evidence_upload],
            )
        te = new.triple_embeddings
        for i, t in enumerate(new.triples):
            assert te is not None
            e1 = _entity_id(db, new.space, t.entity1, new.entity_embeddings[t.entity1])
            e2 = _entity_id(db, new.space, t.entity2, new.entity_embeddings[t.entity2])
            db.execute(
                "INSERT INTO cache_triples (entry_id, entity1_id, entity2_id, relation, text, "
                "sources, embedding, upload_id, extract_upload_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    entry_id,
                    e1,
                    e2,
                    t.relation,
                    t.text,
                    json.dumps(list(t.sources)),
                    pack(te[i]),
                    new.graph_upload,
                    new.extract_upload,
                ],
            )
        _drop_orphans(db, old_entities)
    return entry_id


def stats(db: sqlite_utils.Database) -> dict[str, Any]:
    def count(table: str) -> int:
        return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    by_model = [
        {"teacher_model": r[0], "prompt_versions": json.loads(r[1]), "questions": r[2]}
        for r in db.execute(
            "SELECT teacher_model, prompt_versions, count(*) FROM cache_entries "
            "GROUP BY teacher_model, prompt_versions ORDER BY 3 DESC"
        ).fetchall()
    ]
    sizes = {
        table: int(
            db.execute(
                "SELECT coalesce(sum(length(embedding)), 0) + coalesce(sum(length(text)), 0) "
                f"FROM {table}"
            ).fetchone()[0]
        )
        for table in ("cache_evidence", "cache_triples")
    }
    questions = count("cache_entries")
    payload = sum(sizes.values())
    return {
        "questions": questions,
        "evidence": count("cache_evidence"),
        "entities": count("cache_entities"),
        "triples": count("cache_triples"),
        "payload_bytes": payload,
        "bytes_per_question": round(payload / questions) if questions else 0,
        "spaces": by_model,
    }


def purge(db: sqlite_utils.Database, teacher_model: str | None = None) -> int:
    """Delete cached items (of one teacher model, or all); returns questions removed."""
    with transaction(db):
        if teacher_model is None:
            cursor = db.execute("DELETE FROM cache_entries")
        else:
            cursor = db.execute(
                "DELETE FROM cache_entries WHERE teacher_model = ?", [teacher_model]
            )
        removed = int(cursor.rowcount)
        db.execute(
            "DELETE FROM cache_entities WHERE id NOT IN "
            "(SELECT entity1_id FROM cache_triples UNION SELECT entity2_id FROM cache_triples)"
        )
    return removed


def _drop_orphans(db: sqlite_utils.Database, entity_ids: Sequence[int]) -> None:
    """Delete those of ``entity_ids`` that no triple uses any more."""
    for entity_id in entity_ids:
        used = db.execute(
            "SELECT 1 FROM cache_triples WHERE entity1_id = ? OR entity2_id = ? LIMIT 1",
            [entity_id, entity_id],
        ).fetchone()
        if used is None:
            db.execute("DELETE FROM cache_entities WHERE id = ?", [entity_id])


def derived_from(db: sqlite_utils.Database, upload_id: int) -> list[dict[str, Any]]:
    """The cached questions whose evidence or triples came from one upload."""
    rows = db.execute(
        "SELECT e.id, e.question, "
        "(SELECT count(*) FROM cache_evidence v WHERE v.entry_id = e.id AND v.upload_id = ?), "
        "(SELECT count(*) FROM cache_triples t WHERE t.entry_id = e.id AND t.upload_id = ?) "
        "FROM cache_entries e WHERE e.id IN "
        "(SELECT entry_id FROM cache_evidence WHERE upload_id = ? "
        " UNION SELECT entry_id FROM cache_triples WHERE upload_id = ?) ORDER BY e.id",
        [upload_id] * 4,
    ).fetchall()
    return [{"entry_id": r[0], "question": r[1], "evidence": r[2], "triples": r[3]} for r in rows]
