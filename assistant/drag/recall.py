"""DRAG from the cache: find what earlier teacher answers already say about a question.

Three ways, tried in order (all on the sanitized question, within one space):

1. **exact** -- the same question was asked before (same teacher model and prompts);
2. **near-duplicate** -- a cached question with cosine >= ``store.near_duplicate``
   whose negations, contrast words and numbers are the same ("which is *not* …"
   vs "which is …" is not a duplicate, nor "2 moles" vs "3 moles");
3. **graph** -- VectorGraphRAG over the whole cached graph: the question's
   word n-grams (n = 1..3, stop-words removed) are matched to cached entities
   by embedding (top 5 each, cosine >= 0.9); entities that do not fit the
   question and each other are dropped (IBGraphRAG's consistency
   C(e) = (1-λ)·cos(e, q) + λ·mean cos(e, e') >= τ); the triples touching the
   rest are ranked by cosine with the question (> 0.1).  Cached evidence
   statements are searched directly by cosine as well.

A graph recall *covers* the question when the mean cosine of its best three
items reaches ``store.coverage``; exact and near-duplicate hits always do.

A placeholder means a value only within the question it was made for: ``<ORG_1>`` of a
cached question is another conversation's firm, and the current vault would put its own
``<ORG_1>`` in its place.  So a near-duplicate must hold the same placeholders in the
same order (the evidence then speaks of the same roles, as for an exact hit), and the
graph leaves out every cached statement, triple and entity that holds one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import sqlite_utils
from numpy.typing import NDArray

from assistant.drag.ranking import Embedder
from assistant.privacy.placeholders import ANY_PLACEHOLDER, PLACEHOLDER
from assistant.store import cache
from assistant.store.index import SpaceIndex

Vector = NDArray[np.float32]
How = Literal["exact", "near-duplicate", "graph", "none"]

ENTITY_MATCH = 0.9  # n-gram -> entity cosine (VectorGraphRAG)
ENTITIES_PER_NGRAM = 5
TRIPLE_FLOOR = 0.1  # triple -> question cosine (VectorGraphRAG)
EVIDENCE_FLOOR = 0.3
CONSISTENCY_LAMBDA = 0.5
CONSISTENCY_TAU = 0.15
MAX_CANDIDATE_TRIPLES = 2000


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


NEGATIONS = _wordset(
    """not no never none nor neither cannot without except unless false incorrect untrue
    impossible unlikely"""
)
CONTRASTS = _wordset(
    """most least more less fewer fewest greater greatest smaller smallest larger largest
    higher highest lower lowest best worst maximum minimum increase increases increased
    decrease decreases decreased before after above below first last true correct
    always only all"""
)
STOPWORDS = _wordset(
    """a an the of to in on at by for with from and or but if then than that this these those
    is are was were be been being do does did has have had it its which what who whom whose
    when where why how there their they them he she his her we you your i my our as into
    about over under can could would should may might will shall so such each any some
    question answer following options option"""
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold().replace("n't", " not"))


def markers(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The words and numbers that flip a question's meaning when they change."""
    words = [w for w in _words(text) if w in NEGATIONS or w in CONTRASTS]
    return tuple(sorted(words)), tuple(_NUMBER.findall(text))


def same_intent(a: str, b: str) -> bool:
    """False when one question negates, contrasts or changes a number of the other, or
    holds other placeholders (``<ORG_1>`` for ``<PERSON_1>``)."""
    return markers(a) == markers(b) and PLACEHOLDER.findall(a) == PLACEHOLDER.findall(b)


def bound(text: str) -> bool:
    """Whether cached text names a placeholder: a value of the question it came from."""
    return ANY_PLACEHOLDER.search(text) is not None


def ngrams(text: str, sizes: Sequence[int] = (1, 2, 3)) -> list[str]:
    """Word n-grams without stop-words (a stop-word breaks a phrase), in first-seen order."""
    runs: list[list[str]] = [[]]
    for w in _words(text):
        if w in STOPWORDS or len(w) < 2:
            runs.append([])
        else:
            runs[-1].append(w)
    seen: dict[str, None] = {}
    for run in runs:
        for n in sizes:
            for i in range(len(run) - n + 1):
                seen.setdefault(" ".join(run[i : i + n]), None)
    return list(seen)


def consistent(
    vectors: Vector,
    question: Vector,
    lam: float = CONSISTENCY_LAMBDA,
    tau: float = CONSISTENCY_TAU,
) -> NDArray[np.bool_]:
    """IBGraphRAG: keep entity i when (1-λ)·cos(e_i, q) + λ·mean_j≠i cos(e_i, e_j) >= τ."""
    count = len(vectors)
    if count == 0:
        return np.zeros(0, dtype=bool)
    to_q = vectors @ question
    if count == 1:
        return np.asarray(to_q >= tau)
    pair = vectors @ vectors.T
    mean_other = (pair.sum(axis=1) - np.diag(pair)) / (count - 1)
    return np.asarray((1 - lam) * to_q + lam * mean_other >= tau)


@dataclass
class Recalled:
    how: How
    score: float  # what decides coverage (cosine)
    entry: cache.Entry | None = None  # exact / near-duplicate
    evidence: list[cache.CachedEvidence] = field(default_factory=list)
    triples: list[cache.CachedTriple] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    matched_question: str = ""

    @property
    def uploads(self) -> tuple[int, ...]:
        return cache.uploads_of(self.evidence, self.triples)

    def covers(self, threshold: float) -> bool:
        return self.how in ("exact", "near-duplicate") or (
            self.how == "graph" and self.score >= threshold
        )


