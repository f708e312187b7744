"""Recall from the cache: the pure rules, then the real embedder on a real SQLite cache."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from drag_bench.recall_before import recall_before
from numpy.typing import NDArray

from assistant.base.textform import entity_key
from assistant.drag import graph, querywords, recall
from assistant.drag.graphsearch import GraphIndex
from assistant.drag.ranking import Embedder
from assistant.models.embedder import OnnxEmbedder
from assistant.store import Store, cache, cachecorpus
from assistant.store.index import DIM

NEAR = 0.92  # store.near_duplicate's default
Way = Callable[..., recall.Recalled]


def test_ngrams_drop_stopwords_and_break_phrases_at_them() -> None:
    grams = querywords.ngrams("Which gas do green plants absorb from the air?")
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


@pytest.fixture(scope="module")
def embedder() -> OnnxEmbedder:
    return OnnxEmbedder()


def remember(
    store: Store,
    space: str,
    embedder: Embedder,
    question: str,
    evidence: list[str],
    triples: list[tuple[str, str, str]],
    sources: list[tuple[int, ...]] | None = None,
    guard: Any = None,
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
                cache.NewTriple(a, b, r, t, drawn_from)
                for (a, b, r), t, drawn_from in zip(
                    triples, texts, sources or [()] * len(triples), strict=True
                )
            ],
            triple_embeddings=embedder.embed(texts) if texts else None,
            entity_embeddings=dict(zip(names, embedder.embed(names), strict=True)),
            graph_upload=2,
            has_graph=True,
        ),
        guard,
    )


def fresh(tmp_path: Path) -> tuple[Store, str]:
    """An empty store on a real SQLite file, and the cache space the tests fill."""
    return Store(tmp_path / "drag.db", key="file"), cache.space_of("m", {})


@pytest.fixture
def filled(tmp_path: Path, embedder: OnnxEmbedder) -> tuple[Store, str]:
    store, space = fresh(tmp_path)
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


def run(
    store: Store, space: str, embedder: OnnxEmbedder, question: str, way: Way = recall.recall
) -> recall.Recalled:
    q = embedder.embed([question])[0]
    return way(store.db, store.index(space), question, q, embedder, n=2, k=5, near_duplicate=NEAR)


# The product's recall, and the one the cache had before it (drag bench store's baseline):
# both must find what the graph holds and leave out what they must.
BOTH = pytest.mark.parametrize("way", [recall.recall, recall_before], ids=["product", "before"])


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


def test_without_recall_by_meaning_only_the_very_question_is_found(
    filled: tuple[Store, str], embedder: OnnxEmbedder
) -> None:
    """Another embedder made the cache's embeddings (assistant.store.space): nothing is
    found by comparing them with a question's, only its own entry by its text."""
    store, space = filled

    def blind(*args: Any, **kw: Any) -> recall.Recalled:
        return recall.recall(*args, **kw, by_meaning=False)

    assert run(store, space, embedder, "Which of these animals is a mammal?", blind).how == (
        "exact"
    )
    for question in (
        "Which one of these animals is a mammal?",  # a near-duplicate with recall by meaning
        "What does photosynthesis release into the air?",  # the graph's
    ):
        assert run(store, space, embedder, question).how != "none"
        found = run(store, space, embedder, question, blind)
        assert found.how == "none" and not found.evidence and not found.triples


def test_a_negated_question_is_not_served_as_a_duplicate(
    filled: tuple[Store, str], embedder: OnnxEmbedder
) -> None:
    store, space = filled
    negated = "Which of these animals is not a mammal?"
    vectors = embedder.embed([negated, "Which of these animals is a mammal?"])
    assert float(vectors[0] @ vectors[1]) >= NEAR  # close enough to be taken, but for the guard
    found = run(store, space, embedder, negated)
    assert found.how != "near-duplicate" and found.entry is None


@BOTH
def test_graph_recall_finds_triples_through_entities(
    filled: tuple[Store, str], embedder: OnnxEmbedder, way: Way
) -> None:
    store, space = filled
    found = run(store, space, embedder, "What does photosynthesis release into the air?", way)
    assert found.how == "graph"
    keys = {entity_key(e) for e in found.entities}
    assert "photosynthesis" in keys
    assert found.triples[0].relation == "photosynthesis releases oxygen"
    assert found.evidence and found.evidence[0].text == "Photosynthesis releases oxygen."
    assert 0.3 < found.score <= 1.0


@BOTH
def test_nothing_related_is_not_covered(
    filled: tuple[Store, str], embedder: OnnxEmbedder, way: Way
) -> None:
    store, space = filled
    found = run(store, space, embedder, "Who wrote the novel Pride and Prejudice?", way)
    assert not found.covers(0.55)
    assert not found.triples


