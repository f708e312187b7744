"""The accuracy benchmark's confidence-gate columns and its SIMULATED strong teacher
(issue 32): the simulation's statement (pure logic), the development part of MedMCQA,
that the product cannot reach the simulation, and a tiny real run (llama.cpp student,
the real local teacher server)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from drag_bench import accuracy, gatecost
from drag_bench.accuracy import margins, rules, simulated
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
    assert simulated.statement(Q) == "The correct answer is: carbon dioxide."


def test_the_simulated_statement_goes_at_a_seeded_rank_within_the_top_k() -> None:
    result = AskResult(question=Q.text(), mode="evidence", n=15, k=10, evidence=evidence(12))
    seen = set()
    for seed in range(40):
        keyed = simulated.with_statement(result, Q, 10, seed, "helpful")
        texts = [e.text for e in keyed.evidence]
        at = texts.index(simulated.statement(Q)) + 1
        assert 1 <= at <= 10
        assert [t for t in texts if t.startswith("statement")] == [e.text for e in evidence(12)]
        assert [e.rank for e in keyed.evidence] == list(range(1, 14))
        assert keyed == simulated.with_statement(result, Q, 10, seed, "helpful")  # seeded
        seen.add(at)
    assert len(seen) > 5  # random, not always the same place
    assert result.evidence == evidence(12)  # the real teacher's result is not changed
    few = AskResult(question=Q.text(), mode="evidence", n=15, k=10, evidence=evidence(2))
    assert {
        [e.text for e in simulated.with_statement(few, Q, 10, s, "helpful").evidence].index(
            simulated.statement(Q)
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
        assert (g["setting"], g["ran"]) == ("gate", "gate") and a["gate_seconds"] > 0
        # Each letter's probability both ways is kept, and the way is the rule's on them.
        assert set(g["choices_alone"]) == set(g["choices_with_context"]) >= {"A", "B", "C"}
        want = gate.decide_choice(g["choices_alone"], g["choices_with_context"])
        assert g["went"] == want and g["rule"] == "plausible:0.3"
        # With choices, the probe's reply is the letter the answer gives that way.
        assert a["reply"] == (g["reply_with_context"] if want == "evidence" else g["reply_alone"])
    # The student alone is worked once per question and copied into the simulation's row.
    alone = {(a["teacher"], a["id"]): a for a in answers if a["mode"] == "none"}
    for (row, qid), a in alone.items():
        if row != teacher:
            assert a["copied_from"] == teacher and a["reply"] == alone[teacher, qid]["reply"]
        else:
            assert "copied_from" not in a
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


QM = MCQuestion(
    "q7",
    "Which planet is largest?",
    (("A", "Mars"), ("B", "Jupiter"), ("C", "Venus."), ("D", "Mercury")),
    "B",
)


def test_the_misleading_statements_argue_for_one_seeded_wrong_option_at_the_keys_rank() -> None:
    result = AskResult(question=QM.text(), mode="evidence", n=15, k=10, evidence=evidence(12))
    wrongs = set()
    for seed in range(30):
        wrong = simulated.wrong_label(QM, seed)
        assert wrong != QM.answer and wrong == simulated.wrong_label(QM, seed)
        wrongs.add(wrong)
        words = dict(QM.options)[wrong].rstrip(".")
        assert simulated.statement(QM, "misleading", seed) == f"The correct answer is: {words}."
        subtle = simulated.statement(QM, "subtle", seed)
        assert words in subtle and "correct" not in subtle and "Jupiter" not in subtle
        assert not any(f"{label}." in subtle or f"({label})" in subtle for label in QM.labels)
        ranks = {
            kind: [
                e.text for e in simulated.with_statement(result, QM, 10, seed, kind).evidence
            ].index(simulated.statement(QM, kind, seed))
            for kind in simulated.KINDS
        }
        assert len(set(ranks.values())) == 1  # the same rank for the three kinds
    assert wrongs == {"A", "C", "D"}  # every wrong option is used, none the key
    names = {simulated.name("t", kind) for kind in simulated.KINDS}
    assert len(names) == 3 and all(n.startswith("SIMULATION: ") for n in names)
    assert all(simulated.kind_of(simulated.name("t", k)) == k for k in simulated.KINDS)
    assert simulated.kind_of("qwen2.5-coder-1.5b-instruct") == ""


def test_the_misleading_option_names_no_letter_and_does_not_hold_the_keys_words() -> None:
    tricky = MCQuestion(
        "q8",
        "Which is a noble gas?",
        (("A", "Both B and D"), ("B", "Neon"), ("C", "Neon and oxygen"), ("D", "A nitrogen")),
        "B",
    )
    # A names letters, C holds the key's words; D's "A" is an article, not a letter.
    assert {simulated.wrong_label(tricky, seed) for seed in range(30)} == {"D"}
    only_letters = MCQuestion("q9", "Which?", (("A", "A,B"), ("B", "B,C")), "B")
    assert simulated.wrong_label(only_letters, 0) == "A"  # no clean one: any wrong option


def test_the_mmlu_test_rest_is_what_the_gates_test_sample_left_out() -> None:
    used = load_questions("mmlu", None, 100, 0)  # the gate's earlier test runs
    rest = load_questions("mmlu-rest", None, 242, 0)
    everything = load_questions("mmlu", None, 342, 0)
    assert len(rest) == 242 and not {q.id for q in rest} & {q.id for q in used}
    assert {q.id for q in rest} | {q.id for q in used} == {q.id for q in everything}
    recorded = {r["id"] for r in margins._records(ROOT / "docs/results/gate-mmlu-test-n100")}
    assert recorded == {q.id for q in used}


def fake_reading(
    qid: str, alone: dict[str, float], context: dict[str, float], k: int = 10
) -> dict[str, Any]:
    """A FAKE gated record: what a run stores of the two readings, made up."""
    record = gated_record(qid, ("", 0.0), ("", 0.0)) | {"k": k}
    record["gate"] = {"setting": "gate", "choices_alone": alone, "choices_with_context": context}
    return record


LN = math.log
# q1: alone sure of the key A; the context moves to B, which alone found unlikely.
# q2: alone unsure and wrong (B); the context moves to the key A, nearly as likely alone.
# q3: both ways the same letter (C, wrong): every rule but never takes the context.
READINGS = {
    "q1": ({"A": LN(0.8), "B": LN(0.05), "C": LN(0.15)}, {"A": LN(0.1), "B": LN(0.9), "C": -9.0}),
    "q2": ({"A": LN(0.35), "B": LN(0.4), "C": LN(0.25)}, {"A": LN(0.7), "B": LN(0.2), "C": -2.3}),
    "q3": ({"A": LN(0.2), "B": LN(0.2), "C": LN(0.6)}, {"A": LN(0.1), "B": LN(0.1), "C": -0.2}),
}


def test_each_gate_rule_is_scored_from_the_two_stored_distributions() -> None:
    records = [fake_reading(q, *READINGS[q]) for q in READINGS]
    # The run's answers alone: right on q1 only, as the readings alone say.
    records += [plain_record(q, "none", q == "q1") for q in READINGS]
    (items,) = rules.rows(records).values()
    tried = ("margin:0", "margin:-0.2", "margin:0.2", "plausible:0.1", "plausible:0.9")
    tried += ("unsure:0.5", "top:2", "never")
    score = {r: rules.score(items, rules.parse_rule(r)) for r in tried}
    assert {r: (s["alone"], s["ungated"]) for r, s in score.items()} == dict.fromkeys(score, (1, 1))
    # margin 0: q1 with the context (0.9 > 0.8, wrong), q2 with it (0.7 > 0.4, right), q3 too
    assert (score["margin:0"]["gated"], score["margin:0"]["used_context"]) == (1, 3)
    # margin 0.2: q1's 0.9 is not surer than 0.8 by e^0.2: alone (right); q2, q3 the context
    assert (score["margin:0.2"]["gated"], score["margin:0.2"]["used_context"]) == (2, 2)
    # plausible 0.1: q1's B is 0.05/0.8 of A alone: alone (right); q2's A is 0.35/0.4: context
    assert (score["plausible:0.1"]["gated"], score["plausible:0.1"]["used_context"]) == (2, 2)
    assert score["plausible:0.9"]["gated"] == 1 + 0  # q2's 0.875 < 0.9: alone, wrong
    # unsure 0.5: q1 alone is 0.8 sure: alone (right); q2 0.4: the context (right)
    assert (score["unsure:0.5"]["gated"], score["unsure:0.5"]["used_context"]) == (2, 2)
    # top 2: q1's B is last alone: alone (right); q2's A is second alone: the context
    assert (score["top:2"]["gated"], score["top:2"]["used_context"]) == (2, 2)
    assert (score["never"]["gated"], score["never"]["used_context"]) == (1, 0)
    assert score["plausible:0.1"]["against_ungated"]["wrong_to_right"] == 1  # q1
    assert score["plausible:0.1"]["against_ungated"]["right_to_wrong"] == 0
    assert score["plausible:0.1"]["lift_kept"] is None  # the context lifts nothing here
    assert score["never"]["alone_reading_differs"] == 0


def test_the_rules_score_each_gated_column_apart_and_count_readings_unlike_the_runs() -> None:
    """The run's own answers (alone, without the gate) are the alone and ungated
    columns' sources; where a reading differs from them, that is counted, not hidden."""
    records = [fake_reading(q, *READINGS[q], k=k) for q in READINGS for k in (5, 10)]
    records += [
        plain_record(q, "none", q != "q3") for q in READINGS
    ]  # q2 right: unlike its reading
    records += [plain_record(q, "evidence", q == "q2") for q in READINGS]  # the K=10 run
    by_column = rules.rows(records)
    assert sorted(k for *_, k in by_column) == [5, 10]  # two columns, never pooled
    at_10 = rules.score(by_column[("s", "t", "evidence+gate", 10)], rules.parse_rule("never"))
    assert (at_10["questions"], at_10["alone"], at_10["gated"]) == (3, 2, 1)
    assert at_10["alone_reading_differs"] == 1 and at_10["ungated_reading_differs"] == 0
    at_5 = rules.score(by_column[("s", "t", "evidence+gate", 5)], rules.parse_rule("never"))
    assert at_5["ungated_reading_differs"] == 0  # no ungated K=5 answers to compare
    with pytest.raises(ValueError, match="above 0"):
        rules.parse_rule("plausible:0")


