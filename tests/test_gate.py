"""The confidence gate's rule (assistant.drag.gate) on hand-made log-probabilities.

The student here is a fake (FakeProber): it hands back readings written in the test,
so the rule is checked on its own; the real student is in test_integration."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from assistant.drag import gate


def test_a_free_reply_is_as_sure_as_the_mean_log_probability_of_its_tokens() -> None:
    assert gate.confidence("It is", (-0.5, -1.5), {}) == pytest.approx(-1.0)


def test_a_choice_is_as_sure_as_its_own_probability_among_the_choices() -> None:
    picked = {"A": math.log(0.2), "B": math.log(0.7), "C": math.log(0.1)}
    # The tokens' own log-probability (over the whole vocabulary) is not what counts.
    assert gate.confidence("B", (-3.0,), picked) == pytest.approx(math.log(0.7))
    assert gate.confidence(" A ", (-3.0,), picked) == pytest.approx(math.log(0.2))


def test_nothing_written_is_the_least_sure_reply() -> None:
    assert gate.confidence("", (), {}) == -math.inf
    assert gate.decide(-math.inf, -5.0) == "evidence"
    assert gate.decide(-5.0, -math.inf) == "alone"


def test_the_gate_keeps_the_surer_way() -> None:
    assert gate.decide(alone=-0.9, with_context=-0.1, margin=0.0) == "evidence"
    assert gate.decide(alone=-0.1, with_context=-0.9, margin=0.0) == "alone"


def test_a_tie_keeps_the_student_alone() -> None:
    assert gate.decide(-0.4, -0.4, margin=0.0) == "alone"


def test_the_context_must_win_by_more_than_the_margin() -> None:
    assert gate.decide(-0.5, -0.3, margin=0.25) == "alone"
    assert gate.decide(-0.5, -0.2, margin=0.25) == "evidence"


@dataclass(frozen=True)
class FakeReading:
    text: str
    token_logprobs: tuple[float, ...] = ()
    choice_logprobs: dict[str, float] = field(default_factory=dict)


class FakeProber:
    """A fake student: the readings for the prompt without and with context, in order."""

    def __init__(self, alone: FakeReading, with_context: FakeReading) -> None:
        self.readings = {"alone": alone, "context": with_context}
        self.asked: list[tuple[str, int, tuple[str, ...]]] = []

    def probe(
        self, messages: Sequence[dict[str, str]], *, max_tokens: int, choices: Sequence[str] = ()
    ) -> FakeReading:
        which = "context" if "Evidences:" in messages[-1]["content"] else "alone"
        self.asked.append((which, max_tokens, tuple(choices)))
        return self.readings[which]


ALONE = [{"role": "user", "content": "Question: q"}]
WITH = [{"role": "user", "content": "Question: q\nEvidences:\n- e"}]


def test_auto_reads_both_ways_alone_first_and_records_why() -> None:
    student = FakeProber(
        FakeReading("B", (-2.0,), {"A": math.log(0.6), "B": math.log(0.4)}),
        FakeReading("A", (-1.0,), {"A": math.log(0.9), "B": math.log(0.1)}),
    )
    decision = gate.choose(student, "auto", ALONE, WITH, ("A", "B"))
    assert decision.way == "evidence"
    # Alone first: the context's prompt is the one the model holds when it wins.
    assert [w for w, _, _ in student.asked] == ["alone", "context"]
    assert all(c == ("A", "B") for _, _, c in student.asked)
    record = decision.to_dict()
    assert record["setting"] == "auto" and record["went"] == "evidence"
    assert record["confidence_alone"] == pytest.approx(math.log(0.4), abs=1e-4)
    assert record["confidence_with_context"] == pytest.approx(math.log(0.9), abs=1e-4)
    assert (record["reply_alone"], record["reply_with_context"]) == ("B", "A")


def test_a_choice_takes_the_context_unless_it_leads_where_the_student_alone_found_unlikely() -> (
    None
):
    """Letters (issue 49): the context is used when it keeps the student's letter, or
    moves it to one the student alone gives at least PLAUSIBLE (0.3) times the
    probability of its own; a free answer keeps the margin rule (0)."""
    assert gate.PLAUSIBLE == 0.3 and gate.MARGIN == 0.0
    ln = math.log

    def letters(alone: dict[str, float], context: dict[str, float]) -> gate.Decision:
        pick = max(alone, key=alone.__getitem__), max(context, key=context.__getitem__)
        student = FakeProber(
            FakeReading(pick[0], (alone[pick[0]],), alone),
            FakeReading(pick[1], (context[pick[1]],), context),
        )
        return gate.choose(student, "gate", ALONE, WITH, ("A", "B", "C"))

    # Alone: B at 0.5, A at 0.2 (0.4 of B's); the context moves to A, however sure.
    moved = letters(
        {"A": ln(0.2), "B": ln(0.5), "C": ln(0.3)}, {"A": ln(0.9), "B": -3.0, "C": -3.0}
    )
    assert moved.way == "evidence" and moved.to_dict()["rule"] == "plausible:0.3"
    assert gate.describe(moved.to_dict()) == (
        "context used: it led to no choice the student had ruled out"
    )
    # Alone: B at 0.8, A at 0.1 (an eighth of B's): a sure context does not move it there.
    ruled_out = letters(
        {"A": ln(0.1), "B": ln(0.8), "C": ln(0.1)}, {"A": -0.01, "B": -5.0, "C": -5.0}
    )
    assert ruled_out.way == "alone" and ruled_out.reading.text == "B"
    assert gate.describe(ruled_out.to_dict()) == (
        "context not used: it led to a choice the student alone found unlikely"
    )
    # The same letter both ways: the context's reading, even where it is less sure.
    same = letters({"A": ln(0.1), "B": ln(0.8), "C": ln(0.1)}, {"A": -1.0, "B": -0.9, "C": -2.0})
    assert same.way == "evidence"
    record = same.to_dict()
    assert record["choices_alone"]["B"] == pytest.approx(ln(0.8), abs=1e-4)
    assert set(record["choices_with_context"]) == {"A", "B", "C"}
    free = FakeProber(FakeReading("Paris", (-0.5,)), FakeReading("Lyon", (-0.6,)))
    decision = gate.choose(free, "gate", ALONE, WITH)
    assert decision.way == "alone" and decision.to_dict()["margin"] == 0.0
    assert decision.to_dict()["rule"] == "margin" and "choices_alone" not in decision.to_dict()


def test_auto_answers_alone_with_the_embedded_teacher_and_reads_with_any_other() -> None:
    """The default, measured (issue 49): with the embedded teacher, no stronger than the
    student, the student answers alone without being read, and the record and the
    plain words say why; with another teacher "auto" is the gate."""
    sure_with = (
        FakeReading("B", (-2.0,), {"A": -0.2, "B": -2.0}),
        FakeReading("A", (-0.1,), {"A": -0.1, "B": -3.0}),
    )
    student = FakeProber(*sure_with)
    embedded = gate.choose(student, "auto", ALONE, WITH, ("A", "B"), embedded_teacher=True)
    assert embedded.way == "alone" and student.asked == []
    record = embedded.to_dict()
    assert (record["setting"], record["ran"], record["rule"]) == ("auto", "never", None)
    assert gate.describe(record) == (
        "context shown, not used: the embedded teacher is no stronger than the student "
        "(pipeline.gate = auto)"
    )
    remote = gate.choose(student, "auto", ALONE, WITH, ("A", "B"), embedded_teacher=False)
    assert remote.way == "evidence" and [w for w, _, _ in student.asked] == ["alone", "context"]
    assert (remote.to_dict()["setting"], remote.to_dict()["ran"]) == ("auto", "gate")
    # What the user sets is what runs, whatever the teacher.
    forced = gate.choose(
        FakeProber(*sure_with), "gate", ALONE, WITH, ("A", "B"), embedded_teacher=True
    )
    assert forced.to_dict()["ran"] == "gate" and forced.way == "evidence"
    assert gate.resolve("always-evidence", True) == ("always-evidence", "")


def test_auto_answers_alone_when_the_context_makes_the_student_less_sure() -> None:
    student = FakeProber(
        FakeReading("Rayleigh scattering", (-0.1, -0.2)),
        FakeReading("Blue light is longer", (-1.3, -2.0)),
    )
    decision = gate.choose(student, "auto", ALONE, WITH)
    assert decision.way == "alone"
    assert {n for _, n, _ in student.asked} == {gate.PROBE_TOKENS}


@pytest.mark.parametrize(("setting", "way"), [("always-evidence", "evidence"), ("never", "alone")])
def test_the_user_settings_override_the_gate_without_reading(setting: str, way: str) -> None:
    student = FakeProber(FakeReading("x", (-0.1,)), FakeReading("y", (-5.0,)))
    decision = gate.choose(student, setting, ALONE, WITH)  # type: ignore[arg-type]
    assert decision.way == way and student.asked == []
    assert gate.describe(decision.to_dict()).endswith(f"(pipeline.gate = {setting})")


def test_the_app_says_when_the_answer_did_not_use_the_context_and_still_shows_it() -> None:
    from assistant.core.results import AskResult, ScoredEvidence
    from assistant.tui.chat import badge, context_text

    result = AskResult(question="q", mode="evidence", n=3, k=2, source="teacher")
    result.evidence = [ScoredEvidence(1, "The sky is green.", 1, 0.3, 0.03)]
    result.provenance = {"uploads": [7]}
    result.gate = gate.Decision("auto", "alone", -0.2, -1.4).to_dict()
    assert badge(result).endswith("○ answered alone (gate)")
    shown = context_text(result)
    assert "Gate: context not used: the student was surer alone" in shown
    assert "Evidence offered, not used (1 of 1):" in shown and "The sky is green." in shown
    result.gate = gate.Decision("auto", "evidence", -1.4, -0.2).to_dict()
    assert "answered alone" not in badge(result)
    assert "Evidence used (1 of 1):" in context_text(result)
    # "auto" with the embedded teacher did not read the student: the badge says so.
    result.gate = gate.choose(FakeProber(FakeReading("x"), FakeReading("y")), "auto", ALONE, WITH,
                              embedded_teacher=True).to_dict()  # fmt: skip
    assert badge(result).endswith("○ answered alone (embedded teacher)")
    assert "Evidence offered, not used (1 of 1):" in context_text(result)
    assert "the embedded teacher is no stronger than the student" in context_text(result)
    result.gate = gate.choose(
        FakeProber(FakeReading("x"), FakeReading("y")), "never", ALONE, WITH
    ).to_dict()
    assert badge(result).endswith("○ answered alone (never)")


class FakeBrokenProber:
    """A fake student whose prompt format the gate cannot read."""

    def probe(
        self, messages: Sequence[dict[str, str]], *, max_tokens: int, choices: Sequence[str] = ()
    ) -> FakeReading:
        from assistant.base.errors import ModelError

        raise ModelError("m.gguf is prompted in the llama-2 format, which the gate cannot read")


def test_a_student_the_gate_cannot_read_answers_with_the_context_and_says_why() -> None:
    decision = gate.choose(FakeBrokenProber(), "auto", ALONE, WITH)
    assert decision.way == "evidence" and "llama-2 format" in decision.error
    assert gate.describe(decision.to_dict()).startswith("context used: the gate could not read")


def test_a_free_replys_opening_is_not_kept_in_the_record() -> None:
    """It was written from the real values of the question and is not checked as the
    answer is; a choice (a letter) is kept, to score other margins."""
    free = gate.choose(
        FakeProber(
            FakeReading("Call Ada at https://x.test/ada", (-0.1,)), FakeReading("y", (-2.0,))
        ),
        "auto",
        ALONE,
        WITH,
    )
    assert free.reading.text.startswith("Call Ada")  # the answer's way, for the caller
    assert free.to_dict()["reply_alone"] == free.to_dict()["reply_with_context"] == ""
    letters = gate.choose(
        FakeProber(
            FakeReading("B", (-1.0,), {"A": -0.9, "B": -0.5}),
            FakeReading("A", (-1.0,), {"A": -0.1, "B": -2.4}),
        ),
        "auto",
        ALONE,
        WITH,
        ("A", "B"),
    )
    assert (letters.to_dict()["reply_alone"], letters.to_dict()["reply_with_context"]) == ("B", "A")
    assert letters.reading.text == "A"


def test_the_app_badges_an_answer_from_the_cache_and_one_from_the_student_alone() -> None:
    """The README's badges: ◆ from cache (with how it was found, and nothing sent) and
    ● student only."""
    from assistant.core.results import AskResult
    from assistant.tui.chat import badge

    cached = AskResult(question="q", mode="evidence", n=3, k=2, source="cache")
    cached.provenance = {"uploads": [3, 4], "how": "near-duplicate", "score": 0.953}
    assert badge(cached) == "◆ from cache · near-duplicate 0.95 · uploads #3 #4 · nothing sent"
    alone = AskResult(question="q", mode="none", n=0, k=0, source="student")
    assert badge(alone) == "● student only · nothing sent"


@pytest.mark.parametrize("odd", [math.nan, math.inf])
def test_a_reading_that_is_no_log_probability_is_a_stated_fallback(odd: float) -> None:
    """Issue 47, item 15: NaN chose "alone" silently (and --json printed NaN), +inf and
    -inf in one reading raised ValueError.  Either way, either prompt: the context is
    used as without a gate, the record says why, and it is valid JSON."""
    import json

    readings = [
        (FakeReading("B", (odd,), {"A": -3.0, "B": odd}), FakeReading("A", (-0.5,), {"A": -0.5})),
        (FakeReading("B", (-0.5,), {"B": -0.5}), FakeReading("A", (odd,), {"A": odd, "B": -3.0})),
    ]
    for alone, context in readings:
        decision = gate.choose(FakeProber(alone, context), "auto", ALONE, WITH, ("A", "B"))
        assert decision.way == "evidence" and "no log-probability" in decision.error, decision
        json.dumps(decision.to_dict(), allow_nan=False)
        assert gate.describe(decision.to_dict()).startswith("context used: the gate could not")
    mixed = FakeProber(FakeReading("x", (-math.inf, odd)), FakeReading("y", (-0.5,)))
    decision = gate.choose(mixed, "auto", ALONE, WITH)
    assert decision.way == "evidence" and decision.error, decision


def test_doctor_says_what_the_gate_does_with_this_teacher_and_why() -> None:
    embedded = gate.explain("auto", embedded_teacher=True)
    assert embedded.startswith("auto → never: the embedded teacher is no stronger than the student")
    assert "evidence is shown beside the answer" in embedded and "--gate gate" in embedded
    assert gate.explain("auto", embedded_teacher=False).startswith("auto → gate: the student reads")
    assert "under 0.3 of its own's probability" in gate.explain("gate", embedded_teacher=True)
    assert (
        gate.explain("never", embedded_teacher=False) == "never: the student never uses the context"
    )