@BOTH
def test_a_placeholder_of_another_question_is_never_recalled(
    tmp_path: Path, embedder: OnnxEmbedder, way: Way
) -> None:
    """<ORG_1> of a cached question is another conversation's firm: the current vault would
    put its own <ORG_1> there.  Only the same question, or a near-duplicate with the same
    placeholders, brings such statements back."""
    store, space = fresh(tmp_path)
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
    assert run(store, space, embedder, asked, way).how == "exact"
    other = "What does <PERSON_1> (a biotech company) make for detergents?"
    found = run(store, space, embedder, other, way)
    assert found.how == "graph" and found.entry is None
    texts = [e.text for e in found.evidence] + [t.text for t in found.triples]
    assert texts and "Enzymes in detergents break down protein stains." in texts
    assert not any("ORG_1" in t for t in texts + found.entities), texts


def test_the_cache_is_a_corpus_of_the_one_retriever(
    filled: tuple[Store, str], embedder: OnnxEmbedder
) -> None:
    """The files' retriever reads the cached statements, and takes in what the cache
    gains."""
    store, space = filled
    index = store.index(space).refresh(store.db)
    graph = recall.graph_of(store.db, index)
    assert isinstance(graph, GraphIndex)
    assert "Whales are mammals that live in the ocean." in graph.loaded.chunk_texts
    assert recall.graph_of(store.db, index) is graph
    remember(
        store,
        space,
        embedder,
        "Who discovered polonium?",
        ["Marie Curie discovered polonium in 1898.", "She named it after Poland."],
        [("marie curie", "polonium", "discovered"), ("polonium", "poland", "named after")],
        [(1,), (2,)],
    )
    again = recall.graph_of(store.db, index)
    assert again is graph and "She named it after Poland." in again.loaded.chunk_texts
    # A statement names the entities of the triples drawn from it (their sources).
    row = again.loaded.chunk_texts.index("She named it after Poland.")
    named = {again.loaded.entity_names[e] for c, e in again.loaded.mentions if c == row}
    assert named == {"polonium", "poland"}


