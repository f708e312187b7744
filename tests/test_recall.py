"""Recall from the cache: the pure rules, then the real embedder on a real SQLite cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from assistant.base.textform import entity_key
from assistant.drag import recall
from assistant.models.embedder import OnnxEmbedder
from assistant.store import Store, cache

NEAR = 0.92  # store.near_duplicate's default


def test_ngrams_drop_stopwords_and_break_phrases_at_them() -> None:
    grams = recall.ngrams("Which gas do green plants absorb from the air?")
    assert "green plants" in grams and "green plants absorb" in grams and "gas" in grams
    assert not any(w in grams for w in ("which", "the", "from"))
    assert "gas green" not in grams  # "do" breaks the phrase


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("Which of these is a mammal?", "Which one of these is a mammal?", True),
        ("Which of these is a mammal?", "Which of these is not a mammal?", False),
        ("Which of these isn't a mammal?", "Which of these is a mammal?", False),
        ("Which planet is largest?", "Which planet is smallest?", False),
        ("What is the mass of 2 moles of water?", "What is the mass of 3 moles of water?", False),
        ("All of the following are true EXCEPT", "All of the following are true", False),
        ("Where is <ORG_1> based?", "Where is <ORG_1> based ?", True),
        # another kind of value under the same number: another conversation's role
        ("Where is <ORG_1> based?", "Where is <PLACE_1> based?", False),
    ],
)
def test_same_intent(a: str, b: str, same: bool) -> None:
    assert recall.same_intent(a, b) is same


def test_consistency_drops_the_entity_unrelated_to_question_and_others() -> None:
    q = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    entities = np.array(
        [[0.9, 0.43, 0.0], [0.8, 0.6, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32
    )  # two on topic, one off
    assert recall.consistent(entities, q).tolist() == [True, True, False]
    assert recall.consistent(entities[2:], q).tolist() == [False]


@pytest.fixture(scope="module")
def embedder() -> OnnxEmbedder:
    return OnnxEmbedder()


def remember(
    store: Store,
    space: str,
    embedder: OnnxEmbedder,
    question: str,
    evidence: list[str],
    triples: list[tuple[str, str, str]],
) -> int:
    names = sorted({n for t in triples for n in t[:2]})
    texts = [f"{a} — {b}: {r}" for a, b, r in triples]
    return store.put_cache(
        cache.NewEntry(
            space=space,
            question=question,
            teacher_model="m",
            prompt_versions={},
            n=len(evidence),
            embedding=embedder.embed([question])[0],
            evidence=[(e, i) for i, e in enumerate(evidence, start=1)],
            evidence_embeddings=embedder.embed(evidence),
            evidence_upload=1,
            triples=[
                cache.NewTriple(a, b, r, t, ()) for (a, b, r), t in zip(triples, texts, strict=True)
            ],
            triple_embeddings=embedder.embed(texts) if texts else None,
            entity_embeddings=dict(zip(names, embedder.embed(names), strict=True)),
            graph_upload=2,
            has_graph=True,
        )
    )


@pytest.fixture
def filled(tmp_path: Path, embedder: OnnxEmbedder) -> tuple[Store, str]:
    store = Store(tmp_path / "drag.db", key="file")
    space = cache.space_of("m", {})
    remember(
        store,
        space,
        embedder,
        "Which of these animals is a mammal?",
        ["Mammals feed their young with milk.", "Whales are mammals that live in the ocean."],
        [("whales", "mammals", "whales are mammals"), ("mammals", "milk", "mammals make milk")],
    )
    remember(
        store,
        space,
        embedder,
        "Which gas do plants absorb during photosynthesis?",
        ["Plants take in carbon dioxide through stomata.", "Photosynthesis releases oxygen."],
        [
            ("plants", "carbon dioxide", "plants absorb carbon dioxide"),
            ("photosynthesis", "oxygen", "photosynthesis releases oxygen"),
        ],
    )
    return store, space


def run(store: Store, space: str, embedder: OnnxEmbedder, question: str) -> recall.Recalled:
    q = embedder.embed([question])[0]
    return recall.recall(
        store.db, store.index(space), question, q, embedder, n=2, k=5, near_duplicate=NEAR
    )


def test_exact_and_near_duplicate(filled: tuple[Store, str], embedder: OnnxEmbedder) -> None:
    store, space = filled
    exact = run(store, space, embedder, "Which of these animals is a mammal?")
    assert exact.how == "exact" and exact.covers(0.99)
    near = run(store, space, embedder, "Which of these animals is a mammal ?!")
    assert near.how in ("exact", "near-duplicate")
    para = run(store, space, embedder, "Which one of these animals is a mammal?")
    assert para.how == "near-duplicate" and para.score >= NEAR
    assert para.matched_question == "Which of these animals is a mammal?"
    assert para.uploads == (1, 2)


def test_a_negated_question_is_not_served_as_a_duplicate(
    filled: tuple[Store, str], embedder: OnnxEmbedder
) -> None:
    store, space = filled
    negated = "Which of these animals is not a mammal?"
    vectors = embedder.embed([negated, "Which of these animals is a mammal?"])
    assert float(vectors[0] @ vectors[1]) >= NEAR  # close enough to be taken, but for the guard
    found = run(store, space, embedder, negated)
    assert found.how != "near-duplicate" and found.entry is None


def test_graph_recall_finds_triples_through_entities(
    filled: tuple[Store, str], embedder: OnnxEmbedder
) -> None:
    store, space = filled
    found = run(store, space, embedder, "What does photosynthesis release into the air?")
    assert found.how == "graph"
    keys = {entity_key(e) for e in found.entities}
    assert "photosynthesis" in keys
    assert found.triples[0].relation == "photosynthesis releases oxygen"
    assert found.evidence and found.evidence[0].text == "Photosynthesis releases oxygen."
    assert 0.3 < found.score <= 1.0


def test_nothing_related_is_not_covered(filled: tuple[Store, str], embedder: OnnxEmbedder) -> None:
    store, space = filled
    found = run(store, space, embedder, "Who wrote the novel Pride and Prejudice?")
    assert not found.covers(0.55)
    assert not found.triples


def test_a_placeholder_of_another_question_is_never_recalled(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """<ORG_1> of a cached question is another conversation's firm: the current vault would
    put its own <ORG_1> there.  Only the same question, or a near-duplicate with the same
    placeholders, brings such statements back."""
    store = Store(tmp_path / "drag.db", key="file")
    space = cache.space_of("m", {})
    asked = "What does <ORG_1> (a biotech company) make for detergents?"
    remember(
        store,
        space,
        embedder,
        asked,
        [
            "<ORG_1> makes enzymes for laundry detergents.",
            "Enzymes in detergents break down protein stains.",
        ],
        [
            ("<ORG_1>", "enzymes", "<ORG_1> makes enzymes"),
            ("detergent enzymes", "protein stains", "detergent enzymes break down protein stains"),
        ],
    )
    assert run(store, space, embedder, asked).how == "exact"
    other = "What does <PERSON_1> (a biotech company) make for detergents?"
    found = run(store, space, embedder, other)
    assert found.how == "graph" and found.entry is None
    texts = [e.text for e in found.evidence] + [t.text for t in found.triples]
    assert texts and "Enzymes in detergents break down protein stains." in texts
    assert not any("ORG_1" in t for t in texts + found.entities), texts
