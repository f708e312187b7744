"""In-memory vector index over one cache space's questions (for near-duplicates).

The embeddings live in SQLite (float16); this keeps them as a float32 matrix
for exact cosine search by one matrix product (the vectors are unit length).
The statements and entities are the retriever's corpus instead
(:mod:`assistant.store.cachecorpus`); triple embeddings are not held in memory:
only the triples touching the entities on the retriever's paths are read back, by id.

:meth:`SpaceIndex.refresh` loads rows added since the last look (another
process may be writing) and reloads from scratch when rows were deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import sqlite_utils
from numpy.typing import NDArray

from assistant.store.cache import unpack_many

Vector = NDArray[np.float32]
DIM = 384


@dataclass
class Table:
    """ids and a matrix of one table's rows in the space."""

    sql: str  # SELECT id, embedding ... WHERE space = ? AND id > ? ORDER BY id
    count_sql: str
    ids: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    matrix: Vector = field(default_factory=lambda: np.zeros((0, DIM), dtype=np.float32))

    def refresh(self, db: sqlite_utils.Database, space: str) -> None:
        present = int(db.execute(self.count_sql, [space]).fetchone()[0])
        if present < len(self.ids):  # rows were deleted: start again
            self.ids = np.zeros(0, dtype=np.int64)
            self.matrix = np.zeros((0, self.matrix.shape[1]), dtype=np.float32)
        if present == len(self.ids):
            return
        after = int(self.ids[-1]) if len(self.ids) else 0
        rows = db.execute(self.sql, [space, after]).fetchall()
        if not rows:
            return
        new = unpack_many([r[1] for r in rows], DIM)
        if self.matrix.shape[1] != new.shape[1]:
            self.matrix = np.zeros((0, new.shape[1]), dtype=np.float32)
        self.ids = np.concatenate([self.ids, np.array([r[0] for r in rows], dtype=np.int64)])
        self.matrix = np.vstack([self.matrix, new]) if len(self.matrix) else new
        if present != len(self.ids):  # deleted and added at once: reload fully
            self.ids = np.zeros(0, dtype=np.int64)
            self.matrix = np.zeros((0, self.matrix.shape[1]), dtype=np.float32)
            self.refresh(db, space)

    def nearest(self, queries: Vector, k: int, floor: float) -> list[list[tuple[int, float]]]:
        """For each query row: up to k (id, cosine) with cosine >= floor, best first."""
        if not len(self.ids):
            return [[] for _ in range(len(queries))]
        sims = np.asarray(queries, dtype=np.float32) @ self.matrix.T
        out = []
        for row in sims:
            take = min(k, len(row))
            top = np.argpartition(-row, take - 1)[:take]
            top = top[np.argsort(-row[top])]
            out.append([(int(self.ids[i]), float(row[i])) for i in top if row[i] >= floor])
        return out


class SpaceIndex:
    def __init__(self, space: str) -> None:
        self.space = space
        self.entries = Table(
            "SELECT id, embedding FROM cache_entries WHERE space = ? AND id > ? ORDER BY id",
            "SELECT count(*) FROM cache_entries WHERE space = ?",
        )

    def refresh(self, db: sqlite_utils.Database) -> SpaceIndex:
        self.entries.refresh(db, self.space)
        return self

    @property
    def empty(self) -> bool:
        return not len(self.entries.ids)
