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

from typing import Any

import numpy as np
import sqlite_utils
from numpy.typing import NDArray

from assistant.drag import recall
from assistant.drag.querywords import ngrams
from assistant.store import cache, cachecorpus
from assistant.store.index import DIM, SpaceIndex

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


def _matrix(db: sqlite_utils.Database, sql: str, space: str) -> tuple[list[int], Vector]:
    rows = db.execute(sql, [space]).fetchall()
    return [int(r[0]) for r in rows], cache.unpack_many([r[1] for r in rows], DIM)


def _nearest(ids: list[int], matrix: Vector, queries: Vector, k: int, floor: float) -> Any:
    if not ids:
        return [[] for _ in range(len(queries))]
    sims = np.asarray(queries, dtype=np.float32) @ matrix.T
    out = []
    for row in sims:
        top = np.argsort(-row)[:k]
        out.append([(ids[i], float(row[i])) for i in top if row[i] >= floor])
    return out


_held: dict[tuple[str, cachecorpus.Mark], tuple[list[int], Vector, list[int], Vector]] = {}


def matrices(db: sqlite_utils.Database, space: str) -> tuple[list[int], Vector, list[int], Vector]:
    """Entity and statement matrices of ``space``, held until the cache changes (as the
    old in-memory index held them)."""
    key = (space, cachecorpus.mark(db, space))
    if key not in _held:
        _held.clear()
        _held[key] = (
            *_matrix(
                db, "SELECT id, embedding FROM cache_entities WHERE space = ? ORDER BY id", space
            ),
            *_matrix(
                db,
                "SELECT v.id, v.embedding FROM cache_evidence v JOIN cache_entries e "
                "ON e.id = v.entry_id WHERE e.space = ? ORDER BY v.id",
                space,
            ),
        )
    return _held[key]


def graph_recall(
    db: sqlite_utils.Database, space: str, question: str, q: Vector, embedder: Any, k: int
) -> recall.Recalled:
    entity_ids, entities, evidence_ids, evidence_matrix = matrices(db, space)
    grams = ngrams(question)
    triples: list[cache.CachedTriple] = []
    triple_sims: list[float] = []
    names: list[str] = []
    if grams and entity_ids:
        matches = _nearest(
            entity_ids, entities, embedder.embed(grams), ENTITIES_PER_NGRAM, ENTITY_MATCH
        )
        candidates = sorted({eid for found in matches for eid, _ in found})
        if candidates:
            rows = np.searchsorted(np.asarray(entity_ids), np.asarray(candidates))
            keep = consistent(entities[rows], q)
            chosen = [c for c, ok in zip(candidates, keep, strict=True) if ok]
            found_triples, matrix = recall.triples_touching(db, chosen)
            if found_triples:
                sims = matrix @ q
                order = [
                    i
                    for i in np.argsort(-sims)
                    if sims[i] > recall.TRIPLE_FLOOR and not recall.bound_triple(found_triples[i])
                ][:k]
                triples = [found_triples[i] for i in order]
                triple_sims = [float(sims[i]) for i in order]
            if chosen:
                marks = ",".join("?" for _ in chosen)
                names = [
                    r[0]
                    for r in db.execute(
                        f"SELECT name FROM cache_entities WHERE id IN ({marks})", chosen
                    ).fetchall()
                    if not recall.bound(r[0])
                ]
    found = _nearest(evidence_ids, evidence_matrix, q[None, :], 4 * k, EVIDENCE_FLOOR)[0]
    sims_of = dict(found)
    evidence = [
        e for e in recall.evidence_by_id(db, [i for i, _ in found]) if not recall.bound(e.text)
    ][:k]
    evidence_sims = [sims_of[e.id] for e in evidence]

    def top3(values: list[float]) -> float:
        return float(np.mean(sorted(values, reverse=True)[:3])) if values else 0.0

    if not triples and not evidence:
        return recall.Recalled("none", 0.0)
    score = max(top3(triple_sims), top3(evidence_sims))
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
    return graph_recall(db, index.space, question, q, embedder, k)
