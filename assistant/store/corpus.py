"""A corpus as the retriever holds it: passages and named entities, and which passage
names which entity (MiniRAG's heterogeneous graph), opened in memory.

Two stores make one: the user's indexed files (:func:`assistant.store.files.load`:
chunks and the entities found in them) and the teacher's cached statements
(:class:`assistant.store.cachecorpus.Reader`: evidence and the entities of the
triples drawn from it).  One retriever (:mod:`assistant.drag.graphsearch`) reads either.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Vector = NDArray[np.float32]


@dataclass(frozen=True)
class Corpus:
    """Everything the retriever holds in memory, opened."""

    chunk_ids: NDArray[np.int64]
    chunk_texts: list[str]
    chunk_where: list[tuple[str, str, int]]  # (path, time, page); ("", "", 0) for the cache
    chunk_vectors: Vector
    entity_ids: NDArray[np.int64]
    entity_names: list[str]
    entity_types: list[str]  # "person", "org", "place", "date", …; "" when not typed
    entity_vectors: Vector
    mentions: list[tuple[int, int]]  # (chunk row, entity row)


def empty(dim: int) -> Corpus:
    none = np.zeros(0, dtype=np.int64)
    flat = np.zeros((0, dim), dtype=np.float32)
    return Corpus(none, [], [], flat, none.copy(), [], [], flat.copy(), [])


def joined(held: Corpus, more: Corpus) -> Corpus:
    """``held`` then ``more``; ``more.mentions`` already name rows of the whole."""

    def stack(a: Vector, b: Vector) -> Vector:
        return b if not len(a) else a if not len(b) else np.vstack([a, b])

    return Corpus(
        np.concatenate([held.chunk_ids, more.chunk_ids]),
        held.chunk_texts + more.chunk_texts,
        held.chunk_where + more.chunk_where,
        stack(held.chunk_vectors, more.chunk_vectors),
        np.concatenate([held.entity_ids, more.entity_ids]),
        held.entity_names + more.entity_names,
        held.entity_types + more.entity_types,
        stack(held.entity_vectors, more.entity_vectors),
        held.mentions + more.mentions,
    )
