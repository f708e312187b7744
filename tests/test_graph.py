"""Graph merge per entity pair and the teacher-call budget (FakeTeacher: pure logic)."""

from __future__ import annotations

import json
from typing import Any

from assistant.drag import graph
from assistant.drag.graph import Triple
from assistant.models.teacher import Teacher
from assistant.net import egress


class FakeTeacher(Teacher):
    """Answers from a script instead of the network (unit tests only)."""

    def __init__(self, replies: list[str]) -> None:
        super().__init__(
            endpoint=egress.Endpoint("http://fake.invalid/v1"), model="fake", structured="off"
        )
        self.replies = replies
        self.requests: list[egress.ChatRequest] = []

    def complete(self, request: egress.ChatRequest) -> egress.ChatReply:
        self.requests.append(request)
        return egress.ChatReply(self.replies.pop(0), "stop", "fake", 1, 1, 0.0)


def test_entity_key_normalises() -> None:
    assert graph.entity_key("The  Eiffel Tower!") == graph.entity_key("eiffel tower")
    assert graph.entity_key("C++") != graph.entity_key("C")


def test_group_by_pair_is_unordered_and_keeps_first_appearance_order() -> None:
    triples = [
        Triple("Paris", "France", "Paris is the capital of France", (1,)),
        Triple("Seine", "Paris", "The Seine flows through Paris", (2,)),
        Triple("france", "the Paris", "France's largest city is Paris", (3,)),
        Triple("Paris", "France", "Paris is the capital of France", (4,)),  # exact repeat
    ]
    groups = graph.group_by_pair(triples)
    assert [len(g.triples) for g in groups] == [3, 1]
    assert groups[0].relations == [
        "Paris is the capital of France",
        "France's largest city is Paris",
    ]
    merged = groups[0].merged("Paris is France's capital and largest city")
    assert merged.relation == "Paris is France's capital and largest city"
    assert merged.sources == (1, 3, 4)
    # Without a summary the relations are joined, nothing is dropped.
    assert (
        groups[0].merged().relation
        == "Paris is the capital of France; France's largest city is Paris"
    )


def test_merge_is_one_call_for_all_pairs() -> None:
    triples = [
        Triple("A", "B", "A founded B"),
        Triple("B", "A", "B was founded by A in 1990"),
        Triple("C", "D", "C owns D"),
        Triple("D", "C", "D belongs to C"),
        Triple("E", "F", "E is next to F"),
    ]
    reply = json.dumps(
        {
            "summaries": [
                {"id": 1, "summary": "A founded B in 1990"},
                {"id": 2, "summary": "C owns D"},
            ]
        }
    )
    fake = FakeTeacher([reply])
    merged = graph.merge(fake, triples)
    assert len(fake.requests) == 1
    assert [t.relation for t in merged] == ["A founded B in 1990", "C owns D", "E is next to F"]
    sent: dict[str, Any] = json.loads(
        fake.requests[0].messages[1]["content"].split("Groups:\n", 1)[1].split("\n\n")[0]
    )
    assert [g["id"] for g in sent] == [1, 2]


def test_merge_skips_the_call_when_no_pair_repeats() -> None:
    fake = FakeTeacher([])
    merged = graph.merge(fake, [Triple("A", "B", "A likes B"), Triple("A", "B", "a likes b")])
    assert fake.requests == []
    assert [t.relation for t in merged] == ["A likes B"]


def test_merge_falls_back_when_summary_missing() -> None:
    fake = FakeTeacher(["not json at all"])
    merged = graph.merge(fake, [Triple("A", "B", "A founded B"), Triple("A", "B", "A sold B")])
    assert merged[0].relation == "A founded B; A sold B"


def test_extract_sends_all_statements_in_one_call() -> None:
    reply = json.dumps(
        {"triples": [{"statement": 2, "entity1": "X", "entity2": "Y", "relationship": "X is Y"}]}
    )
    fake = FakeTeacher([reply])
    out = graph.extract(fake, ["first statement", "second statement", "third"])
    assert len(fake.requests) == 1
    assert "3. third" in fake.requests[0].messages[1]["content"]
    assert out == [Triple("X", "Y", "X is Y", (2,))]
