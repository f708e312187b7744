"""DRAG stage 3: a knowledge graph of (entity, entity, relation) triples.

The teacher extracts the most important relation of each kept evidence
statement -- all statements in **one** call.  Relations of the same entity
pair are merged into one statement (paper App. H: "combine the provided
statements into one summarized statement") -- all pairs in **one** more call,
made only when some pair has several relations.  So the graph costs at most
two teacher calls, whatever its size.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from assistant.base.textform import entity_key
from assistant.drag.parsing import MAX_ITEMS, clean_item, in_time, parse_objects
from assistant.models.teacher import Teacher

PROMPT_VERSION = "graph-v1"

EXTRACT_SYSTEM = (
    "You are an assistant in charge of extracting entities and entity relationships from "
    "statements. For each statement provided, extract the most important relationship "
    "between two entities in the statement. The relationship is one short sentence that "
    "names both entities."
)
EXTRACT_USER = (
    "Statements:\n{statements}\n\n"
    'For the example statement "Sagittarius A* aligns with the dynamical center of the '
    'galaxy" the item is {{"statement": 1, "entity1": "Sagittarius A*", "entity2": "galaxy", '
    '"relationship": "Sagittarius A* aligns with the dynamical center of the galaxy"}}.\n'
    'Reply with JSON only: {{"triples": [one item per statement]}}'
)

MERGE_SYSTEM = (
    "You are an assistant in charge of combining the provided statements into one "
    "summarized statement. Be concise without losing any of the information."
)
MERGE_USER = (
    "Each group below holds statements about the same two entities. For every group, "
    "combine its statements into one summarized statement.\n"
    "Groups:\n{groups}\n\n"
    'Reply with JSON only: {{"summaries": [{{"id": 1, "summary": "..."}}, ...]}}'
)

_ALIASES = {
    "entity1": ("entity1", "entity_1", "entity 1", "head", "subject", "source", "e1"),
    "entity2": ("entity2", "entity_2", "entity 2", "tail", "object", "target", "e2"),
    "relationship": ("relationship", "relation", "predicate", "rel", "statement_text"),
}
# The reference's text blocks ("Entity 1: … Entity 2: … Relationship: … $$$") and tuple
# lines ("(a, b, relation)") are read by finding their labels once and cutting the text
# between them: linear in the reply, where one lazy pattern over the blocks was not.
_LABEL = re.compile(r"Entity\s*([12])\s*:|Relation(?:ship)?\s*:|\$\$\$", re.IGNORECASE)


def _text_blocks(text: str) -> Iterator[tuple[str, str, str]]:
    """(entity 1, entity 2, relation) of each complete ``Entity 1: Entity 2: Relation:``
    block, in order; a relation runs to ``$$$``, the next ``Entity 1:`` or the end."""
    labels = [
        (m.group(1) or m.group(0)[0].upper(), m.start(), m.end()) for m in _LABEL.finditer(text)
    ]
    labels.append(("$", len(text), len(text)))
    # Where each label's relation would end: the next "Entity 1:" or "$$$" (one pass back).
    ends = [len(text)] * len(labels)
    for i in range(len(labels) - 2, -1, -1):
        kind, start, _ = labels[i + 1]
        ends[i] = start if kind in ("1", "$") else ends[i + 1]
    for i in range(len(labels) - 3):
        (a, _, a_end), (b, b_start, b_end), (r, r_start, r_end) = labels[i : i + 3]
        if (a, b, r) == ("1", "2", "R"):
            yield text[a_end:b_start], text[b_end:r_start], text[r_end : ends[i + 2]]


_TUPLE_LINE = re.compile(r"^[ \t]*(?:\d+[.)][ \t]*)?\(([^\n]*)\)[ \t\r]*$", re.M)


def _tuple_lines(text: str) -> Iterator[tuple[str, str, str]]:
    """(a, b, relation) of each line that is a tuple ``(a, b, relation)``, numbered or not."""
    for m in _TUPLE_LINE.finditer(text):
        parts = m.group(1).split(",", 2)
        if len(parts) == 3 and not any(ch in "()" for ch in parts[0] + parts[1]):
            yield parts[0], parts[1], parts[2]


@dataclass(frozen=True)
class Triple:
    entity1: str
    entity2: str
    relation: str
    sources: tuple[int, ...] = ()  # 1-based positions of the evidence it came from

    @property
    def text(self) -> str:
        """The statement ranked and shown to the student."""
        rel = self.relation
        if self.entity1.casefold() in rel.casefold() or self.entity2.casefold() in rel.casefold():
            return rel
        return f"{self.entity1} — {self.entity2}: {rel}"


def extract_schema(count: int) -> dict[str, Any]:
    item = {
        "type": "object",
        "properties": {
            "statement": {"type": "integer"},
            "entity1": {"type": "string", "minLength": 1},
            "entity2": {"type": "string", "minLength": 1},
            "relationship": {"type": "string", "minLength": 3},
        },
        "required": ["statement", "entity1", "entity2", "relationship"],
    }
    return {
        "type": "object",
        "properties": {
            "triples": {"type": "array", "items": item, "minItems": 1, "maxItems": count}
        },
        "required": ["triples"],
    }


def merge_schema(count: int) -> dict[str, Any]:
    item = {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "summary": {"type": "string", "minLength": 3}},
        "required": ["id", "summary"],
    }
    return {
        "type": "object",
        "properties": {
            "summaries": {"type": "array", "items": item, "minItems": count, "maxItems": count}
        },
        "required": ["summaries"],
    }


def _field(obj: dict[str, Any], name: str) -> str:
    lowered = {str(k).casefold(): v for k, v in obj.items()}
    for alias in _ALIASES[name]:
        value = lowered.get(alias)
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            return clean_item(str(value))
    return ""


def _source(obj: dict[str, Any], count: int) -> tuple[int, ...]:
    value = obj.get("statement", obj.get("id"))
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= count:
        return (value,)
    return ()


def parse_triples(text: str, count: int = 10_000, deadline: float | None = None) -> list[Triple]:
    """Triples in a teacher reply: JSON, the reference's ``Entity 1:`` blocks, or tuples
    (at most :data:`~assistant.drag.parsing.MAX_ITEMS`); past ``deadline`` it raises."""
    triples: list[Triple] = []
    keys = ("triples", "relationships", "relations")
    objects = parse_objects(text, list_keys=keys, deadline=deadline)
    for obj in islice(objects, MAX_ITEMS):
        e1, e2, rel = _field(obj, "entity1"), _field(obj, "entity2"), _field(obj, "relationship")
        if e1 and e2 and rel:
            triples.append(Triple(e1, e2, rel, _source(obj, count)))
    for reader in (_text_blocks, _tuple_lines):
        if triples or not isinstance(text, str):
            break
        in_time(deadline, text)
        for parts in islice(reader(text), MAX_ITEMS):
            e1, e2, rel = (clean_item(part) for part in parts)
            if e1 and e2 and rel:
                triples.append(Triple(e1, e2, rel))
    in_time(deadline, text)
    return triples


def pair_key(t: Triple) -> tuple[str, str]:
    a, b = entity_key(t.entity1), entity_key(t.entity2)
    return (a, b) if a <= b else (b, a)


@dataclass(frozen=True)
class Group:
    """All triples of one unordered entity pair."""

    triples: tuple[Triple, ...]

    @property
    def relations(self) -> list[str]:
        seen: dict[str, str] = {}
        for t in self.triples:
            seen.setdefault(" ".join(t.relation.casefold().split()), t.relation)
        return list(seen.values())

    def merged(self, summary: str | None = None) -> Triple:
        first = self.triples[0]
        relations = self.relations
        relation = summary if summary and len(relations) > 1 else "; ".join(relations)
        sources = tuple(sorted({s for t in self.triples for s in t.sources}))
        return Triple(first.entity1, first.entity2, relation, sources)


def group_by_pair(triples: Sequence[Triple]) -> list[Group]:
    """Groups in order of each pair's first appearance (i.e. evidence order)."""
    groups: dict[tuple[str, str], list[Triple]] = {}
    for t in triples:
        if entity_key(t.entity1) and entity_key(t.entity2):
            groups.setdefault(pair_key(t), []).append(t)
    return [Group(tuple(ts)) for ts in groups.values()]


