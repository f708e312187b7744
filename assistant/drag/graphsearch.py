"""The one retriever: find the passages that answer a question, by MiniRAG's
query-guided graph path fused with keyword and plain vector search.

It reads a :class:`~assistant.store.corpus.Corpus` (chunk nodes, entity nodes,
chunk-entity edges; entity-entity edges are co-occurrence within a chunk) from
either source: the user's indexed files (:mod:`assistant.drag.filesindex`; the
entities typed by spaCy) or the teacher's cached evidence
(:mod:`assistant.store.cachecorpus`; the entities of its triples, untyped), which
is how the cache's offline recall finds statements (:mod:`assistant.drag.recall`).
For a question:

1. **Seeds**: the index's entities the question names -- by name (``Li Hua`` finds
   ``LiHua``; a first name finds the full name), by spaCy's entities of the question,
   and by embedding (a question n-gram within cosine :data:`ENTITY_MATCH` of a name).
   Each seed weighs its inverse chunk frequency: a name in every chat tells little.
2. **Answer type**: guessed from the question's words (who: a person; where: a place;
   when: a date; which shop/company: an organisation or place).
3. **Paths**: chunks holding seeds score by the seeds they hold (a chunk joining two of
   the question's entities scores more than their sum: :data:`JOIN_BONUS`); one hop
   further, the entities that co-occur most with the seeds (*bridges*, best
   :data:`BRIDGES`) lead to chunks that hold them, weighed down by :data:`HOP`, and up
   where the bridge or the chunk's entities are of the answer type.
4. **Fusion**: the graph's ranking, the keyword ranking (BM25) and the vector ranking
   (cosine of chunk and question) are fused by reciprocal rank (:data:`RRF_K`); the
   top K are the context, the chunks of a day the question names first (a question
   "on 20260405" or "on January 6th" asks about that day's chats).

``method="vector"`` is plain vector RAG over the same chunks (the benchmark's baseline).
:meth:`GraphIndex.search` also names the entities on the paths (the seeds and the
bridges), so that the cache can bring the triples between them.
Everything is linear in the index's size per question (one matrix product and one pass
over the seeds' mentions).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from assistant.base.textform import Date, dates_in, month_days
from assistant.drag.querywords import keywords, ngrams
from assistant.drag.ranking import Embedder
from assistant.privacy.entities import Named, common_word, lower_words, name_key
from assistant.store import corpus
from assistant.store.corpus import Corpus

Vector = NDArray[np.float32]
Method = Literal["minirag", "vector"]
METHODS: tuple[Method, ...] = ("minirag", "vector")

ENTITY_MATCH = 0.88
MAX_PROBES = 64  # names and n-grams of a question embedded to find its entities
FIRST_NAME = 0.6  # a seed found by one word of a longer person's name
JOIN_BONUS = 0.5
BRIDGES = 5
HOP = 0.5
TYPE_BOOST = 1.5
RRF_K = 3
DATE_WEIGHT = 10.0  # a chunk of the day the question names: above any name's paths


_ANSWER_TYPES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"(?i)^\s*(?:who|whom|whose)\b|\bwith whom\b"), ("person",)),
    (re.compile(r"(?i)^\s*where\b|\bwhich (?:city|country|place|town|park|street)\b"), ("place",)),
    (
        re.compile(r"(?i)^\s*when\b|\bwhat (?:time|date|day)\b|\bwhich (?:day|date|month)\b"),
        ("date",),
    ),
    (
        re.compile(r"(?i)\bwhich (?:company|shop|store|restaurant|cafe|bakery|team|club|brand)\b"),
        ("org", "place"),
    ),
)


def answer_types(question: str) -> tuple[str, ...]:
    for pattern, types in _ANSWER_TYPES:
        if pattern.search(question):
            return types
    return ()


@dataclass(frozen=True)
class Hit:
    row: int
    chunk_id: int
    text: str
    path: str
    time: str
    page: int
    score: float
    cosine: float
    graph: float  # the graph path's score (0: found by vector search alone)


class GraphIndex:
    """A corpus in memory: chunk and entity matrices, mentions both ways.

    Built from a whole corpus, then grown by :meth:`extend` (the cache adds what each
    teacher answer brought, instead of reading everything again)."""

    def __init__(self, loaded: Corpus) -> None:
        self.loaded = corpus.empty(loaded.chunk_vectors.shape[1])
        self.chunk_entities: list[list[int]] = []
        self.entity_chunks: list[list[int]] = []
        self.idf = np.zeros(0, dtype=np.float32)
        self.common: set[str] = set()
        self.by_key: dict[str, int] = {}
        self.by_word: dict[str, list[int]] = defaultdict(list)
        # Words -> (chunk row, count): the keyword ranking (BM25) fused with the others.
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.lengths = np.zeros(0, dtype=np.float32)
        self.mean_length = 0.0
        self.chunk_dates: dict[Date, list[int]] = defaultdict(list)
        self.extend(loaded)

    def extend(self, more: Corpus) -> None:
        """Add ``more``'s chunks and entities after those held.  Its mentions name rows
        of the whole index after the addition (a new chunk may name an entity held
        before, and a new triple may tie a chunk held before to an entity)."""
        first_chunk, first_entity = len(self.loaded.chunk_ids), len(self.loaded.entity_ids)
        self.loaded = corpus.joined(self.loaded, more)
        loaded = self.loaded
        n_chunks = len(loaded.chunk_ids)
        self.chunk_entities.extend([] for _ in more.chunk_ids)
        self.entity_chunks.extend([] for _ in more.entity_ids)
        for c, e in more.mentions:
            self.chunk_entities[c].append(e)
            self.entity_chunks[e].append(c)
        self.idf = np.array(
            [math.log(1 + n_chunks / max(1, len(cs))) for cs in self.entity_chunks],
            dtype=np.float32,
        )
        # A common word the recognizer took for a name ("Dinner") is not a seed.
        # Untyped entities (the teacher's triples: "oxygen", "photosynthesis") are
        # concepts, not names read by a recognizer, and keep their lower-case words.
        if any(more.entity_types):
            self.common |= lower_words(more.chunk_texts)
        for row in range(first_entity, len(loaded.entity_ids)):
            name = loaded.entity_names[row]
            if loaded.entity_types[row] and common_word(name, self.common):
                continue
            key = name_key(name)
            words = key.split()
            self.by_key.setdefault(key, row)
            if len(words) > 1 and loaded.entity_types[row] == "person":
                for word in words:
                    self.by_word[word].append(row)
        lengths = np.zeros(n_chunks - first_chunk, dtype=np.float32)
        for row in range(first_chunk, n_chunks):
            counts = Counter(keywords(loaded.chunk_texts[row]))
            lengths[row - first_chunk] = sum(counts.values())
            for word, times in counts.items():
                self.postings[word].append((row, times))
            for day in dates_in(loaded.chunk_where[row][1], compact=True):
                self.chunk_dates[day].append(row)
        self.lengths = np.concatenate([self.lengths, lengths])
        self.mean_length = float(self.lengths.mean()) if n_chunks else 0.0

    @property
    def empty(self) -> bool:
        return not len(self.loaded.chunk_ids)

    def _hit(self, row: int, score: float, cosine: float, graph: float) -> Hit:
        path, time, page = self.loaded.chunk_where[row]
        return Hit(
            row,
            int(self.loaded.chunk_ids[row]),
            self.loaded.chunk_texts[row],
            path,
            time,
            page,
            score,
            cosine,
            graph,
        )

    def seeds(
        self, question: str, embedder: Embedder, named: Sequence[Named] = ()
    ) -> dict[int, float]:
        """Entity rows the question names, with how surely (0..1]."""
        found: dict[int, float] = {}

        def take(row: int, weight: float) -> None:
            found[row] = max(found.get(row, 0.0), weight)

        grams = ngrams(question)
        spelled = [name_key(n.name) for n in named]
        for key in [*spelled, *map(name_key, grams), *map(name_key, question.split())]:
            if key in self.by_key:
                take(self.by_key[key], 1.0)
            if key in self.by_word:  # a first name: the people of that first name too
                rows = self.by_word[key]
                for row in rows:
                    take(row, FIRST_NAME / len(rows))
        probes = [g for g in dict.fromkeys([*spelled, *grams]) if g][:MAX_PROBES]
        if probes and self.by_key:
            names = np.array(sorted(set(self.by_key.values())), dtype=np.int64)
            sims = embedder.embed(probes) @ self.loaded.entity_vectors[names].T
            for line in sims:
                best = int(np.argmax(line))
                if line[best] >= ENTITY_MATCH:
                    take(int(names[best]), float(line[best]))
        return found

    def weight(self, word: str) -> float:
        """How rare ``word`` (a :func:`keywords` word) is among the chunks: BM25's
        inverse document frequency; a word no chunk holds weighs the most."""
        held = len(self.postings.get(word, ()))
        n = len(self.lengths)
        return math.log(1 + (n - held + 0.5) / (held + 0.5))

    def keyword_scores(self, question: str) -> dict[int, float]:
        """BM25 (k1 = 1.2, b = 0.75) of each chunk holding a word of the question."""
        scores: dict[int, float] = defaultdict(float)
        for word in set(keywords(question)):
            posting = self.postings.get(word)
            if not posting:
                continue
            idf = self.weight(word)
            for row, times in posting:
                norm = 1.2 * (0.25 + 0.75 * self.lengths[row] / self.mean_length)
                scores[row] += idf * times * 2.2 / (times + norm)
        return dict(scores)

    def dated(self, question: str) -> list[int]:
        """Chunk rows whose chat or e-mail day the question names (``on 20260405``,
        ``April 5, 2026``; ``on January 6th``: that day of any year)."""
        days = dates_in(question, compact=True)
        if yearless := month_days(question):
            days |= {d for d in self.chunk_dates if d[1:] in yearless}
        return sorted({row for day in days for row in self.chunk_dates.get(day, [])})

    def graph_scores(
        self, seeds: dict[int, float], types: Sequence[str]
    ) -> tuple[dict[int, float], list[int]]:
        """Chunk row -> the score of the best paths through it from the seeds; and the
        bridges (entity rows one hop from the seeds) those paths go through."""
        kinds = self.loaded.entity_types
        weight = {e: w * float(self.idf[e]) for e, w in seeds.items()}
        scores: dict[int, float] = defaultdict(float)
        held: dict[int, int] = defaultdict(int)
        bridges: dict[int, float] = defaultdict(float)
        for e, w in weight.items():
            for c in self.entity_chunks[e]:
                scores[c] += w
                held[c] += 1
                for other in self.chunk_entities[c]:
                    if other not in weight:
                        bridges[other] += w
        for c, count in held.items():
            if count > 1:
                scores[c] *= 1 + JOIN_BONUS * (count - 1)
        best = sorted(bridges, key=lambda b: -bridges[b] * float(self.idf[b]))[:BRIDGES]
        top = max((bridges[b] * float(self.idf[b]) for b in best), default=0.0)
        for b in best:
            strength = HOP * bridges[b] * float(self.idf[b]) / top if top else 0.0
            if kinds[b] in types:
                strength *= TYPE_BOOST
            for c in self.entity_chunks[b]:
                if c in held:
                    continue
                typed = any(kinds[e] in types for e in self.chunk_entities[c])
                scores[c] += strength * (TYPE_BOOST if typed else 1.0)
        return dict(scores), best

    def search(
        self,
        question: str,
        q_vec: Vector,
        embedder: Embedder,
        k: int,
        *,
        method: Method = "minirag",
        named: Sequence[Named] = (),
    ) -> tuple[list[Hit], list[int]]:
        """The best ``k`` chunks for ``question`` (its embedding ``q_vec``), best first, and
        the entity rows on the graph's paths (seeds, then bridges; none for "vector")."""
        if self.empty or k <= 0:
            return [], []
        cosines = self.loaded.chunk_vectors @ np.asarray(q_vec, dtype=np.float32).ravel()
        by_cosine = np.argsort(-cosines, kind="stable")
        if method == "vector":
            hits = [
                self._hit(int(r), float(cosines[r]), float(cosines[r]), 0.0) for r in by_cosine[:k]
            ]
            return hits, []
        seeds = self.seeds(question, embedder, named)
        graph, bridges = self.graph_scores(seeds, answer_types(question))
        on_day = self.dated(question)
        for row in on_day:
            graph[row] = graph.get(row, 0.0) + DATE_WEIGHT
        depth = max(4 * k, 50)  # the head of each ranking that the fusion reads
        keywords = self.keyword_scores(question)
        rankings = [[int(r) for r in by_cosine[:depth]]]
        for scores in (graph, keywords):
            rankings.append(sorted(scores, key=lambda c: (-scores[c], -cosines[c]))[:depth])
        fused: dict[int, float] = defaultdict(float)
        for ranked in rankings:
            for rank, row in enumerate(ranked):
                fused[row] += 1 / (RRF_K + rank + 1)
        # A question that names a day asks about that day's chats: they come first.
        first = set(on_day)
        order = sorted(fused, key=lambda c: (c not in first, -fused[c], -cosines[c]))[:k]
        hits = [self._hit(c, fused[c], float(cosines[c]), graph.get(c, 0.0)) for c in order]
        on_paths = sorted(seeds, key=lambda e: -seeds[e]) + [b for b in bridges if b not in seeds]
        return hits, on_paths
