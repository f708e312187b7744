"""The accuracy benchmark: its figures (pure logic on hand-made records), the bundled
subsets, and a tiny end-to-end run with the real local teacher server and the real
llama.cpp student, interrupted and resumed."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from drag_bench import accuracy, make_mc_sets

from assistant.base.errors import InputError
from assistant.core.session import Session
from assistant.store import Store, ledger
from tests.conftest import need_data

SHARED = Path(__file__).parents[2] / "shared" / "data"


def test_wilson_interval() -> None:
    lo, hi = accuracy.wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = accuracy.wilson(50, 100)
    assert (lo, hi) == (pytest.approx(0.4038, abs=1e-4), pytest.approx(0.5962, abs=1e-4))
    assert accuracy.wilson(0, 0) == (0.0, 0.0)


def test_columns_put_the_student_alone_first_without_k() -> None:
    cols = accuracy.columns(["evidence", "none", "graph"], [5, 10])
    assert cols == [("none", 0), ("evidence", 5), ("evidence", 10), ("graph", 5), ("graph", 10)]


def answer(qid: str, mode: str, k: int, correct: bool, student: str = "s") -> dict[str, Any]:
    return {
        "kind": "answer",
        "student": student,
        "teacher": "t",
        "id": qid,
        "mode": mode,
        "k": k,
        "choice": None if qid == "q3" and mode == "none" else "A",
        "correct": correct,
        "tokens_per_second": 20.0,
    }


def test_summarise_and_render_agree_with_the_records() -> None:
    records = [
        answer("q1", "none", 0, False),
        answer("q2", "none", 0, True),
        answer("q3", "none", 0, False),
        answer("q1", "evidence", 5, True),
        answer("q2", "evidence", 5, True),
        answer("q3", "evidence", 5, False),
        answer("q9", "evidence", 5, True),  # not in this run's sample: ignored
    ]
    teachers = [
        {"kind": "teacher", "teacher": "t", "id": "q1", "served": "teacher", "calls": 3,
         "prompt_tokens": 300, "completion_tokens": 90, "seconds": 4.0},
        {"kind": "teacher", "teacher": "t", "id": "q2", "served": "cache", "calls": 1,
         "prompt_tokens": 100, "completion_tokens": 30, "seconds": 0.1},
        {"kind": "teacher", "teacher": "t", "id": "q3", "served": "none", "calls": 0,
         "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.2, "error": "refused"},
    ]  # fmt: skip
    cols = accuracy.columns(["none", "evidence"], [5])
    summary = accuracy.summarise(records, teachers, [("s", "t")], cols, ["q1", "q2", "q3"])
    cells = summary["rows"]["s"]["cells"]
    assert cells["none"]["correct"] == 1 and cells["none"]["total"] == 3
    assert cells["none"]["unparsed"] == 1
    assert cells["evidence K=5"]["accuracy"] == pytest.approx(2 / 3)
    t = summary["teachers"]["t"]
    assert t["questions"] == 3 and t["failed"] == 1
    assert t["calls_per_question"] == 2 and t["prompt_tokens_per_question"] == 200
    assert t["seconds_per_question"] == 4.0  # only where the teacher itself answered
    table = accuracy.render(summary, "title")
    assert "| s | 33.3 [6.1–79.2] | 66.7 [20.8–93.9] |" in table
    # q1 went wrong -> right with evidence, q2 and q3 did not change: n = 1, p = 1.
    assert summary["rows"]["s"]["against_none"]["evidence K=5"] == {
        "questions": 3,
        "right_to_wrong": 0,
        "wrong_to_right": 1,
        "mcnemar_p": 1.0,
    }
    assert "| s | evidence K=5 | 1 | 0 | 1 |" in table


def test_question_sample_is_seeded_and_filtered() -> None:
    a = accuracy.load_questions("arc-c", None, 10, 3)
    assert [q.id for q in a] == [q.id for q in accuracy.load_questions("arc-c", None, 10, 3)]
    assert [q.id for q in a] != [q.id for q in accuracy.load_questions("arc-c", None, 10, 4)]
    anatomy = accuracy.load_questions("mmlu", None, 4, 0, ["anatomy"])
    assert {q.subject for q in anatomy} == {"anatomy"}
    with pytest.raises(InputError, match="unknown subject 'astrology'"):
        accuracy.load_questions("mmlu", None, 4, 0, ["astrology"])
    with pytest.raises(InputError, match="only 6 questions"):
        accuracy.load_questions("mmlu", None, 7, 0, ["anatomy"])


def test_records_drop_a_line_torn_by_an_interruption(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps(answer("q1", "none", 0, True)) + '\n{"kind": "ans', "utf-8")
    records = accuracy.Records(path)
    assert len(records.answers) == 1 and records.answered("s", "t", "q1", "none", 0)
    records.add(answer("q2", "none", 0, True))
    assert [json.loads(line)["id"] for line in path.read_text("utf-8").splitlines()] == [
        "q1",
        "q2",
    ]


def test_a_question_the_teacher_failed_on_is_tried_again(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    failed = {"kind": "teacher", "teacher": "t", "id": "q2", "error": "teacher down"}
    without_context = {**answer("q2", "evidence", 5, False), "teacher_failed": True}
    rows = [
        answer("q1", "evidence", 5, True),
        failed,
        answer("q2", "none", 0, True),
        without_context,
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    records = accuracy.Records(path)
    assert records.answered("s", "t", "q1", "evidence", 5)
    assert records.answered("s", "t", "q2", "none", 0)  # the student alone needs no teacher
    assert not records.taught("t", "q2")
    assert not records.answered("s", "t", "q2", "evidence", 5)
    assert len(path.read_text("utf-8").splitlines()) == 2  # the file agrees


def test_the_generator_rebuilds_the_bundled_subsets_byte_for_byte(tmp_path: Path) -> None:
    need_data(SHARED)  # the verbatim copies
    make_mc_sets.main(["--shared", str(SHARED), "--out", str(tmp_path)])
    for name in (
        "mmlu_sample.jsonl",
        "medmcqa_sample.jsonl",
        "arc_challenge_dev200.jsonl",
        "mmlu_dev285.jsonl",
    ):
        assert (tmp_path / name).read_bytes() == (make_mc_sets.DATA / name).read_bytes()


def test_bad_arguments_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert accuracy.main(["--k", "five"]) == 2
    assert accuracy.main(["--modes", "evidence,magic"]) == 2
    assert accuracy.main(["--n", "0"]) == 2
    assert accuracy.main(["--k", "50", "--evidence-n", "10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("bench: error: ") for line in err)


@pytest.mark.integration
def test_tiny_run_produces_agreeing_outputs_and_resumes(
    on_teacher: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "run"
    args = ["--n", "5", "--k", "2,3", "--evidence-n", "4", "--out", str(out)]
    assert accuracy.main([*args, "--concurrency", "2"]) == 0
    printed = capsys.readouterr().out
    files = {p.name for p in out.iterdir()}
    assert {"summary.md", "summary.json", "accuracy.png", "answers.jsonl", "run.json"} <= files
    assert (out / "accuracy.png").read_bytes().startswith(b"\x89PNG")
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    lines = [json.loads(line) for line in (out / "answers.jsonl").read_text("utf-8").splitlines()]
    answers = [r for r in lines if r["kind"] == "answer"]
    assert len(answers) == 5 * 7  # none + 3 modes x 2 K
    assert len([r for r in lines if r["kind"] == "teacher"]) == 5
    # The table, the JSON and the per-question file say the same thing.
    (row,) = summary["rows"].values()
    for column, cell in row["cells"].items():
        mode, k = ("none", 0) if column == "none" else (column.split()[0], int(column[-1]))
        mine = [a for a in answers if a["mode"] == mode and a["k"] == k]
        assert cell["total"] == len(mine) == 5
        assert cell["correct"] == sum(a["correct"] for a in mine)
        lo, hi = cell["ci95"]
        assert f"{100 * cell['accuracy']:.1f} [{100 * lo:.1f}–{100 * hi:.1f}]" in printed
    assert printed.strip() == (out / "summary.md").read_text("utf-8").strip()
    assert any(a["context_evidence"] == 3 for a in answers if a["k"] == 3)

    # Interrupted: the last answers lost, one line torn.  The rerun does only those,
    # with the teacher's work from the cache (no new upload).
    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as store:
        uploads_before = len(ledger.select(store.db))
    kept = (out / "answers.jsonl").read_text("utf-8").splitlines()[:20]
    (out / "answers.jsonl").write_text("\n".join(kept) + '\n{"kind": "answ', "utf-8")
    assert accuracy.main(args) == 0
    assert "resuming: " in capsys.readouterr().err
    again = [json.loads(line) for line in (out / "answers.jsonl").read_text("utf-8").splitlines()]
    assert len([r for r in again if r["kind"] == "answer"]) == 35
    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as store:
        assert len(ledger.select(store.db)) == uploads_before
    # Other settings in the same folder: refused, named.
    assert accuracy.main(["--n", "6", *args[2:]]) == 2
    assert re.search(r"other settings \(n\)", capsys.readouterr().err)


@pytest.mark.integration
def test_two_students_share_one_teacher_pass_and_make_the_two_row_table(
    on_teacher: dict[str, str],
    test_model_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The issue-15 table in small: the teacher's work first and alone (--teacher-only),
    then two real llama.cpp students (the manifest's SmolLM2 by name, and the same file
    by its path) answer from it with no new upload; a row each, paired against none."""
    students = f"smollm2-135m-instruct,{test_model_path}"
    common = ["--n", "3", "--modes", "none,evidence", "--k", "2", "--evidence-n", "3"]
    first = tmp_path / "teacher"
    assert accuracy.main([*common, "--teacher-only", "--out", str(first)]) == 0
    taught = [json.loads(line) for line in (first / "answers.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in taught] == ["teacher"] * 3
    assert all(r["served"] == "teacher" and "evidence" in r["timings"] for r in taught)
    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as store:
        rows = ledger.select(store.db)
        uploads = len(rows)
    # No mode here reads the graph, so the teacher was not asked for one.
    assert {r["purpose"] for r in rows} == {"evidence"} and uploads == 3
    capsys.readouterr()

    out = tmp_path / "two"
    assert accuracy.main([*common, "--student", students, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as store:
        assert len(ledger.select(store.db)) == uploads  # the teacher's work came from the cache
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    assert list(summary["rows"]) == ["smollm2-135m-instruct", str(test_model_path)]
    records = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    answers = [r for r in records if r["kind"] == "answer"]
    assert len(answers) == 2 * 3 * 2  # students x questions x (none, evidence K=2)
    assert {r["served"] for r in records if r["kind"] == "teacher"} == {"cache"}
    for name, row in summary["rows"].items():
        mine = {(a["id"], a["mode"]): a["correct"] for a in answers if a["student"] == name}
        alone = {q: c for (q, m), c in mine.items() if m == "none"}
        helped = {q: c for (q, m), c in mine.items() if m == "evidence"}
        paired = row["against_none"]["evidence K=2"]
        assert paired["questions"] == 3
        assert paired["wrong_to_right"] == sum(helped[q] and not alone[q] for q in alone)
        assert paired["right_to_wrong"] == sum(alone[q] and not helped[q] for q in alone)
        assert f"| {name} | evidence K=2 | {paired['wrong_to_right']} |" in printed
        assert row["answer_seconds"]["count"] == 6
    assert printed.strip() == (out / "summary.md").read_text("utf-8").strip()

    # Replies read again with the extractor: the same figures when nothing changed.
    capsys.readouterr()
    assert accuracy.main([*common, "--student", students, "--out", str(out), "--rescore"]) == 0
    assert json.loads((out / "summary.json").read_text("utf-8"))["rows"] == summary["rows"]


def test_each_benchmark_question_has_placeholders_of_its_own() -> None:
    """A value detected in one question must be neither protected nor replaced in
    another (ARC: a false ORGANIZATION in one question blocked a later one)."""
    import threading

    from assistant.base import config

    rt = Session(config.load())
    conversation = rt.vault
    conversation.placeholder("ORGANIZATION", "Sun")
    seen: dict[str, object] = {}

    def work(name: str) -> None:
        with rt.own_placeholders() as own:
            own.placeholder("PERSON", name)
            seen[name] = [v for _, v in rt.vault.values()]

    threads = [threading.Thread(target=work, args=(n,)) for n in ("Ada", "Grace")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"Ada": ["Ada"], "Grace": ["Grace"]}  # nothing from the other one
    assert rt.vault is conversation and conversation.values() == [("ORGANIZATION", "Sun")]


def test_a_copied_answer_leaves_the_next_answer_a_fresh_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The student alone, copied from another row, is not worked: the question's first
    answer that is worked still starts from a forgotten context (a fake student and a
    fake respond: this is the loop's order only)."""
    from drag_bench.accuracy import passes

    from assistant.core.results import AskResult

    done: list[str] = []

    class FakeStudent:
        def forget(self) -> None:
            done.append("forget")

    class FakeRuntime:
        student = FakeStudent()

    def fake_respond(_rt: object, attempt: AskResult, **_kw: object) -> None:
        done.append(attempt.mode)
        attempt.answer = "A"
        attempt.student = {"prompt_tokens": 1, "completion_tokens": 1, "tokens_per_second": 1.0}

    monkeypatch.setattr(passes.pipeline, "respond", fake_respond)
    (q,) = accuracy.load_questions("mmlu", None, 1, 0)
    records = accuracy.Records(tmp_path / "answers.jsonl")
    records.add({**answer(q.id, "none", 0, True), "reply": "A"})  # the real teacher's row
    found = AskResult(question=q.text(), mode="evidence", n=3, k=2)
    cols = [("none", 0), ("evidence+gate", 2)]
    passes.answer_all(
        FakeRuntime(), "s", "sim", [q], {q.id: found}, cols, records, lambda _m: None, "letter"
    )  # type: ignore[arg-type]
    assert done == ["forget", "evidence"]
    assert records.alone("s", q.id) is not None and records.answered("s", "sim", q.id, "none", 0)
