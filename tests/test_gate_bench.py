"""The accuracy benchmark's confidence-gate columns and its SIMULATED strong teacher
(issue 32): the simulation's statement (pure logic), the development part of MedMCQA,
that the product cannot reach the simulation, and a tiny real run (llama.cpp student,
the real local teacher server)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from drag_bench import accuracy
from drag_bench.accuracy import margins, simulated
from drag_bench.accuracy.questions import load_questions
from drag_bench.mc import MCQuestion

from assistant.core.results import AskResult, ScoredEvidence
from assistant.drag import gate

ROOT = Path(__file__).parents[1]
Q = MCQuestion("q1", "Which gas?", (("A", "oxygen"), ("B", "carbon dioxide.")), "B")


def evidence(n: int) -> list[ScoredEvidence]:
    return [
        ScoredEvidence(i, f"statement {i}", i, 0.5, 0.1, f"statement {i}") for i in range(1, n + 1)
    ]


def test_the_simulated_statement_is_the_key_in_words_without_its_letter() -> None:
    assert simulated.key_statement(Q) == "The correct answer is: carbon dioxide."


def test_the_simulated_statement_goes_at_a_seeded_rank_within_the_top_k() -> None:
    result = AskResult(question=Q.text(), mode="evidence", n=15, k=10, evidence=evidence(12))
    seen = set()
    for seed in range(40):
        keyed = simulated.with_key(result, Q, k=10, seed=seed)
        texts = [e.text for e in keyed.evidence]
        at = texts.index(simulated.key_statement(Q)) + 1
        assert 1 <= at <= 10
        assert [t for t in texts if t.startswith("statement")] == [e.text for e in evidence(12)]
        assert [e.rank for e in keyed.evidence] == list(range(1, 14))
        assert keyed == simulated.with_key(result, Q, k=10, seed=seed)  # seeded
        seen.add(at)
    assert len(seen) > 5  # random, not always the same place
    assert result.evidence == evidence(12)  # the real teacher's result is not changed
    few = AskResult(question=Q.text(), mode="evidence", n=15, k=10, evidence=evidence(2))
    assert {
        [e.text for e in simulated.with_key(few, Q, 10, s).evidence].index(
            simulated.key_statement(Q)
        )
        for s in range(30)
    } <= {0, 1, 2}


def test_the_simulated_teacher_is_not_reachable_from_the_products_settings() -> None:
    """The simulation is a benchmark function, not a teacher: nothing in the product
    names it, so no teacher setting can select it."""
    named = [
        p.relative_to(ROOT)
        for p in (ROOT / "assistant").rglob("*.py")
        if "simulated" in p.read_text("utf-8") or "SIMULATION" in p.read_text("utf-8")
    ]
    assert named == []
    source = (ROOT / "bench" / "drag_bench" / "accuracy" / "simulated.py").read_text("utf-8")
    assert "Teacher" not in source.replace("teacher", "")  # no Teacher class to configure


def test_the_mmlu_dev_split_shares_no_question_with_the_mmlu_sample() -> None:
    dev = load_questions("mmlu-dev", None, 285, 0)
    test = load_questions("mmlu", None, 342, 0)
    assert len(dev) == 285 and len({q.subject for q in dev}) == 57
    assert not {q.question for q in dev} & {q.question for q in test}


def test_the_medmcqa_dev_part_is_what_the_test_sample_leaves_out() -> None:
    test = load_questions("medmcqa", None, 200, 0)
    dev = load_questions("medmcqa-dev", None, 100, 0)
    assert len(dev) == 100 and not {q.id for q in dev} & {q.id for q in test}
    everything = load_questions("medmcqa", None, 300, 0)
    assert {q.id for q in dev} | {q.id for q in test} == {q.id for q in everything}
    chosen = sorted(random.Random(0).sample(range(300), 200))
    assert [q.id for q in test] == [everything[i].id for i in chosen]
    assert load_questions("medmcqa-test", None, 200, 0) == test
    assert {q.id for q in load_questions("medmcqa-test", None, 100, 0)} < {q.id for q in test}


@pytest.mark.integration
def test_a_gated_column_and_the_simulation_row_in_a_tiny_real_run(
    on_teacher: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "gate"
    args = ["--n", "2", "--modes", "none,evidence,evidence+gate", "--k", "2"]
    args += ["--evidence-n", "3", "--answer-format", "letter", "--simulated-teacher"]
    assert accuracy.main([*args, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    teacher = on_teacher["DRAG_TEACHER_MODEL"]
    assert [r["teacher"] for r in summary["rows"].values()] == [
        teacher,
        "SIMULATION: answer key + " + teacher,
    ]
    records = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    answers = [r for r in records if r["kind"] == "answer"]
    assert len(answers) == 2 * 2 * 3  # rows x questions x (none, evidence, evidence+gate)
    gated = [a for a in answers if a["mode"] == "evidence+gate"]
    for a in gated:
        g = a["gate"]
        assert g["setting"] == "auto" and a["gate_seconds"] > 0
        want = gate.decide(g["confidence_alone"], g["confidence_with_context"], g["margin"])
        gap = g["confidence_with_context"] - g["confidence_alone"] - g["margin"]
        assert g["went"] == want or abs(gap) < 1e-3  # rounded to 4 places in the record
        # With choices, the probe's reply is the letter the answer gives that way.
        assert a["reply"] == (g["reply_with_context"] if want == "evidence" else g["reply_alone"])
    ungated = [a for a in answers if a["mode"] == "evidence"]
    assert all(a["gate"]["setting"] == "always-evidence" for a in ungated)
    assert all(a["context_evidence"] == 2 for a in ungated + gated)

    for name, row in summary["rows"].items():
        (g,) = row["gate"].values()
        mine = [a for a in gated if a["teacher"] == row["teacher"]]
        assert g["used_context"] == sum(a["gate"]["went"] == "evidence" for a in mine)
        assert g["correct_gated"] == sum(a["correct"] for a in mine)
        assert f"| {name} | evidence+gate K=2 | {g['used_context']}/2 |" in printed


def gated_record(qid: str, alone: tuple[str, float], context: tuple[str, float]) -> dict[str, Any]:
    return {
        "kind": "answer",
        "student": "s",
        "teacher": "t",
        "id": qid,
        "mode": "evidence+gate",
        "k": 10,
        "answer_key": "A",
        "correct": False,  # not read: the margin decides anew from the readings
        "gate": {
            "setting": "auto",
            "reply_alone": alone[0],
            "confidence_alone": alone[1],
            "reply_with_context": context[0],
            "confidence_with_context": context[1],
        },
    }


def plain_record(qid: str, mode: str, correct: bool) -> dict[str, Any]:
    k = 0 if mode == "none" else 10
    return {"kind": "answer", "student": "s", "teacher": "t", "id": qid, "mode": mode, "k": k,
            "correct": correct}  # fmt: skip


def test_the_margins_are_scored_from_the_stored_readings() -> None:
    records = [
        gated_record("q1", ("B", -0.9), ("A", -0.3)),  # the context is surer by 0.6: right
        gated_record("q2", ("A", -0.2), ("C", -0.1)),  # surer by 0.1 only: wrong unless m>=0.1
        gated_record("q3", ("A", -0.5), ("", None)),  # nothing written with the context
        *(plain_record(q, "none", q != "q1") for q in ("q1", "q2", "q3")),
        *(plain_record(q, "evidence", q == "q1") for q in ("q1", "q2", "q3")),
    ]
    (row,) = margins.table(records, [0, 0.1, 1], alone_sure=[0.5, 0.9])
    assert (row["questions"], row["alone"], row["ungated"]) == (3, 2, 1)
    assert row["by_margin"] == {"0": 2, "0.1": 3, "1": 2}
    # Alone, q2 (e^-0.2) and q3 (e^-0.5) are more than 50 % sure, q1 is not; q2 is surer
    # with the context: q1 and q2 take the context, q3 stays alone: 2 right.
    # Above 90 % none is: every question takes the context, as without the gate.
    assert row["by_alone_sure"] == {"0.5": 2, "0.9": 1}


def test_a_test_run_is_scored_after_the_choice_with_p_against_the_student_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The guard refused q4: no teacher work, no gate; its recorded answer stands.
    unread = gated_record("q4", ("B", -0.1), ("A", -0.9)) | {"gate": {}, "correct": True}
    records = [
        gated_record("q1", ("B", -0.9), ("A", -0.3)),  # the context is surer by 0.6: right
        gated_record("q2", ("B", -0.2), ("A", -0.3)),  # alone surer by 0.1: right at m=-0.2
        gated_record("q3", ("A", -0.5), ("", None)),  # nothing written with the context
        unread,
        *(plain_record(q, "none", False) for q in ("q1", "q2", "q3", "q4")),
        *(plain_record(q, "evidence", q in {"q1", "q2"}) for q in ("q1", "q2", "q3", "q4")),
    ]
    at_0, at_minus = (margins.after_choice(records, m) for m in (0, -0.2))
    (row,) = at_0
    assert (row["questions"], row["alone"], row["ungated"]) == (4, 0, 2)
    # At 0: q1 takes the context (right), q2 and q3 stay alone (q3 right), q4 as recorded.
    assert (row["used_context"], row["gated"], row["lift_kept"]) == (1, 3, 1.5)
    assert row["against_alone"] == {"questions": 4, "right_to_wrong": 0, "wrong_to_right": 3,
                                    "mcnemar_p": 0.25}  # fmt: skip
    (row,) = at_minus
    # At -0.2 q2 takes the context too (right): q1, q2, q3 and q4 right.
    assert (row["used_context"], row["gated"]) == (2, 4)
    # At the run's own margin the answers are the recorded ones (here: wrong, none with
    # the context, but q4), not read again from the rounded readings.
    (row,) = margins.after_choice(records, -0.2, as_run=-0.2)
    assert (row["used_context"], row["gated"]) == (0, 1)

    (tmp_path / "run.json").write_text(json.dumps({"dataset": "mmlu", "answer_format": "letter"}))
    (tmp_path / "answers.jsonl").write_text("\n".join(json.dumps(r) for r in records), "utf-8")
    assert margins.main([str(tmp_path), "--after-choice", "--margins=-0.2"]) == 0
    want = "| s · t | evidence+gate K=10 | -0.2 | 2/4 | 0 / 2 / 4 | 200 % | 0.125 (4↑ 0↓) |"
    assert want in capsys.readouterr().out
    # Without --margins: the product's margin for letters, the one chosen, and no other.
    assert margins.main([str(tmp_path), "--after-choice"]) == 0
    assert capsys.readouterr().out.splitlines()[2:] == [want]
    assert margins.main([str(tmp_path), "--margins=-0.2"]) == 2  # a test run: not to choose on
    assert "development split only" in capsys.readouterr().err


def test_the_margin_is_chosen_on_a_development_run_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(**scope: str | None) -> int:
        (tmp_path / "run.json").write_text(json.dumps(scope), "utf-8")
        return margins.main([str(tmp_path)])

    (tmp_path / "answers.jsonl").write_text("", "utf-8")
    assert run(dataset="medmcqa", answer_format="letter") == 2
    assert "development split only" in capsys.readouterr().err
    assert run(dataset="arc-c-dev", data="test-items.jsonl", answer_format="letter") == 2
    assert "'test-items.jsonl': the margin is chosen" in capsys.readouterr().err
    assert run(dataset="medmcqa-dev", answer_format="reason") == 2
    assert "only letter answers" in capsys.readouterr().err
    assert run(dataset="medmcqa-dev", answer_format="letter") == 0
