"""DRAG from the cache: find what earlier teacher answers already say about a question.

Three ways, tried in order (all on the sanitized question, within one space):

1. **exact** -- the same question was asked before (same teacher model and prompts);
2. **near-duplicate** -- a cached question with cosine >= ``store.near_duplicate``
   whose negations, contrast words and numbers are the same ("which is *not* …"
   vs "which is …" is not a duplicate, nor "2 moles" vs "3 moles");
3. **graph** -- the one retriever that also reads the user's files
   (:mod:`assistant.drag.graphsearch`), over the cached statements as its corpus
   (:mod:`assistant.store.cachecorpus`): the question's entities among the cached
   graph's (by name and by embedding), the statements on the paths from them, fused
   with keyword and vector search; the cached triples touching the entities on those
   paths are ranked by cosine with the question (> 0.1).

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
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import sqlite_utils
from numpy.typing import NDArray

from assistant.drag.graphsearch import GraphIndex
from assistant.drag.querywords import CONTRASTS, NEGATIONS, words
from assistant.drag.ranking import Embedder, cosine
from assistant.privacy.placeholders import ANY_PLACEHOLDER, PLACEHOLDER
from assistant.store import cache, cachecorpus, space
from assistant.store.index import DIM, SpaceIndex

Vector = NDArray[np.float32]
How = Literal["exact", "near-duplicate", "graph", "none"]

TRIPLE_FLOOR = 0.1  # triple -> question cosine (VectorGraphRAG)
EVIDENCE_FLOOR = 0.3  # statement -> question cosine, for one no graph path reached
MAX_CANDIDATE_TRIPLES = 2000


_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


def markers(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The words and numbers that flip a question's meaning when they change."""
    flips = [w for w in words(text) if w in NEGATIONS or w in CONTRASTS]
    return tuple(sorted(flips)), tuple(_NUMBER.findall(text))


def same_intent(a: str, b: str) -> bool:
    """False when one question negates, contrasts or changes a number of the other, or
    holds other placeholders (``<ORG_1>`` for ``<PERSON_1>``)."""
    return markers(a) == markers(b) and PLACEHOLDER.findall(a) == PLACEHOLDER.findall(b)


def bound(text: str) -> bool:
    """Whether cached text names a placeholder: a value of the question it came from."""
    return ANY_PLACEHOLDER.search(text) is not None


@dataclass
class Recalled:
    how: How
    score: float  # what decides coverage (cosine)
    entry: cache.Entry | None = None  # exact / near-duplicate
    evidence: list[cache.CachedEvidence] = field(default_factory=list)
    triples: list[cache.CachedTriple] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    matched_question: str = ""
    # The question's embedding it was recalled by (recall()).
    asked: Vector | None = field(default=None, compare=False, repr=False)

    @property
    def uploads(self) -> tuple[int, ...]:
        return cache.uploads_of(self.evidence, self.triples)

    def covers(self, threshold: float) -> bool:
        return self.how in ("exact", "near-duplicate") or (
            self.how == "graph" and self.score >= threshold
        )


def triples_touching(
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


def bound_triple(t: cache.CachedTriple) -> bool:
    return any(bound(part) for part in (t.entity1, t.entity2, t.relation, t.text))


def evidence_by_id(db: sqlite_utils.Database, ids: Sequence[int]) -> list[cache.CachedEvidence]:
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


def stored_vectors(
    db: sqlite_utils.Database,
    found: Recalled,
    asked: Vector,
    evidence: Sequence[cache.CachedEvidence],
    triple_texts: Sequence[str],
    embed: Callable[[Sequence[str]], Vector],
    mine: bool = True,
) -> tuple[Vector | None, Vector | None]:
    """What to rank the recalled ``evidence`` and ``found.triples`` (as ranked:
    ``triple_texts``) with: ``asked`` (the question embedded now), then each text's
    embedding as the cache keeps it (:func:`cache.stored_vectors`); a text the cache
    does not keep as it is ranked is embedded here (``embed``), alone.  (None, None) for
    an exact repeat whose entry keeps another embedding of the same question (another
    embedder wrote the cache: everything is embedded again), and when not ``mine`` (the
    store records another embedder, or none while its embeddings are made again)."""
    if not mine:
        return None, None
    q = np.asarray(asked, dtype=np.float32).ravel()
    if found.how == "exact" and found.entry is not None:
        kept = cache.question_vector(db, found.entry.id)
        if kept is None or kept.shape != q.shape or float(cosine(q, kept)[0]) < space.SAME:
            return None, None

    def rows(table: str, ids: list[int], texts: Sequence[str]) -> Vector | None:
        if not texts:
            return None
        kept = cache.stored_vectors(db, table, ids, texts)
        missing = [i for i, v in enumerate(kept) if v is None or v.shape != q.shape]
        vectors = [q, *(np.zeros_like(q) if v is None else v for v in kept)]
        if missing:
            for i, v in zip(missing, embed([texts[i] for i in missing]), strict=True):
                vectors[i + 1] = np.asarray(v, dtype=np.float32)
        return np.vstack(vectors)

    ev = rows("cache_evidence", [e.id for e in evidence], [e.text for e in evidence])
    return ev, rows("cache_triples", [t.id for t in found.triples], triple_texts)


def exact(db: sqlite_utils.Database, space: str, question: str, n: int) -> Recalled | None:
    """The cache entry of this very question in ``space``, if it holds ``n`` statements."""
    entry = cache.find(db, cache.key_of(space, question))
    if entry is None or entry.n < n:
        return None
    return Recalled("exact", 1.0, entry, list(entry.evidence), list(entry.triples))


def statements_cached(db: sqlite_utils.Database, space: str, question: str) -> int | None:
    """How many statements the teacher was asked for in the cache entry of this very
    question (what an exact repeat needs: :func:`exact`); None: no entry."""
    entry = cache.find(db, cache.key_of(space, question))
    return None if entry is None else entry.n


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
    by_meaning: bool = True,
) -> Recalled:
    """What the cache holds for ``question`` (sanitized) in ``index``'s space; with
    ``by_meaning`` False (another embedder made the cache's embeddings) only the entry
    of this very question, found by its text."""
    q = np.asarray(q_vec, dtype=np.float32).ravel()
    if by_meaning:
        found = same_question(db, index, question, q, n=n, near_duplicate=near_duplicate)
    else:
        found = exact(db, index.space, question, n)
    if found is None and (not by_meaning or index.empty):
        found = Recalled("none", 0.0)
    elif found is None:
        found = _graph_recall(db, index, question, q, embedder, k)
    found.asked = q
    return found


