"""Evidence and triple parsing: known shapes, and fuzzing (never crash, never invent)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from assistant.drag import evidence, graph
from assistant.drag.parsing import clean_item, parse_list, parse_objects

ITEMS = [
    "Paris is the capital of France.",
    "France is in Europe.",
    "The Seine flows through Paris.",
]

# Items a list can round-trip: printable text without the list syntax itself.
_safe_char = st.characters(
    whitelist_categories=("Lu", "Ll", "Nd", "Zs"), whitelist_characters=".,'()-"
)
safe_items = st.lists(
    st.text(_safe_char, min_size=3, max_size=60)
    .map(lambda s: " ".join(s.split()))
    .filter(lambda s: len(s) >= 3 and any(c.isalpha() for c in s)),
    min_size=1,
    max_size=8,
    unique_by=str.casefold,
)


def test_json_object() -> None:
    assert parse_list(json.dumps({"evidence": ITEMS}), keys=("evidence",)) == ITEMS


def test_json_inside_prose_and_code_fence() -> None:
    text = (
        "Sure! Here you go:\n```json\n" + json.dumps({"evidence": ITEMS}) + "\n```\nHope it helps."
    )
    assert parse_list(text, keys=("evidence",)) == ITEMS


def test_json_list_of_objects() -> None:
    text = json.dumps([{"text": t} for t in ITEMS])
    assert parse_list(text) == ITEMS


def test_truncated_json_keeps_complete_items_only() -> None:
    full = json.dumps({"evidence": ITEMS})
    cut = full[: full.index(ITEMS[2]) + 10]  # stops inside the third string
    assert parse_list(cut, keys=("evidence",)) == ITEMS[:2]


def test_dollar_separators_reference_format() -> None:
    assert parse_list(" $$$ ".join(ITEMS) + " $$$") == ITEMS


def test_numbered_and_bulleted_lists_with_preamble() -> None:
    numbered = "Here are the evidences:\n" + "\n".join(f"{i}. {t}" for i, t in enumerate(ITEMS, 1))
    bulleted = "Evidence:\n" + "\n".join(f"- {t}" for t in ITEMS) + "\n"
    paren = "\n".join(f"{i}) {t}" for i, t in enumerate(ITEMS, 1))
    for text in (numbered, bulleted, paren):
        assert parse_list(text) == ITEMS


def test_plain_lines_and_sentences() -> None:
    assert parse_list("\n".join(ITEMS)) == ITEMS
    assert parse_list(" ".join(ITEMS)) == ITEMS


def test_limit_and_dedupe() -> None:
    assert parse_list(json.dumps([*ITEMS, ITEMS[0].upper()]), limit=2) == ITEMS[:2]
    assert parse_list(json.dumps([*ITEMS, ITEMS[0].upper()])) == ITEMS


def test_empty_and_junk() -> None:
    for text in ["", "   ", "{}", "[]", '{"evidence": []}', "$$$ $$$", "---", "\x00\x01"]:
        assert parse_list(text, keys=("evidence",)) == []


def test_evidence_parse_assigns_teacher_ranks() -> None:
    parsed = evidence.parse(json.dumps({"evidence": ITEMS}), n=2)
    assert [(e.text, e.teacher_rank) for e in parsed] == [(ITEMS[0], 1), (ITEMS[1], 2)]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_fuzz_never_crashes_and_never_invents(text: str) -> None:
    items = parse_list(text, keys=("evidence",))
    assert all(isinstance(i, str) and i == i.strip() and i for i in items)
    if not any(c in text for c in '"[{\\'):
        # Without JSON syntax every item must be a piece of the text (whitespace aside).
        flat = " ".join(text.split())
        for item in items:
            assert item in flat or all(word in flat for word in item.split())
    for t in graph.parse_triples(text):
        assert t.entity1 and t.entity2 and t.relation


@settings(max_examples=150, deadline=None)
@given(safe_items, st.sampled_from(["json", "json_list", "dollar", "numbered", "bullets", "lines"]))
def test_fuzz_round_trip(items: list[str], fmt: str) -> None:
    text = {
        "json": json.dumps({"evidence": items}),
        "json_list": json.dumps(items),
        "dollar": "$$$".join(items),
        "numbered": "\n".join(f"{i}. {t}" for i, t in enumerate(items, 1)),
        "bullets": "\n".join(f"* {t}" for t in items),
        "lines": "\n".join(items),
    }[fmt]
    expected = [clean_item(i) for i in items]
    expected = [e for e in expected if any(c.isalnum() for c in e)]
    if fmt in ("lines", "dollar") and len(items) == 1:
        return  # one bare line (no $$$ either) is read as sentences, which may split it
    assert parse_list(text, keys=("evidence",)) == expected


def test_triples_json_and_aliases() -> None:
    text = json.dumps(
        {
            "triples": [
                {
                    "statement": 1,
                    "entity1": "Paris",
                    "entity2": "France",
                    "relationship": "Paris is the capital of France",
                },
                {"head": "Seine", "tail": "Paris", "relation": "The Seine flows through Paris"},
                {"entity1": "", "entity2": "x", "relationship": "dropped: no first entity"},
            ]
        }
    )
    triples = graph.parse_triples(text, count=3)
    assert [(t.entity1, t.entity2, t.sources) for t in triples] == [
        ("Paris", "France", (1,)),
        ("Seine", "Paris", ()),
    ]


def test_triples_reference_text_format_and_tuples() -> None:
    text = (
        "Entity 1: Sagittarius A*\nEntity 2: galaxy\n"
        "Relationship: Sagittarius A* aligns with the dynamical center of the galaxy\n$$$\n"
        "Entity 1:Paris\nEntity 2: France\nRelationship: Paris is the capital of France\n$$$"
    )
    got = [(t.entity1, t.entity2, t.relation) for t in graph.parse_triples(text)]
    assert got == [
        (
            "Sagittarius A*",
            "galaxy",
            "Sagittarius A* aligns with the dynamical center of the galaxy",
        ),
        ("Paris", "France", "Paris is the capital of France"),
    ]
    tuples = "1. (Paris, France, capital of)\n2. (Seine, Paris, flows through)"
    assert [t.entity1 for t in graph.parse_triples(tuples)] == ["Paris", "Seine"]


def test_truncated_triples_keep_complete_objects() -> None:
    text = (
        '{"triples": [{"entity1": "A", "entity2": "B", "relationship": "A likes B"}, '
        '{"entity1": "C", "ent'
    )
    assert [t.relation for t in graph.parse_triples(text)] == ["A likes B"]
    assert parse_objects("no json here") == []