def test_the_targets_of_a_rule_are_read_per_kind_of_teacher() -> None:
    def row(alone: int, ungated: int, gated: int, p: float = 1.0) -> dict[str, Any]:
        return {"questions": 100, "alone": alone, "ungated": ungated, "gated": gated,
                "lift_kept": (gated - alone) / (ungated - alone) if ungated > alone else None,
                "against_ungated": {"mcnemar_p": p}}  # fmt: skip

    assert rules.targets("misleading", row(48, 10, 45, p=0.001)) == {
        "no worse than alone - 3": True, "above ungated": True}  # fmt: skip
    assert rules.targets("subtle", row(48, 10, 44, p=0.001))["no worse than alone - 3"] is False
    assert rules.targets("misleading", row(48, 40, 46, p=0.2))["above ungated"] is False
    assert rules.targets("helpful", row(48, 88, 82)) == {"lift kept >= 85 %": True}  # 34/40
    assert rules.targets("helpful", row(48, 88, 81)) == {"lift kept >= 85 %": False}
    assert rules.targets("", row(48, 46, 46)) == {"no worse than alone - 2": True}
    assert rules.targets("", row(48, 46, 45)) == {"no worse than alone - 2": False}
    # Not applicable: a misleading teacher that did not lower the student, a helpful one
    # that did not lift it; neither met nor missed.
    assert rules.targets("subtle", row(27, 32, 32))["above ungated"] is None
    assert rules.targets("helpful", row(48, 47, 47)) == {"lift kept >= 85 %": None}