def same_question(
    db: sqlite_utils.Database,
    index: SpaceIndex,
    question: str,
    q: Vector,
    *,
    n: int,
    near_duplicate: float,
) -> Recalled | None:
    """The cache entry of this question or of a near-duplicate of it (steps 1 and 2)."""
    found = exact(db, index.space, question, n)
    if found is not None:
        return found
    index.refresh(db)
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
    return None


_graphs: weakref.WeakKeyDictionary[SpaceIndex, tuple[cachecorpus.Reader, GraphIndex]] = (
    weakref.WeakKeyDictionary()
)


def _unbound(text: str) -> bool:
    return not bound(text)


def graph_of(db: sqlite_utils.Database, index: SpaceIndex) -> GraphIndex:
    """The cached statements of ``index``'s space as the retriever's corpus, held with
    the index: what the cache gained since is added, and after a removal it is read
    again."""
    held = _graphs.get(index)
    if held is None:
        reader = cachecorpus.Reader(index.space, DIM, keep=_unbound)
        graph = GraphIndex(reader.read_all(db))
        _graphs[index] = (reader, graph)
        return graph
    reader, graph = held
    change = reader.read(db)
    if change is not None:
        fresh, corpus = change
        if fresh:
            graph = GraphIndex(corpus)
            _graphs[index] = (reader, graph)
        else:
            graph.extend(corpus)
    return graph


def ranked_triples(
    db: sqlite_utils.Database, entity_ids: Sequence[int], q: Vector, k: int
) -> tuple[list[cache.CachedTriple], list[float]]:
    """The best ``k`` cached triples touching ``entity_ids`` by cosine with the question
    (above :data:`TRIPLE_FLOOR`), none that names a placeholder; and their cosines."""
    found, matrix = triples_touching(db, entity_ids)
    if not found:
        return [], []
    sims = matrix @ q
    order = [i for i in np.argsort(-sims) if sims[i] > TRIPLE_FLOOR and not bound_triple(found[i])][
        :k
    ]
    return [found[i] for i in order], [float(sims[i]) for i in order]


def graph_score(triple_sims: Sequence[float], evidence_sims: Sequence[float]) -> float:
    """What decides whether a graph recall covers the question: the mean cosine of the
    best three triples or of the best three statements, whichever is higher."""

    def top3(values: Sequence[float]) -> float:
        return float(np.mean(sorted(values, reverse=True)[:3])) if values else 0.0

    return max(top3(triple_sims), top3(evidence_sims))


def _graph_recall(
    db: sqlite_utils.Database,
    index: SpaceIndex,
    question: str,
    q: Vector,
    embedder: Embedder,
    k: int,
) -> Recalled:
    graph = graph_of(db, index)
    hits, on_paths = graph.search(question, q, embedder, k)
    hits = [h for h in hits if h.graph > 0 or h.cosine >= EVIDENCE_FLOOR]
    evidence = evidence_by_id(db, [h.chunk_id for h in hits])
    cosine_of = {h.chunk_id: h.cosine for h in hits}
    evidence_sims = [cosine_of[e.id] for e in evidence]
    triples, triple_sims = ranked_triples(
        db, [int(graph.loaded.entity_ids[e]) for e in on_paths], q, k
    )
    if not triples and not evidence:
        return Recalled("none", 0.0)
    names = [graph.loaded.entity_names[e] for e in on_paths]
    return Recalled(
        "graph", graph_score(triple_sims, evidence_sims), None, evidence, triples, entities=names
    )
