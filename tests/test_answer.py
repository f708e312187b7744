"""The student's prompt: order, the token budget, and the multiple-choice instruction
(pure logic; the counter is a fake that counts words)."""

from __future__ import annotations

from drag_bench.mc import MCQuestion

from assistant.drag import answer


def words(text: str) -> int:
    """A fake token counter for these tests: one token a word."""
    return len(text.split())


def test_the_papers_order_and_the_context_first_order_hold_the_same_parts() -> None:
    first = answer.build_messages("Why?", ["e1", "e2"], ["r1"], "combined")
    last = answer.build_messages("Why?", ["e1", "e2"], ["r1"], "combined", order="context-first")
    assert first[1]["content"] == (
        "Question: Why?\nEvidences:\n- e1\n- e2\nRelationships between entities:\n- r1"
    )
    assert last[1]["content"] == (
        "Evidences:\n- e1\n- e2\nRelationships between entities:\n- r1\nQuestion: Why?"
    )
    assert first[0] == last[0]  # one system prompt
    alone = answer.build_messages("Why?", ["e1"], ["r1"], "none", order="context-first")
    assert alone[1]["content"] == "Question: Why?"


def test_the_budget_takes_evidence_and_relationships_in_turn_best_first() -> None:
    evidences = ["one two three", "four five six", "seven eight nine"]
    relationships = ["a b", "c d"]
    # Costs: 5, 4, 5, 4, 5 (words + 2).  14 tokens: e1, r1, e2, then r2 (4) would make 18.
    kept = answer.within_budget(evidences, relationships, 14, words)
    assert kept == (["one two three", "four five six"], ["a b"])
    assert answer.within_budget(evidences, relationships, 4, words) == ([], [])
    everything = answer.within_budget(evidences, relationships, 1000, words)
    assert everything == (evidences, relationships)
    assert answer.within_budget(evidences, [], 10, words) == (evidences[:2], [])


def test_the_letter_format_asks_for_the_letter_alone() -> None:
    q = MCQuestion("x", "Which?", (("A", "one"), ("B", "two")), "B")
    assert q.student_prompt("letter").endswith(
        "Reply with the letter of the correct option (A, B) only."
    )
    assert "one short sentence of reason" in q.student_prompt()
