"""Multiple-choice answer extraction, on the shapes small models really write."""

from __future__ import annotations

import pytest
from drag_bench.mc import MCQuestion, bundled_arc, extract_choice, load_arc

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


# Replies the bundled students really gave in benchmark runs (Qwen2.5-1.5B, SmolLM2-135M).
PHYSICS = MCQuestion(
    "Mercury_407327",
    "A physicist changes the ramp angle. Which variable is he investigating?",
    (
        ("A", "the control variable"),
        ("B", "the constant variable"),
        ("C", "the dependent (responding) variable"),
        ("D", "the independent (manipulated) variable"),
    ),
    "D",
)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("C. The dependent (responding) variable\n\nThe dependent variable is the speed", "C"),
        ("D. The independent (manipulated) variable\n\nThe physicist is investigating", "D"),
        ("C. the dependent (responding) variable\n\nThe physicist is investigating the", "C"),
        ("D. the independent (manipulated) variable\nReason: the angle is changed.", "D"),
        ("D", "D"),
        ("The independent (manipulated) variable, since he changes it himself.", "D"),
    ],
)
def test_extract_choice_from_real_replies(reply: str, expected: str) -> None:
    assert extract_choice(reply, PHYSICS) == expected


def test_bundled_mmlu_and_medmcqa_subsets_load() -> None:
    from drag_bench.mc import bundled

    mmlu = load_arc(bundled("mmlu_sample.jsonl"))
    medmcqa = load_arc(bundled("medmcqa_sample.jsonl"))
    assert len(mmlu) == 342 and len({q.subject for q in mmlu}) == 57
    assert len(medmcqa) == 300
    assert all(q.answer in q.labels and len(q.options) == 4 for q in mmlu + medmcqa)
    assert not any(text.startswith(("A. ", "B. ")) for q in medmcqa for _, text in q.options)
