"""The teacher's cached statements of one space as a corpus for the retriever.

Passages are the cached evidence statements; entities are the cached graph's
entities; a statement names an entity when a triple between that entity and
another was drawn from it (the triple's ``sources``, 1-based positions in its
teacher reply) or when a statement of the same reply spells the entity's name.
The caller says what to leave out (:mod:`assistant.drag.recall` leaves out what
holds a placeholder: ``<ORG_1>`` of a cached question is another conversation's firm).

:class:`Reader` reads the whole space once, then only the rows added since; when
rows were removed (a purge, a replaced entry) it reads the whole space again.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np
import sqlite_utils

from assistant.store.cache import unpack_many
from assistant.store.corpus import Corpus
from assistant.store.db import reading

Mark = tuple[int, ...]  # (rows, highest id) of the space's statements, entities, triples

_EVIDENCE = "FROM cache_evidence v JOIN cache_entries e ON e.id = v.entry_id WHERE e.space = ?"
_ENTITIES = "FROM cache_entities WHERE space = ?"
_TRIPLES = "FROM cache_triples t JOIN cache_entries e ON e.id = t.entry_id WHERE e.space = ?"
# Each table of a space, and the column of its ids: the mark and the rows added are
# counted the same way for all three.
_TABLES = ((_EVIDENCE, "v.id"), (_ENTITIES, "id"), (_TRIPLES, "t.id"))


def mark(db: sqlite_utils.Database, space: str) -> Mark:
    """Changes whenever a statement, entity or triple of ``space`` is added or removed."""
    out: list[int] = []
    for rows, id_ in _TABLES:
        sql = f"SELECT count(*), coalesce(max({id_}), 0) {rows}"
        out.extend(int(x) for x in db.execute(sql, [space]).fetchone())
    return tuple(out)


def _any(_text: str) -> bool:
    return True


class Reader:
    """The corpus of one space, read in full once and then by what was added."""

    def __init__(self, space: str, dim: int, keep: Callable[[str], bool] = _any) -> None:
        self.space, self.dim, self.keep = space, dim, keep
        self.mark: Mark | None = None
        self._start()

    def _start(self) -> None:
        self.chunk_at: dict[tuple[int, int], int] = {}  # (entry, teacher rank) -> chunk row
        self.chunks_of_entry: dict[int, list[int]] = defaultdict(list)
        self.texts: list[str] = []  # casefolded, for names spelt in a statement
        self.entity_row: dict[int, int] = {}
        self.names: list[str] = []  # casefolded

    def read_all(self, db: sqlite_utils.Database) -> Corpus:
        """The whole space, read anew."""
        with reading(db):
            self.mark = mark(db, self.space)
            self._start()
            return self._read_after(db, 0, 0, 0)

    def read(self, db: sqlite_utils.Database) -> tuple[bool, Corpus] | None:
        """None when nothing changed since the last read; else (whether to start again,
        the corpus to start from or to add: :meth:`GraphIndex.extend`'s form)."""
        with reading(db):
            before, now = self.mark, mark(db, self.space)
            if now == before:
                return None
            if before is None or not self._only_added(db, before, now):
                return True, self.read_all(db)
            corpus = self._read_after(db, *before[1::2])
        self.mark = now
        return False, corpus

    def _only_added(self, db: sqlite_utils.Database, before: Mark, now: Mark) -> bool:
        """Whether rows were only added since ``before`` (none removed or replaced)."""
        for i, (rows, id_) in enumerate(_TABLES):
            sql = f"SELECT count(*) {rows} AND {id_} > ?"
            added = int(db.execute(sql, [self.space, before[2 * i + 1]]).fetchone()[0])
            if before[2 * i] + added != now[2 * i]:
                return False
        return True

    def _read_after(
        self, db: sqlite_utils.Database, evidence_after: int, entity_after: int, triple_after: int
    ) -> Corpus:
        evidence = db.execute(
            f"SELECT v.id, v.entry_id, v.teacher_rank, v.text, v.embedding {_EVIDENCE} "
            "AND v.id > ? ORDER BY v.id",
            [self.space, evidence_after],
        ).fetchall()
        entities = db.execute(
            f"SELECT id, name, embedding {_ENTITIES} AND id > ? ORDER BY id",
            [self.space, entity_after],
        ).fetchall()
        triples = db.execute(
            f"SELECT t.entry_id, t.entity1_id, t.entity2_id, t.sources {_TRIPLES} AND t.id > ?",
            [self.space, triple_after],
        ).fetchall()
        evidence = [r for r in evidence if self.keep(r[3])]
        entities = [r for r in entities if self.keep(r[1])]
        for r in evidence:
            row = len(self.texts)
            self.chunk_at[(int(r[1]), int(r[2]))] = row
            self.chunks_of_entry[int(r[1])].append(row)
            self.texts.append(r[3].casefold())
        for r in entities:
            self.entity_row[int(r[0])] = len(self.names)
            self.names.append(r[1].casefold())
        return Corpus(
            np.array([r[0] for r in evidence], dtype=np.int64),
            [r[3] for r in evidence],
            [("", "", 0)] * len(evidence),
            unpack_many([r[4] for r in evidence], self.dim),
            np.array([r[0] for r in entities], dtype=np.int64),
            [r[1] for r in entities],
            [""] * len(entities),
            unpack_many([r[2] for r in entities], self.dim),
            self._mentions(triples),
        )

    def _mentions(self, triples: Sequence[tuple[int, int, int, str]]) -> list[tuple[int, int]]:
        found: set[tuple[int, int]] = set()
        for entry, first, second, sources in triples:
            ends = [self.entity_row[e] for e in (first, second) if e in self.entity_row]
            for rank in json.loads(sources or "[]"):
                chunk = self.chunk_at.get((int(entry), int(rank)))
                if chunk is not None:
                    found.update((chunk, e) for e in ends)
            for e in ends:  # a statement of the same reply that spells the name
                name = self.names[e]
                found.update(
                    (c, e) for c in self.chunks_of_entry[int(entry)] if name in self.texts[c]
                )
        return sorted(found)