@pytest.mark.integration
def test_the_gate_cost_bench_answers_each_question_both_ways_taking_turns(
    on_teacher: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cost"
    args = ["--dataset", "arc-c", "--n", "3", "--k", "2", "--evidence-n", "3"]
    assert gatecost.main([*args, "--out", str(out)]) == 0
    times = [json.loads(line) for line in (out / "times.jsonl").read_text().splitlines()]
    asked = list(dict.fromkeys(t["id"] for t in times))
    assert len(asked) == 3 and len(times) == 6
    # Each question both ways, the first way taking turns question by question.
    firsts = [next(t["way"] for t in times if t["id"] == q) for q in asked]
    assert firsts == ["always-evidence", "gate", "always-evidence"]
    assert all(t["went"] == "evidence" for t in times if t["way"] == "always-evidence")
    assert {t["went"] for t in times if t["way"] == "gate"} <= {"evidence", "alone"}
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    # The teacher is the configured one, not the student being timed.
    assert summary["teacher"] == on_teacher["DRAG_TEACHER_MODEL"]
    (row,) = summary["rows"]
    assert row["questions"] == 3 and row["gate_seconds_mean"] > 0
    assert f"| {row['student']} | 3 |" in capsys.readouterr().out


def test_the_rule_picked_keeps_the_lift_and_the_real_teacher_and_loses_least_to_misleading() -> (
    None
):
    def found(name: str, kept: bool | None, real: bool, misled: int) -> dict[str, Any]:
        rows = [
            {"kind": "helpful", "targets": {"lift kept >= 85 %": kept}, "gated": 0, "alone": 0},
            {"kind": "real", "targets": {"no worse than alone - 2": real}, "gated": 0, "alone": 0},
            {"kind": "misleading", "targets": {}, "gated": misled, "alone": 40},
        ]
        return {"rule": name, "rows": rows}

    result = [
        found("never", False, True, 40),  # protects best, keeps no lift
        found("plausible:0.3", True, True, 25),
        found("margin:-1", True, True, 14),
        found("unsure:0.4", None, True, 30),  # no lift to keep: not a miss
        found("top:2", True, False, 35),  # below alone with the real teacher
    ]
    assert rules.pick(result) == "unsure:0.4"
    assert rules.pick(result[:3]) == "plausible:0.3"
    assert rules.pick([result[0], result[4]]) == ""
