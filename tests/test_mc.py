"""Multiple-choice answer extraction, on the shapes small models really write."""

from __future__ import annotations

import pytest

from assistant.bench.mc import MCQuestion, bundled_arc, extract_choice, load_arc

Q = MCQuestion(
    "q1",
    "Which gas do plants absorb for photosynthesis?",
    (("A", "Oxygen"), ("B", "Carbon dioxide"), ("C", "Nitrogen"), ("D", "Helium")),
    "B",
)
NUMERIC = MCQuestion("q2", "Pick one.", (("1", "red"), ("2", "green"), ("3", "blue")), "2")


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("B", "B"),
        ("(B)", "B"),
        ("B.", "B"),
        ("B) Carbon dioxide", "B"),
        ("**B** Carbon dioxide is absorbed.", "B"),
        ("The answer is B.", "B"),
        ("The correct answer is (B) Carbon dioxide.", "B"),
        ("Answer: B", "B"),
        ("answer is b", None),  # a lowercase letter is not trusted as a label
        ("A plant absorbs carbon dioxide.", "B"),  # "A" starts a sentence; the option text decides
        ("Plants take in carbon dioxide from the air.", "B"),
        ("Oxygen and carbon dioxide are both gases.", None),  # two options named: unparseable
        ("", None),
        ("I am not sure.", None),
    ],
)
def test_extract_choice(reply: str, expected: str | None) -> None:
    assert extract_choice(reply, Q) == expected


def test_numeric_labels() -> None:
    assert extract_choice("2. green", NUMERIC) == "2"
    assert extract_choice("The answer is 3", NUMERIC) == "3"


def test_bundled_arc_subset_loads() -> None:
    items = load_arc(bundled_arc())
    assert len(items) == 200
    assert all(q.answer in q.labels for q in items)
    assert "A. " in items[0].text() or "1. " in items[0].text()
