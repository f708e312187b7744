"""Which embedder made the store's embeddings (assistant.store.space): the record, an
earlier store's sample, and making everything again.  Pure logic on a real SQLite store;
FakeEmbedder stands in for a model (its vectors come from a hash of the text and a
seed: two seeds are two embedders)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from assistant.base.errors import StoreError
from assistant.store import Store, cache, space
from assistant.store import files as stored_files
from tests.test_recall import remember


class FakeEmbedder:
    def __init__(self, seed: str, dim: int = 384) -> None:
        self.seed, self.dim = seed, dim
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls.append(list(texts))
        rows = []
        for text in texts:
            digest = hashlib.sha256(f"{self.seed}:{text}".encode()).digest()
            rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
            v = rng.standard_normal(self.dim).astype(np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.vstack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "drag.db", key="file")


def cache_one(
    store: Store, fake: FakeEmbedder, question: str = "Why is the sky blue?", guard: Any = None
) -> int:
    """One cached answer: 2 statements, 1 triple, 2 names (test_recall's helper)."""
    evidence = ["Air scatters blue light more.", "Sunlight holds every colour."]
    return remember(
        store, "s", fake, question, evidence, [("air", "blue light", "scatters")], guard=guard
    )


def index_one(store: Store, fake: FakeEmbedder, tmp_path: Path, guard: Any = None) -> None:
    text = "Hailey: the bread is ready on Friday."
    stored_files.replace(
        store.db,
        store.sealer,
        path=tmp_path / "chat.txt",
        content="c1",
        kind="text",
        size=len(text),
        mtime=0.0,
        chunks=[
            stored_files.NewChunk(
                text,
                "2026-01-01 10:00",
                0,
                fake.embed([text])[0],
                [stored_files.NewEntity("hailey", "Hailey", "PERSON", True)],
            )
        ],
        entity_vectors={"hailey": fake.embed(["Hailey"])[0]},
        guard=guard,
    )


def check(store: Store, fake: FakeEmbedder, *, keep: bool = True) -> str | None:
    return space.writer(
        store.db,
        space.Space.of(fake.seed, fake.embed),
        fake.embed,
        lambda: space.samples(store.db, store.sealer),
        keep=keep,
    )


def test_the_first_embedder_of_an_empty_store_is_recorded_and_another_is_named(
    store: Store,
) -> None:
    a, b = FakeEmbedder("model-a"), FakeEmbedder("model-b")
    assert space.recorded(store.db) is None
    assert check(store, a) is None
    kept = space.recorded(store.db)
    assert isinstance(kept, space.Space) and kept.model == "model-a"
    cache_one(store, a)
    assert check(store, a) is None
    assert check(store, b) == "model-a"
    assert isinstance(space.recorded(store.db), space.Space)  # b is not recorded
    assert check(store, FakeEmbedder("model-a", dim=8)) == "model-a"  # another size


def test_a_check_that_keeps_nothing_records_nothing(store: Store) -> None:
    """drag doctor's: opening the store for it changes nothing."""
    a = FakeEmbedder("model-a")
    cache_one(store, a)
    assert check(store, a, keep=False) is None
    assert space.recorded(store.db) is None
    assert check(store, FakeEmbedder("model-b"), keep=False) == space.UNKNOWN


def test_the_same_embedder_under_another_name_is_the_same(store: Store) -> None:
    a = FakeEmbedder("model-a")
    assert check(store, a) is None
    moved = space.Space.of("/elsewhere/model-a", a.embed)
    assert space.writer(store.db, moved, a.embed, list) is None


def test_an_earlier_store_is_judged_by_its_oldest_and_newest_rows(store: Store) -> None:
    """No record: the embedder that embeds the texts the store keeps as they are kept is
    recorded; another is not, whatever its name, nor one that made only the oldest rows
    (a store first written by one embedder, then mostly by another)."""
    a, b = FakeEmbedder("model-a"), FakeEmbedder("model-b")
    cache_one(store, a, "Why is the sky blue?")
    cache_one(store, a, "Why is the sea blue?")
    for n in range(5):
        cache_one(store, b, f"Question {n}?")
    assert check(store, a) == space.UNKNOWN
    assert check(store, FakeEmbedder("model-c")) == space.UNKNOWN
    assert space.recorded(store.db) is None


def test_an_earlier_store_of_one_embedder_is_recorded_as_its(store: Store) -> None:
    a = FakeEmbedder("model-a")
    cache_one(store, a)
    assert check(store, FakeEmbedder("model-b")) == space.UNKNOWN
    assert space.recorded(store.db) is None
    assert check(store, a) is None
    kept = space.recorded(store.db)
    assert isinstance(kept, space.Space) and kept.model == "model-a"


def test_an_earlier_store_of_files_alone_is_judged_by_its_sealed_rows(
    store: Store, tmp_path: Path
) -> None:
    a = FakeEmbedder("model-a")
    index_one(store, a, tmp_path)
    assert check(store, FakeEmbedder("model-b")) == space.UNKNOWN
    assert space.recorded(store.db) is None
    assert check(store, a) is None
    assert isinstance(space.recorded(store.db), space.Space)


def test_an_unreadable_record_is_no_embedder_s(store: Store) -> None:
    with store.db.conn:
        store.db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", [space.KEY, "{oops"])
    assert check(store, FakeEmbedder("model-a")) == space.UNKNOWN


def test_reembed_makes_every_embedding_again_and_records_the_new_embedder(
    store: Store, tmp_path: Path
) -> None:
    a, b = FakeEmbedder("model-a"), FakeEmbedder("model-b")
    cache_one(store, a)
    index_one(store, a, tmp_path)
    assert check(store, a) is None
    generation = stored_files.generation(store.db)
    seen: list[object] = []

    def progress(table: str, done: int, total: int) -> None:
        seen.append(space.recorded(store.db))  # while it runs: no embedder's
        if table == "cache_entries" and len(seen) == 1:  # another process adds, with a
            cache_one(store, a, "Added meanwhile?")

    done = space.reembed(
        store.db, store.sealer, space.Space.of("model-b", b.embed), b.embed, progress
    )
    # 2 questions (one added meanwhile), 4 statements, 2 triples, 2 names; 1 chunk, 1
    # name of the files.
    assert done == 12
    assert seen and all(s == space.REPLACING for s in seen)
    assert check(store, b) is None and check(store, a) == "model-b"
    assert stored_files.generation(store.db) > generation  # an index in memory reloads
    db = store.db
    for table, column in (
        ("cache_entries", "question"),
        ("cache_evidence", "text"),
        ("cache_triples", "text"),
        ("cache_entities", "name"),
    ):
        for text, blob in db.execute(f"SELECT {column}, embedding FROM {table}").fetchall():
            assert np.allclose(cache.unpack(blob), b.embed([text])[0], atol=2e-3), table
    loaded = stored_files.load(db, store.sealer, 384)
    assert np.allclose(loaded.chunk_vectors[0], b.embed([loaded.chunk_texts[0]])[0], atol=2e-3)
    assert np.allclose(loaded.entity_vectors[0], b.embed(["Hailey"])[0], atol=2e-3)


def test_a_reembed_cut_short_leaves_no_embedder_s_record(store: Store) -> None:
    a, b = FakeEmbedder("model-a"), FakeEmbedder("model-b")
    cache_one(store, a)
    assert check(store, a) is None

    def stop(table: str, done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        space.reembed(store.db, store.sealer, space.Space.of("model-b", b.embed), b.embed, stop)
    assert check(store, a) == space.REPLACING and check(store, b) == space.REPLACING
    said = space.advice(space.REPLACING, "model-b")
    assert said.startswith("the store's embeddings are being made again") and "run it again" in said
    assert space.reembed(store.db, store.sealer, space.Space.of("model-b", b.embed), b.embed) == 6
    assert check(store, b) is None


def test_one_reembed_at_a_time(store: Store) -> None:
    with space.alone(store.path), pytest.raises(StoreError) as refused, space.alone(store.path):
        pass
    assert "another drag reembed is making this store's embeddings again" in str(refused.value)
    with space.alone(store.path):  # let go when the first ended
        pass


def test_an_embedder_of_another_size_is_refused_where_it_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from assistant.base.config import load
    from assistant.base.errors import ConfigError
    from assistant.core import session

    def fake_load(name: str, **_kw: Any) -> FakeEmbedder:
        return FakeEmbedder(name, dim=768)

    monkeypatch.setattr(session, "load_embedder", fake_load)
    with session.Session(load()) as rt, pytest.raises(ConfigError) as refused:
        _ = rt.embedder
    assert "makes embeddings of 768 numbers; drag's store keeps 384" in str(refused.value)


def test_a_session_reads_the_cache_again_after_a_reembed_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from assistant.base.config import load
    from assistant.core import session

    def fake_load(name: str, **_kw: Any) -> FakeEmbedder:
        return FakeEmbedder(name)

    monkeypatch.setattr(session, "load_embedder", fake_load)
    with session.Session(load()) as first, session.Session(load()) as second:
        cache_one(first.store, first.embedder)
        assert first.embeddings_writer() is None
        held = first.store.index("s")
        assert first.embeddings_writer() is None and first.store.index("s") is held
        assert second.reembed() == 6
        assert first.embeddings_writer() is None  # the same embedder made them again
        assert first.store.index("s") is not held


def test_a_verdict_on_an_older_store_is_kept_until_the_store_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sampling an older store costs an embedding of its samples: done once, not at each
    question, and again when the store changes."""
    from assistant.base.config import load
    from assistant.core import session

    b = FakeEmbedder("model-b")
    monkeypatch.setattr(session, "load_embedder", lambda name, **_kw: b)
    with session.Session(load()) as rt:
        cache_one(rt.store, FakeEmbedder("model-a"))
        _ = rt.embedder
        b.calls.clear()
        assert rt.embeddings_writer() == space.UNKNOWN
        sampled = len(b.calls)
        assert sampled == 1
        assert rt.embeddings_writer() == space.UNKNOWN
        assert rt.cache_by_meaning_off() is not None
        assert len(b.calls) == sampled
        cache_one(rt.store, FakeEmbedder("model-a"), "Another question?")
        assert rt.embeddings_writer() == space.UNKNOWN
        assert len(b.calls) == sampled + 1


def test_a_write_begun_before_a_reembed_is_not_made(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The check, then seconds of embedding, then the write: a `drag reembed` that began
    in between is seen inside the write's own transaction, and nothing is written."""
    from assistant.base.config import load
    from assistant.core import session

    a = FakeEmbedder("model-a")
    monkeypatch.setattr(session, "load_embedder", lambda name, **_kw: a)
    with session.Session(load()) as rt:
        assert rt.embeddings_writer() is None
        guard = rt.embeddings_unchanged()
        cache_one(rt.store, a)  # no guard: written
        with rt.store.db.conn:  # another process begins a reembed
            rt.store.db.execute(
                "UPDATE meta SET value = ? WHERE key = ?", [space.REPLACING, space.KEY]
            )
        before = rt.store.db.execute("SELECT count(*) FROM cache_entries").fetchone()[0]
        with pytest.raises(StoreError, match="being made again meanwhile"):
            cache_one(rt.store, a, "Q?", guard)
        with pytest.raises(StoreError, match="being made again meanwhile"):
            index_one(rt.store, a, tmp_path, guard)
        assert rt.store.db.execute("SELECT count(*) FROM cache_entries").fetchone()[0] == before
        assert stored_files.count(rt.store.db) == 0


def test_a_store_that_holds_no_embedding_now_takes_the_embedder_in_use(store: Store) -> None:
    a, b = FakeEmbedder("model-a"), FakeEmbedder("model-b")
    cache_one(store, a)
    assert check(store, a) is None
    assert check(store, b) == "model-a"
    cache.purge(store.db, None)
    assert check(store, b, keep=False) == "model-a"  # drag doctor changes nothing
    assert check(store, b) is None
    kept = space.recorded(store.db)
    assert isinstance(kept, space.Space) and kept.model == "model-b"


def test_a_reembed_that_begins_as_a_record_is_made_is_named_so(store: Store) -> None:
    a = FakeEmbedder("model-a")

    def meanwhile() -> space.Sample:  # the sample is read, then a reembed begins
        with store.db.conn:
            store.db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?)", [space.KEY, space.REPLACING]
            )
        return []

    here = space.Space.of("model-a", a.embed)
    assert space.writer(store.db, here, a.embed, meanwhile) == space.REPLACING
    assert space.describe(space.REPLACING, "m").startswith("being made again")