def test_a_statement_only_the_graph_path_reaches_is_recalled(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """The statement on static brushes is too far from the question by cosine for vector
    search, but a triple drawn from it ties it to polonium, which the question names."""
    store, space = fresh(tmp_path)
    far = "Static brushes in paper mills hold a tiny amount of it."
    remember(
        store,
        space,
        embedder,
        "What is polonium?",
        ["Polonium is a rare radioactive element.", far],
        [("polonium", "radioactive element", "is a"), ("polonium", "static brushes", "used in")],
        [(1,), (2,)],
    )
    question = "How is polonium used in industry?"
    q, f = embedder.embed([question, far])
    assert float(q @ f) < recall.EVIDENCE_FLOOR  # vector search alone leaves it out
    found = run(store, space, embedder, question)
    assert found.how == "graph"
    assert far in [e.text for e in found.evidence]
    assert "polonium" in found.entities


def _same_index(grown: GraphIndex, whole: GraphIndex) -> None:
    a, b = grown.loaded, whole.loaded
    assert a.chunk_ids.tolist() == b.chunk_ids.tolist() and a.chunk_texts == b.chunk_texts
    assert a.entity_ids.tolist() == b.entity_ids.tolist() and a.entity_names == b.entity_names
    assert sorted(a.mentions) == sorted(b.mentions)
    assert a.chunk_vectors.tobytes() == b.chunk_vectors.tobytes()
    assert grown.idf.tolist() == whole.idf.tolist() and grown.by_key == whole.by_key
    assert {w: sorted(p) for w, p in grown.postings.items()} == {
        w: sorted(p) for w, p in whole.postings.items()
    }
    assert grown.lengths.tolist() == whole.lengths.tolist()


def test_the_cache_corpus_grows_by_what_was_added_and_is_read_again_after_a_removal(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """Held with its index, the cache's corpus takes in each new answer (a new triple may
    name an entity another answer brought) and is the same as one read whole; after a
    purge it is read again."""
    store, space = fresh(tmp_path)
    index = store.index(space)
    answers = [
        (
            "What is polonium?",
            ["Polonium is a rare radioactive element.", "Marie Curie found it."],
            [("polonium", "radioactive element", "is a"), ("marie curie", "polonium", "found")],
        ),
        (
            "Who was Marie Curie?",
            ["Marie Curie was a physicist.", "She won two Nobel prizes."],
            [("marie curie", "physicist", "was a"), ("marie curie", "nobel prizes", "won")],
        ),
        ("What is radium?", ["Radium glows in the dark."], [("radium", "glow", "does")]),
    ]
    graphs = []
    for question, statements, triples in answers:
        remember(
            store, space, embedder, question, statements, triples, [(1,), (2,)][: len(triples)]
        )
        graphs.append(recall.graph_of(store.db, index))
        whole = GraphIndex(cachecorpus.Reader(space, DIM).read_all(store.db))
        _same_index(graphs[-1], whole)
    assert graphs[0] is graphs[1] is graphs[2]  # grown in place, not built again
    # "marie curie" came with the first answer; the second answer's statements name it.
    row = graphs[2].loaded.entity_names.index("marie curie")
    assert {graphs[2].loaded.chunk_texts[c] for c in graphs[2].entity_chunks[row]} >= {
        "Marie Curie found it.",
        "Marie Curie was a physicist.",
        "She won two Nobel prizes.",
    }
    q = embedder.embed(["Who found polonium?"])[0]
    assert [h.chunk_id for h in graphs[2].search("Who found polonium?", q, embedder, 3)[0]] == [
        h.chunk_id for h in whole.search("Who found polonium?", q, embedder, 3)[0]
    ]
    assert cache.purge(store.db, "m") > 0
    after = recall.graph_of(store.db, index)
    assert after is not graphs[2] and after.empty


class Counted:
    """The real embedder, with each call's texts noted."""

    def __init__(self, embedder: OnnxEmbedder) -> None:
        self.embedder, self.calls = embedder, []  # type: list[list[str]]

    def __call__(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls.append(list(texts))
        return self.embedder.embed(texts)


def test_a_recalled_entry_is_ranked_from_the_embeddings_the_cache_keeps(
    filled: tuple[Store, str], embedder: OnnxEmbedder
) -> None:
    """Only the question is embedded: each statement's and triple's vector is the one
    stored with it (float16), and ranks them as the texts embedded again would."""
    from assistant.drag.ranking import rank_texts

    store, space = filled
    question = "Which of these animals is a mammal?"
    found = run(store, space, embedder, question)
    assert found.how == "exact" and found.entry is not None
    asked = embedder.embed([question])[0]
    evidence = list(found.evidence)
    cached = [t.text for t in found.triples]  # the triples' texts as they were cached
    embed = Counted(embedder)
    ev, tr = recall.stored_vectors(store.db, found, asked, evidence, cached, embed)
    assert ev is not None and tr is not None and embed.calls == []
    for kept, texts in ((ev, [e.text for e in evidence]), (tr, cached)):
        assert kept.shape == (len(texts) + 1, DIM)
        again = cache.unpack_many([cache.pack(v) for v in embedder.embed(texts)], DIM)
        assert np.array_equal(kept[1:], again) and np.array_equal(kept[0], asked)
        fresh = rank_texts(question, texts, embedder)
        assert [r.index for r in rank_texts(question, texts, embedder, vectors=kept)] == [
            r.index for r in fresh
        ]
    # A triple ranked under another text than the one cached (graph.Triple.text writes
    # "whales are mammals" where this cache keeps "whales — mammals: …"; another
    # spelling of an entity does the same): that one alone is embedded here.
    shown = [graph.Triple(t.entity1, t.entity2, t.relation).text for t in found.triples]
    assert shown[1] != cached[1]
    mixed = [cached[0], shown[1]]
    tr = recall.stored_vectors(store.db, found, asked, evidence, mixed, embed)[1]
    assert embed.calls == [[shown[1]]] and tr is not None
    assert np.array_equal(tr[2], embedder.embed([shown[1]])[0])
    assert np.array_equal(tr[1], cache.unpack(cache.pack(embedder.embed(cached)[0])))


def test_rows_replaced_since_they_were_read_or_another_embedder_are_embedded_again(
    filled: tuple[Store, str], embedder: OnnxEmbedder
) -> None:
    store, space = filled
    question = "Which gas do plants absorb during photosynthesis?"  # the newest entry
    found = run(store, space, embedder, question)
    assert found.how == "exact" and found.entry is not None
    asked = embedder.embed([question])[0]
    evidence, texts = list(found.evidence), [t.text for t in found.triples]
    embed = Counted(embedder)
    assert recall.stored_vectors(store.db, found, asked, evidence, texts, embed)[0] is not None
    assert embed.calls == []
    # Another embedder wrote the cache (a vector of the same size, another space).
    other = np.roll(asked, 7)
    refused = recall.stored_vectors(store.db, found, other, evidence, texts, embed)
    assert [v is None for v in refused] == [True, True]
    # The entry is replaced (another process asked it again): its rows' ids come back
    # with other texts, and what was read before is embedded again.
    remember(store, space, embedder, question, ["Leaves hold stomata.", "Light drives it."], [])
    now = cache.find(store.db, found.entry.key)
    assert now is not None and now.id == found.entry.id  # the same ids, reused
    assert [e.id for e in now.evidence] == [e.id for e in evidence]
    ev, _triples = recall.stored_vectors(store.db, found, asked, evidence, texts, embed)
    assert embed.calls == [[e.text for e in evidence], texts] and ev is not None
    assert np.array_equal(ev[1:], embedder.embed([e.text for e in evidence]))
    with pytest.raises(ValueError, match="keeps no embeddings"):
        cache.stored_vectors(store.db, "cache_entries", [now.id], ["x"])
