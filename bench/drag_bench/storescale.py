"""``drag bench store --scale``: graph recall over a large synthetic cache.

Fills a database with that many synthetic triples (unit vectors; entities = triples
/ 2; each triple drawn from one of its question's five statements), then times
loading the retriever's corpus and the graph recall per query, beside the recall
the cache had before the one retriever (:mod:`drag_bench.recall_before`), and the
time to take in one more cached question.  Embedding the question's n-grams is timed
separately on real questions with the real embedder, since random vectors stand in
for entity names here.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from assistant.drag import querywords, recall
from assistant.store import Store, cache
from drag_bench.mc import MCQuestion
from drag_bench.recall_before import recall_before
from drag_bench.recall_before import tables as before_tables
from drag_bench.stats import spread


def _unit_rows(rng: np.random.Generator, count: int, dim: int = 384) -> np.ndarray:
    m = rng.standard_normal((count, dim)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    return m


def fill_synthetic(store: Store, triples: int, space: str, seed: int = 0) -> None:
    """Bulk-load ``triples`` triples over triples/2 entities, 10 per cached question, and
    5 evidence statements per question.  A triple's vector is near its two entities'
    (as a real "A — B: relation" sentence is), the rest random unit vectors."""
    rng = np.random.default_rng(seed)
    entities = max(2, triples // 2)
    per_entry = 10
    conn = store.db.conn
    conn.execute("BEGIN")
    entity_vecs = _unit_rows(rng, entities)
    conn.executemany(
        "INSERT INTO cache_entities (id, space, key, name, embedding) VALUES (?, ?, ?, ?, ?)",
        ((i + 1, space, f"e{i}", f"entity {i}", cache.pack(v)) for i, v in enumerate(entity_vecs)),
    )
    batch = 50_000
    for start in range(0, triples, batch):
        count = min(batch, triples - start)
        entry_ids = list(range(start // per_entry + 1, (start + count - 1) // per_entry + 2))
        conn.executemany(
            "INSERT OR IGNORE INTO cache_entries (id, key, space, question, teacher_model, "
            "prompt_versions, n, created, embedding, has_graph) "
            "VALUES (?, ?, ?, ?, 'synthetic', '{}', 15, '', ?, 1)",
            (
                (e, f"k{e}", space, f"question {e}", cache.pack(v))
                for e, v in zip(entry_ids, _unit_rows(rng, len(entry_ids)), strict=True)
            ),
        )
        conn.executemany(
            "INSERT INTO cache_evidence (entry_id, teacher_rank, text, embedding) "
            "VALUES (?, ?, ?, ?)",
            (
                (entry_ids[i // 5], i % 5 + 1, f"statement {i}", cache.pack(v))
                for i, v in enumerate(_unit_rows(rng, len(entry_ids) * 5))
            ),
        )
        ends = rng.integers(0, entities, size=(count, 2))
        vecs = entity_vecs[ends[:, 0]] + entity_vecs[ends[:, 1]] + 0.5 * _unit_rows(rng, count)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        conn.executemany(
            "INSERT INTO cache_triples (entry_id, entity1_id, entity2_id, relation, text, "
            "sources, embedding) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                (
                    (start + i) // per_entry + 1,
                    int(a) + 1,
                    int(b) + 1,
                    "relates to",
                    f"entity {a} relates to entity {b}",
                    f"[{i % 5 + 1}]",  # drawn from one of its question's statements
                    cache.pack(v),
                )
                for i, (v, (a, b)) in enumerate(zip(vecs, ends, strict=True))
            ),
        )
    conn.execute("COMMIT")


class _Replay:
    """Gives back fixed vectors for n-grams: random entities have no names to embed."""

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = vectors

    def embed(self, texts: Any) -> Any:
        return self.vectors[: len(list(texts))]


def run_scale(sizes: list[int], out: Path, queries: int = 50) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        path = out / f"scale-{size}.db"
        for extra in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            extra.unlink(missing_ok=True)
        store = Store(path, key="file")
        space = "synthetic"
        started = time.perf_counter()
        fill_synthetic(store, size, space)
        fill_s = time.perf_counter() - started
        index = store.index(space)
        started = time.perf_counter()
        index.refresh(store.db)
        graph = recall.graph_of(store.db, index)
        load_s = time.perf_counter() - started
        started = time.perf_counter()
        before_tables(store.db, index)
        load_before_s = time.perf_counter() - started
        entity_vectors = graph.loaded.entity_vectors
        rng = np.random.default_rng(1)
        times: list[float] = []
        before: list[float] = []  # the recall the cache had before the one retriever
        found = []
        for _ in range(queries):
            # Five "n-grams" that each sit next to a cached entity, and a question vector.
            picks = rng.integers(0, len(entity_vectors), size=5)
            near = entity_vectors[picks] + 0.05 * _unit_rows(rng, 5)
            near /= np.linalg.norm(near, axis=1, keepdims=True)
            q = entity_vectors[picks].mean(axis=0)
            q /= np.linalg.norm(q)
            question = "alpha beta gamma delta epsilon"  # five 1-grams
            started = time.perf_counter()
            result = recall.recall(
                store.db, index, question, q, _Replay(near), n=15, k=15, near_duplicate=0.999
            )
            times.append(time.perf_counter() - started)
            found.append(len(result.triples))
            started = time.perf_counter()
            recall_before(
                store.db, index, question, q, _Replay(near), n=15, k=15, near_duplicate=0.999
            )
            before.append(time.perf_counter() - started)
        memory = (
            entity_vectors.nbytes + index.entries.matrix.nbytes + graph.loaded.chunk_vectors.nbytes
        )
        # One more cached question (5 statements, 10 triples): the held corpus grows by it.
        ends = [f"entity {int(i)}" for i in rng.integers(0, len(entity_vectors), size=20)]
        store.put_cache(
            cache.NewEntry(
                space=space,
                question="one more question",
                teacher_model="synthetic",
                prompt_versions={},
                n=15,
                embedding=_unit_rows(rng, 1)[0],
                evidence=[(f"new statement {i}", i + 1) for i in range(5)],
                evidence_embeddings=_unit_rows(rng, 5),
                triples=[
                    cache.NewTriple(ends[2 * i], ends[2 * i + 1], "relates to", "new", (i % 5 + 1,))
                    for i in range(10)
                ],
                triple_embeddings=_unit_rows(rng, 10),
                entity_embeddings={name: _unit_rows(rng, 1)[0] for name in ends},
                has_graph=True,
            )
        )
        started = time.perf_counter()
        grown = recall.graph_of(store.db, index)
        grow_s = time.perf_counter() - started
        if grown is not graph:
            raise RuntimeError("the held corpus was read again instead of grown")
        rows.append(
            {
                "triples": size,
                "entities": len(entity_vectors),
                "fill_s": round(fill_s, 2),
                "index_load_s": round(load_s, 3),
                "index_load_s_before": round(load_before_s, 3),
                "grow_s": round(grow_s, 3),
                "index_memory_mb": round(memory / 1e6, 1),
                "database_mb": round(path.stat().st_size / 1e6, 1),
                "query_ms": {k: round(v * 1000, 2) for k, v in spread(times).items()},
                "query_ms_before": {k: round(v * 1000, 2) for k, v in spread(before).items()},
                "triples_found_mean": statistics.fmean(found),
            }
        )
        store.close()
        path.unlink(missing_ok=True)
        print(f"scale {size:,}: {rows[-1]}", file=sys.stderr, flush=True)
    return rows


def ngram_embed_ms(questions: list[MCQuestion], count: int = 30) -> dict[str, float]:
    from assistant.models.embedder import OnnxEmbedder

    embedder = OnnxEmbedder()
    embedder.embed(["warm up"])
    times = []
    for q in questions[:count]:
        grams = querywords.ngrams(q.text())
        started = time.perf_counter()
        embedder.embed(grams)
        times.append((time.perf_counter() - started) * 1000)
    return {k: round(v, 2) for k, v in spread(times).items()}


def render_scale(rows: list[dict[str, Any]], embed_ms: dict[str, float]) -> str:
    lines = [
        "## Graph recall over the cached statements (synthetic vectors): the one retriever, "
        "and the recall the cache had before it, side by side",
        "",
        "| triples | entities | DB MB | load s | before: load s | one more question s "
        "| index MB | query p50 ms | p95 ms | before: p50 ms | before: p95 ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['triples']:,} | {r['entities']:,} | {r['database_mb']} | "
            f"{r['index_load_s']} | {r['index_load_s_before']} | {r['grow_s']} | "
            f"{r['index_memory_mb']} | "
            f"{r['query_ms']['p50']} | {r['query_ms']['p95']} | "
            f"{r['query_ms_before']['p50']} | {r['query_ms_before']['p95']} |"
        )
    lines += [
        "",
        f"Embedding a question's n-grams (real embedder, ARC questions): "
        f"p50 {embed_ms['p50']} ms, p95 {embed_ms['p95']} ms; add it to the query time.",
    ]
    return "\n".join(lines)
