"""DRAG ranking: cosine similarity to the question, fused with the teacher's order.

Reciprocal rank fusion (Cormack et al. 2009): each item scores
``sum_i w_i / (c + rank_i)`` over the similarity ranking and the teacher's
ranking, ``c = 60``.  Higher is better and the most similar item has
similarity rank 1 -- the reference implementation sorts similarity ascending,
which puts the *least* similar evidence first; this module does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

RRF_C = 60.0


class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Row i is the unit-length embedding of texts[i]."""
        ...


@dataclass(frozen=True)
class Ranked:
    index: int  # position in the input (the teacher's order)
    similarity: float  # cosine with the question
    similarity_rank: int  # 1 = most similar
    teacher_rank: int  # 1 = teacher's first
    score: float  # fused RRF score, higher is better


def cosine(query: NDArray[np.float32], matrix: NDArray[np.float32]) -> NDArray[np.float64]:
    q = np.asarray(query, dtype=np.float64).ravel()
    m = np.asarray(matrix, dtype=np.float64).reshape(-1, q.size)
    norms = np.linalg.norm(m, axis=1) * (np.linalg.norm(q) or 1.0)
    norms[norms == 0] = 1.0
    return np.asarray((m @ q) / norms, dtype=np.float64)


def ranks_descending(values: Sequence[float]) -> list[int]:
    """1-based ranks, highest value first; ties keep input order."""
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))
    ranks = [0] * len(values)
    for rank, i in enumerate(order, start=1):
        ranks[i] = rank
    return ranks


def rrf(
    rankings: Sequence[Sequence[int]], weights: Sequence[float] | None = None, c: float = RRF_C
) -> list[float]:
    """Fused score per item from several 1-based rankings of the same items."""
    if not rankings:
        return []
    size = len(rankings[0])
    if any(len(r) != size for r in rankings):
        raise ValueError("all rankings must rank the same items")
    w = list(weights) if weights is not None else [1.0] * len(rankings)
    return [sum(wi / (c + r[i]) for wi, r in zip(w, rankings, strict=True)) for i in range(size)]


def fuse(
    similarities: Sequence[float],
    teacher_ranks: Sequence[int],
    *,
    similarity_weight: float = 1.0,
    teacher_weight: float = 1.0,
) -> list[Ranked]:
    """Items ordered best first by fused score (ties: more similar first)."""
    sim_ranks = ranks_descending(similarities)
    scores = rrf([sim_ranks, list(teacher_ranks)], [similarity_weight, teacher_weight])
    items = [
        Ranked(
            index=i,
            similarity=float(similarities[i]),
            similarity_rank=sim_ranks[i],
            teacher_rank=int(teacher_ranks[i]),
            score=scores[i],
        )
        for i in range(len(similarities))
    ]
    return sorted(items, key=lambda r: (-r.score, r.similarity_rank))


def demote_repeats(
    ranked: Sequence[Ranked], vectors: NDArray[np.float32], threshold: float
) -> list[Ranked]:
    """The same items, a repeat moved behind all the others: an item whose cosine with
    an item already placed above it reaches ``threshold`` (the same statement with a
    word changed) would spend a place of the top K saying nothing new.  Repeats keep
    their order among themselves; ``threshold >= 1`` changes nothing."""
    if threshold >= 1.0 or len(ranked) < 2:
        return list(ranked)
    m = np.asarray(vectors, dtype=np.float64)
    m = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    kept: list[Ranked] = []
    repeats: list[Ranked] = []
    for item in ranked:
        above = [k.index for k in kept]
        if above and float(np.max(m[above] @ m[item.index])) >= threshold:
            repeats.append(item)
        else:
            kept.append(item)
    return kept + repeats


def rank_texts(
    question: str,
    texts: Sequence[str],
    embedder: Embedder,
    teacher_ranks: Sequence[int] | None = None,
    *,
    repeat_threshold: float = 1.0,
    vectors: NDArray[np.float32] | None = None,
) -> list[Ranked]:
    """Best first: similarity to the question fused with the teacher's order, then
    near-repeats moved behind the rest (:func:`demote_repeats`).  ``vectors``: the
    question's embedding and then each text's, where they are known already (a cache's
    statements: :func:`assistant.drag.recall.stored_vectors`); else they are embedded."""
    if not texts:
        return []
    if vectors is None or len(vectors) != len(texts) + 1:
        vectors = embedder.embed([question, *texts])
    sims = cosine(vectors[0], vectors[1:])
    ranks = list(teacher_ranks) if teacher_ranks is not None else list(range(1, len(texts) + 1))
    return demote_repeats(fuse([float(s) for s in sims], ranks), vectors[1:], repeat_threshold)
