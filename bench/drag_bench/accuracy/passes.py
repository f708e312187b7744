"""The accuracy benchmark's two passes: the teacher's (evidence and graph, cached and
recorded) and the students' answers from it; resumable records."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from assistant.base.config import Mode
from assistant.base.errors import DragError
from assistant.core import pipeline
from assistant.core.results import AskResult
from assistant.core.session import Session
from assistant.store import ledger
from drag_bench.accuracy.questions import GATED
from drag_bench.accuracy.report import column_name
from drag_bench.mc import MCQuestion, extract_choice


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text("utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            break  # a line cut short by an interruption: redone
    return out


class Records:
    """answers.jsonl: teacher and answer records, appended as they come, read back on resume."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # A question the teacher failed on (down, refused by the guard) is tried again:
        # its failure and the answers made without its context are dropped.
        kept = [
            r
            for r in _read_jsonl(path)
            if not (r.get("kind") == "teacher" and r.get("error")) and not r.get("teacher_failed")
        ]
        # Rewrite what was readable, so a torn last line does not stay in the file.
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept), "utf-8")
        self.answers = [r for r in kept if r.get("kind") == "answer"]
        self.teachers = [r for r in kept if r.get("kind") == "teacher"]
        self._done = {
            (r["student"], r["teacher"], r["id"], r["mode"], r["k"]) for r in self.answers
        }
        self._taught = {(r["teacher"], r["id"]) for r in self.teachers}
        self._alone: dict[tuple[str, str], dict[str, Any]] = {}
        for r in self.answers:
            if r["mode"] == "none":
                self._alone.setdefault((r["student"], r["id"]), r)

    def answered(self, student: str, teacher: str, qid: str, mode: str, k: int) -> bool:
        return (student, teacher, qid, mode, k) in self._done

    def alone(self, student: str, qid: str) -> dict[str, Any] | None:
        """The student's answer without context to question ``qid`` in any row (a
        teacher's row or a simulation's: the same prompt, so the same answer)."""
        return self._alone.get((student, qid))

    def taught(self, teacher: str, qid: str) -> bool:
        return (teacher, qid) in self._taught

    def add(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        if record["kind"] == "answer":
            self.answers.append(record)
            key = (record["student"], record["teacher"], record["id"], record["mode"], record["k"])
            self._done.add(key)
            if record["mode"] == "none":
                self._alone.setdefault((record["student"], record["id"]), record)
        else:
            self.teachers.append(record)
            self._taught.add((record["teacher"], record["id"]))


def teacher_record(
    rt: Session, teacher: str, q: MCQuestion, result: AskResult, seconds: float
) -> dict[str, Any]:
    """Calls and tokens of this question's teacher work, also when the cache served it
    (then read from the ledger rows of the uploads it came from)."""
    if result.source == "teacher":
        calls = result.teacher.get("calls", [])
        prompt = sum(c["prompt_tokens"] for c in calls)
        completion = sum(c["completion_tokens"] for c in calls)
        count = len(calls)
    else:
        rows = [ledger.get(rt.store.db, u) for u in result.provenance.get("uploads") or []]
        found = [r for r in rows if r is not None]
        prompt = sum(int(r["prompt_tokens"] or 0) for r in found)
        completion = sum(int(r["completion_tokens"] or 0) for r in found)
        count = len(found)
    return {
        "kind": "teacher",
        "teacher": teacher,
        "id": q.id,
        "served": result.source,
        "calls": count,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "seconds": round(seconds, 3),
        "evidence": len(result.evidence),
        "triples": len(result.triples),
        "timings": dict(result.timings),
        "warnings": result.warnings,
    }


def gather_all(
    rt: Session,
    teacher: str,
    questions: Sequence[MCQuestion],
    records: Records,
    *,
    n: int,
    k: int,
    concurrency: int,
    log: Callable[[str], None],
    mode: Mode = "combined",
) -> dict[str, AskResult | None]:
    """The teacher's work for every question (None where it failed), ``concurrency`` at once.

    ``mode`` "evidence" skips the graph calls (the costlier half on a local teacher);
    the cache then holds no graph for these questions."""

    def one(q: MCQuestion) -> tuple[MCQuestion, AskResult | None, float, str]:
        started = time.perf_counter()
        try:
            with rt.own_placeholders():  # each question is a conversation of its own
                result = pipeline.gather(
                    rt, q.text(), mode=mode, n=n, k=k, review_policy="never", reuse="exact"
                )
        except DragError as exc:  # refused by the guard, teacher down: recorded, not fatal
            return q, None, time.perf_counter() - started, str(exc)
        return q, result, time.perf_counter() - started, ""

    out: dict[str, AskResult | None] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for i, (q, result, seconds, error) in enumerate(pool.map(one, questions), start=1):
            out[q.id] = result
            if not records.taught(teacher, q.id):
                if result is None:
                    record = {
                        "kind": "teacher",
                        "teacher": teacher,
                        "id": q.id,
                        "served": "none",
                        "calls": 0,
                        "prompt_tokens": 0,
                        "completion_tokens": 0,
                        "seconds": round(seconds, 3),
                        "error": error,
                    }
                else:
                    record = teacher_record(rt, teacher, q, result, seconds)
                records.add(record)
            how = "✗ " + error[:80] if result is None else result.source
            log(f"teacher {teacher} [{i}/{len(questions)}] {q.id}: {how} ({seconds:.1f} s)")
    return out


def answer_all(
    rt: Session,
    student: str,
    teacher: str,
    questions: Sequence[MCQuestion],
    gathered: dict[str, AskResult | None],
    cols: Sequence[tuple[str, int]],
    records: Records,
    log: Callable[[str], None],
    answer_format: str = "reason",
) -> None:
    for i, q in enumerate(questions, start=1):
        base = gathered.get(q.id)
        marks: list[str] = []
        worked = False  # an answer of this question's worked by the student (not copied)
        for mode, k in cols:
            if records.answered(student, teacher, q.id, mode, k):
                continue
            # The student alone reads no teacher's words: greedy decoding from a fresh
            # context gives every row the same answer, worked once and copied (named).
            same = records.alone(student, q.id) if mode == "none" else None
            if same is not None:
                copied_from = same.get("copied_from") or same["teacher"]
                records.add({**same, "teacher": teacher, "copied_from": copied_from})
                marks.append(f"{column_name(mode, k)}:{'✓' if same['correct'] else '✗'}")
                continue
            if base is None:  # no teacher work: what the user would get, the student alone
                base = AskResult(question=q.text(), mode="none", n=0, k=0)
                gathered[q.id] = base
            gated = mode.endswith(GATED)
            if not worked:  # the question's first answer never rides on the last question's
                rt.student.forget()
                worked = True
            attempt = dataclasses.replace(
                base,
                mode=mode.removesuffix(GATED),  # type: ignore[arg-type]
                k=k or base.k,
                timings={},
            )
            pipeline.respond(
                rt,
                attempt,
                prompt=q.student_prompt(answer_format),
                choices=q.labels if answer_format == "letter" else (),
                gate_setting="gate" if gated else "always-evidence",
            )
            choice = extract_choice(attempt.answer, q)
            records.add(
                {
                    "kind": "answer",
                    "student": student,
                    "teacher": teacher,
                    "id": q.id,
                    "subject": q.subject,
                    "mode": mode,
                    "k": k,
                    "answer_key": q.answer,
                    "choice": choice,
                    "correct": choice == q.answer,
                    "reply": attempt.answer,
                    "context_evidence": len(attempt.used_evidence),
                    "context_triples": len(attempt.used_triples),
                    "teacher_failed": base.mode == "none" and mode != "none",
                    "seconds": attempt.timings.get("answer", 0.0),
                    "gate": attempt.gate,
                    "gate_seconds": attempt.timings.get("gate", 0.0),
                    "prompt_tokens": attempt.student["prompt_tokens"],
                    "completion_tokens": attempt.student["completion_tokens"],
                    "tokens_per_second": attempt.student["tokens_per_second"],
                }
            )
            marks.append(f"{column_name(mode, k)}:{'✓' if choice == q.answer else '✗'}")
        if marks:
            log(f"student {student} [{i}/{len(questions)}] {q.id} " + " ".join(marks))
