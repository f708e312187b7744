"""RRF and fused ranking (pure logic; FakeEmbedder stands in for the real one here)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from assistant.drag.ranking import RRF_C, cosine, fuse, rank_texts, ranks_descending, rrf


class FakeEmbedder:
    """Maps each known text to a fixed vector (unit tests only)."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        m = np.array([self.table[t] for t in texts], dtype=np.float32)
        return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_ranks_descending_most_similar_first() -> None:
    assert ranks_descending([0.1, 0.9, 0.5]) == [3, 1, 2]
    assert ranks_descending([0.5, 0.5]) == [1, 2]  # ties keep input order


def test_rrf_formula() -> None:
    scores = rrf([[1, 2], [2, 1]])
    assert scores[0] == pytest.approx(1 / (RRF_C + 1) + 1 / (RRF_C + 2))
    assert scores[0] == pytest.approx(scores[1])
    with pytest.raises(ValueError):
        rrf([[1, 2], [1]])


def test_fuse_breaks_teacher_ties_by_similarity() -> None:
    # Teacher order 1,2,3; similarity reversed.  Items 0 and 2 tie exactly
    # (1/61 + 1/63): the more similar one (2) wins the tie.  RRF is convex, so
    # both beat item 1, ranked second by both lists (2/62).
    ranked = fuse([0.1, 0.5, 0.9], [1, 2, 3])
    assert [r.index for r in ranked] == [2, 0, 1]
    assert ranked[0].score == pytest.approx(ranked[1].score)
    assert ranked[0].similarity_rank == 1


def test_similarity_alone_puts_most_similar_first() -> None:
    """Regression guard: the reference code sorts similarity ascending (least similar first)."""
    sims = [0.2, 0.95, -0.3, 0.6]
    ranked = fuse(sims, [1, 2, 3, 4], teacher_weight=0.0)
    assert [r.similarity for r in ranked] == sorted(sims, reverse=True)


def test_rank_texts_with_embeddings() -> None:
    fake = FakeEmbedder({"q": [1, 0], "near": [0.9, 0.1], "far": [0, 1], "mid": [0.5, 0.5]})
    ranked = rank_texts("q", ["far", "mid", "near"], fake)
    assert ranked[0].index == 2  # "near": most similar, even though the teacher put it last
    sims = {r.index: r.similarity for r in ranked}
    assert sims[2] > sims[1] > sims[0]
    assert rank_texts("q", [], fake) == []


def test_known_embeddings_are_used_and_nothing_is_embedded_again() -> None:
    table = {"q": [1, 0], "near": [0.9, 0.1], "far": [0, 1], "mid": [0.5, 0.5]}
    texts = ["far", "mid", "near"]
    fresh = rank_texts("q", texts, FakeEmbedder(table))
    known = FakeEmbedder(table).embed(["q", *texts])
    nothing = FakeEmbedder({})  # a text embedded here: KeyError
    assert rank_texts("q", texts, nothing, vectors=known) == fresh
    # Rows that are not the question's and each text's: all embedded here.
    assert rank_texts("q", texts, FakeEmbedder(table), vectors=known[1:]) == fresh
    with pytest.raises(KeyError):
        rank_texts("q", texts, nothing, vectors=known[1:])


def test_cosine() -> None:
    got = cosine(
        np.array([1.0, 0.0], dtype=np.float32), np.array([[2, 0], [0, 3], [0, 0]], dtype=np.float32)
    )
    assert got.tolist() == pytest.approx([1.0, 0.0, 0.0])


def test_a_near_repeat_moves_behind_the_others_and_nothing_is_lost() -> None:
    # "a2" says what "a" says (cosine 0.995); "b" and "c" say other things.
    fake = FakeEmbedder(
        {
            "q": [1, 0, 0],
            "a": [1, 0.1, 0],
            "a2": [1, 0.2, 0],
            "b": [0.7, 0.7, 0],
            "c": [0.5, 0, 0.8],
        }
    )
    texts = ["a", "a2", "b", "c"]
    plain = [r.index for r in rank_texts("q", texts, fake)]
    assert plain[:2] == [0, 1]  # without the rule the repeat takes the second place
    ranked = rank_texts("q", texts, fake, repeat_threshold=0.95)
    assert [r.index for r in ranked] == [0, 2, 3, 1]
    assert sorted(r.index for r in ranked) == [0, 1, 2, 3]
    # At 1.0 (the default: off) or with a looser notion of "the same", it differs as stated.
    assert [r.index for r in rank_texts("q", texts, fake, repeat_threshold=1.0)] == plain
    assert [r.index for r in rank_texts("q", texts, fake, repeat_threshold=0.5)][:1] == [0]