def _rows_of(ids: NDArray[np.int64], wanted: Sequence[int]) -> NDArray[np.intp]:
    return np.searchsorted(ids, np.asarray(wanted, dtype=np.int64))


def _triples_touching(
    db: sqlite_utils.Database, entity_ids: Sequence[int]
) -> tuple[list[cache.CachedTriple], Vector]:
    if not entity_ids:
        return [], np.zeros((0, 1), dtype=np.float32)
    marks = ",".join("?" for _ in entity_ids)
    rows = db.execute(
        f"SELECT id, embedding FROM cache_triples WHERE entity1_id IN ({marks}) "
        f"OR entity2_id IN ({marks}) ORDER BY id DESC LIMIT {MAX_CANDIDATE_TRIPLES}",
        [*entity_ids, *entity_ids],
    ).fetchall()
    if not rows:
        return [], np.zeros((0, 1), dtype=np.float32)
    by_id = {
        t.id: t
        for t in cache.triples_where(
            db, f"WHERE t.id IN ({','.join(str(int(r[0])) for r in rows)})", []
        )
    }
    kept = [r for r in rows if r[0] in by_id]
    matrix = cache.unpack_many([r[1] for r in kept], len(cache.unpack(kept[0][1])))
    return [by_id[r[0]] for r in kept], matrix


def _bound_triple(t: cache.CachedTriple) -> bool:
    return any(bound(part) for part in (t.entity1, t.entity2, t.relation, t.text))


def _entity_names(db: sqlite_utils.Database, ids: Sequence[int]) -> list[str]:
    if not ids:
        return []
    marks = ",".join("?" for _ in ids)
    query = f"SELECT name FROM cache_entities WHERE id IN ({marks})"
    return [r[0] for r in db.execute(query, list(ids)).fetchall()]


def _evidence_by_id(db: sqlite_utils.Database, ids: Sequence[int]) -> list[cache.CachedEvidence]:
    if not ids:
        return []
    marks = ",".join("?" for _ in ids)
    rows = db.execute(
        "SELECT id, entry_id, teacher_rank, text, upload_id FROM cache_evidence "
        f"WHERE id IN ({marks})",
        list(ids),
    ).fetchall()
    by_id = {r[0]: cache.CachedEvidence(*r) for r in rows}
    return [by_id[i] for i in ids if i in by_id]


def exact(db: sqlite_utils.Database, space: str, question: str, n: int) -> Recalled | None:
    """The cache entry of this very question in ``space``, if it holds ``n`` statements."""
    entry = cache.find(db, cache.key_of(space, question))
    if entry is None or entry.n < n:
        return None
    return Recalled("exact", 1.0, entry, list(entry.evidence), list(entry.triples))


def recall(
    db: sqlite_utils.Database,
    index: SpaceIndex,
    question: str,
    q_vec: Vector,
    embedder: Embedder,
    *,
    n: int,
    k: int,
    near_duplicate: float,
) -> Recalled:
    """What the cache holds for ``question`` (sanitized) in ``index``'s space."""
    found = exact(db, index.space, question, n)
    if found is not None:
        return found
    index.refresh(db)
    if index.empty:
        return Recalled("none", 0.0)
    q = np.asarray(q_vec, dtype=np.float32).ravel()
    for entry_id, sim in index.entries.nearest(q[None, :], 5, near_duplicate)[0]:
        entry = cache.load_entry(db, entry_id)
        if entry is not None and entry.n >= n and same_intent(entry.question, question):
            return Recalled(
                "near-duplicate",
                sim,
                entry,
                list(entry.evidence),
                list(entry.triples),
                matched_question=entry.question,
            )
    return _graph_recall(db, index, question, q, embedder, k)


def _graph_recall(
    db: sqlite_utils.Database,
    index: SpaceIndex,
    question: str,
    q: Vector,
    embedder: Embedder,
    k: int,
) -> Recalled:
    grams = ngrams(question)
    triples: list[cache.CachedTriple] = []
    triple_sims: list[float] = []
    names: list[str] = []
    if grams and len(index.entities.ids):
        matches = index.entities.nearest(embedder.embed(grams), ENTITIES_PER_NGRAM, ENTITY_MATCH)
        candidates = sorted({eid for found in matches for eid, _ in found})
        if candidates:
            vectors = index.entities.matrix[_rows_of(index.entities.ids, candidates)]
            keep = consistent(vectors, q)
            chosen = [c for c, ok in zip(candidates, keep, strict=True) if ok]
            found_triples, matrix = _triples_touching(db, chosen)
            if found_triples:
                sims = matrix @ q
                order = [
                    i
                    for i in np.argsort(-sims)
                    if sims[i] > TRIPLE_FLOOR and not _bound_triple(found_triples[i])
                ][:k]
                triples = [found_triples[i] for i in order]
                triple_sims = [float(sims[i]) for i in order]
            names = [name for name in _entity_names(db, chosen) if not bound(name)]
    # More than k nearest, so that statements bound to their question leave k others.
    found = index.evidence.nearest(q[None, :], 4 * k, EVIDENCE_FLOOR)[0]
    sims_of = dict(found)
    evidence = [e for e in _evidence_by_id(db, [eid for eid, _ in found]) if not bound(e.text)]
    evidence = evidence[:k]
    evidence_sims = [sims_of[e.id] for e in evidence]

    def top3(values: list[float]) -> float:
        return float(np.mean(sorted(values, reverse=True)[:3])) if values else 0.0

    score = max(top3(triple_sims), top3(evidence_sims))
    if not triples and not evidence:
        return Recalled("none", 0.0)
    return Recalled("graph", score, None, evidence, triples, entities=names)