def parse_summaries(text: str, count: int, deadline: float | None = None) -> dict[int, str]:
    out: dict[int, str] = {}
    for obj in parse_objects(text, list_keys=("summaries",), deadline=deadline):
        gid, summary = obj.get("id"), obj.get("summary")
        if isinstance(gid, int) and 1 <= gid <= count and isinstance(summary, str):
            cleaned = clean_item(summary)
            if cleaned:
                out.setdefault(gid, cleaned)
    return out


def extract(teacher: Teacher, evidences: Sequence[str]) -> list[Triple]:
    """One teacher call for all statements."""
    if not evidences:
        return []
    numbered = "\n".join(f"{i}. {e}" for i, e in enumerate(evidences, start=1))
    request = teacher.request(
        "triples",
        EXTRACT_SYSTEM,
        EXTRACT_USER.format(statements=numbered),
        extract_schema(2 * len(evidences)),
        templates=(EXTRACT_USER,),
        public=tuple(evidences),  # the statements are the teacher's own words
        prompt_version=PROMPT_VERSION,
    )
    reply = teacher.complete(request)
    return parse_triples(reply.text, len(evidences), reply.deadline)


def merge(teacher: Teacher, triples: Sequence[Triple]) -> list[Triple]:
    """One merged triple per entity pair; at most one teacher call for all pairs."""
    groups = group_by_pair(triples)
    multi = [i for i, g in enumerate(groups) if len(g.relations) > 1]
    summaries: dict[int, str] = {}  # position in groups -> teacher's summary
    if multi:
        listing = json.dumps(
            [{"id": n, "statements": groups[i].relations} for n, i in enumerate(multi, start=1)],
            ensure_ascii=False,
            indent=1,
        )
        request = teacher.request(
            "merge",
            MERGE_SYSTEM,
            MERGE_USER.format(groups=listing),
            merge_schema(len(multi)),
            templates=(MERGE_USER,),
            public=tuple(t for i in multi for t in groups[i].relations),
            prompt_version=PROMPT_VERSION,
        )
        reply = teacher.complete(request)
        by_id = parse_summaries(reply.text, len(multi), reply.deadline)
        summaries = {i: by_id[n] for n, i in enumerate(multi, start=1) if n in by_id}
    return [g.merged(summaries.get(i)) for i, g in enumerate(groups)]
