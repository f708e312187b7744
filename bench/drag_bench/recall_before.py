"""The cache's graph recall as it was before the one retriever (kept as a baseline).

``drag bench store`` sets it beside the product's recall on the same paraphrases.
Until then the cache had its own retrieval, VectorGraphRAG: the question's word
n-grams matched to cached entities by embedding (top 5 each, cosine >= 0.9);
entities that fit neither the question nor each other dropped (IBGraphRAG's
consistency (1-λ)·cos(e, q) + λ·mean cos(e, e') >= τ); the triples touching the
rest ranked by cosine with the question (> 0.1); cached statements searched by
cosine alone (>= 0.3).  Exact and near-duplicate hits are found as the product
finds them (:func:`assistant.drag.recall.same_question`).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import sqlite_utils
from numpy.typing import NDArray

from assistant.drag import recall
from assistant.drag.querywords import ngrams
from assistant.store import cache
from assistant.store.index import SpaceIndex, Table

Vector = NDArray[np.float32]
ENTITY_MATCH = 0.9
ENTITIES_PER_NGRAM = 5
EVIDENCE_FLOOR = 0.3
CONSISTENCY_LAMBDA = 0.5
CONSISTENCY_TAU = 0.15


def consistent(vectors: Vector, question: Vector) -> NDArray[np.bool_]:
    """IBGraphRAG: keep entity i when (1-λ)·cos(e_i, q) + λ·mean_j≠i cos(e_i, e_j) >= τ."""
    count = len(vectors)
    if count == 0:
        return np.zeros(0, dtype=bool)
    to_q = vectors @ question
    if count == 1:
        return np.asarray(to_q >= CONSISTENCY_TAU)
    pair = vectors @ vectors.T
    mean_other = (pair.sum(axis=1) - np.diag(pair)) / (count - 1)
    lam = CONSISTENCY_LAMBDA
    return np.asarray((1 - lam) * to_q + lam * mean_other >= CONSISTENCY_TAU)


# Held with the space's index, as the product holds its corpus (one per store).
_TABLES: weakref.WeakKeyDictionary[SpaceIndex, tuple[Table, Table]] = weakref.WeakKeyDictionary()


def tables(db: sqlite_utils.Database, index: SpaceIndex) -> tuple[Table, Table]:
    """The space's entities and statements as the old in-memory index held them (loaded
    once, then by the rows added)."""
    if index not in _TABLES:
        _TABLES[index] = (
            Table(
                "SELECT id, embedding FROM cache_entities WHERE space = ? AND id > ? ORDER BY id",
                "SELECT count(*) FROM cache_entities WHERE space = ?",
            ),
            Table(
                "SELECT v.id, v.embedding FROM cache_evidence v JOIN cache_entries e "
                "ON e.id = v.entry_id WHERE e.space = ? AND v.id > ? ORDER BY v.id",
                "SELECT count(*) FROM cache_evidence v JOIN cache_entries e "
                "ON e.id = v.entry_id WHERE e.space = ?",
            ),
        )
    for table in _TABLES[index]:
        table.refresh(db, index.space)
    return _TABLES[index]


def graph_recall(
    db: sqlite_utils.Database, index: SpaceIndex, question: str, q: Vector, embedder: Any, k: int
) -> recall.Recalled:
    entities, statements = tables(db, index)
    grams = ngrams(question)
    triples: list[cache.CachedTriple] = []
    triple_sims: list[float] = []
    names: list[str] = []
    if grams and len(entities.ids):
        matches = entities.nearest(embedder.embed(grams), ENTITIES_PER_NGRAM, ENTITY_MATCH)
        candidates = sorted({eid for found in matches for eid, _ in found})
        if candidates:
            rows = np.searchsorted(entities.ids, np.asarray(candidates, dtype=np.int64))
            keep = consistent(entities.matrix[rows], q)
            chosen = [c for c, ok in zip(candidates, keep, strict=True) if ok]
            triples, triple_sims = recall.ranked_triples(db, chosen, q, k)
            if chosen:
                marks = ",".join("?" for _ in chosen)
                names = [
                    r[0]
                    for r in db.execute(
                        f"SELECT name FROM cache_entities WHERE id IN ({marks})", chosen
                    ).fetchall()
                    if not recall.bound(r[0])
                ]
    # More than k nearest, so that statements bound to their question leave k others.
    found = statements.nearest(q[None, :], 4 * k, EVIDENCE_FLOOR)[0]
    sims_of = dict(found)
    evidence = [
        e for e in recall.evidence_by_id(db, [i for i, _ in found]) if not recall.bound(e.text)
    ][:k]
    if not triples and not evidence:
        return recall.Recalled("none", 0.0)
    score = recall.graph_score(triple_sims, [sims_of[e.id] for e in evidence])
    return recall.Recalled("graph", score, None, evidence, triples, entities=names)


def recall_before(
    db: sqlite_utils.Database,
    index: SpaceIndex,
    question: str,
    q_vec: Vector,
    embedder: Any,
    *,
    n: int,
    k: int,
    near_duplicate: float,
) -> recall.Recalled:
    """The cache's recall with the graph step it had before the one retriever."""
    q = np.asarray(q_vec, dtype=np.float32).ravel()
    found = recall.same_question(db, index, question, q, n=n, near_duplicate=near_duplicate)
    if found is not None:
        return found
    if index.empty:
        return recall.Recalled("none", 0.0)
    return graph_recall(db, index, question, q, embedder, k)
