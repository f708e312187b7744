"""What the confidence gate adds to an answer's time (issue 49), measured side by side.

    drag bench gate-cost --dataset mmlu-dev --n 30 [--answer-format letter|reason]

Each question is answered twice by the same student from the same teacher context:
without the gate (``always-evidence``) and with it (``gate``), the two taking turns in
which goes first, question by question, so that they share the machine's load.  Before
each answer the student forgets what it read and reads the system prompt again, as a
new question finds it in the product (``Session`` primes it): the question, the
context and, with the gate, the student's reading alone are what the answer pays for.
The teacher's work is the accuracy benchmark's (cached in the store; set
``DRAG_STORE_DATABASE`` to the same database to reuse it).

It prints, per student, the mean and median seconds of an answer both ways, the median
of the paired difference (the same question gated minus ungated) and the gate's cost:
the gated mean over the ungated mean, minus one.  One untimed answer each way comes
first (the chat template and the grammar are built once per process).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from assistant.base import config
from assistant.base.errors import DragError
from assistant.core import pipeline
from assistant.core.results import AskResult
from assistant.core.session import Session
from assistant.drag import answer
from drag_bench import arguments
from drag_bench.accuracy.passes import Records, gather_all
from drag_bench.accuracy.questions import DATASETS, load_questions
from drag_bench.mc import MCQuestion

WAYS = ("always-evidence", "gate")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = arguments("gate-cost", __doc__)
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="mmlu-dev")
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--first",
        type=int,
        default=0,
        help="answer only the first questions of the sample (the sample is the accuracy "
        "run's, so its cached teacher work is reused)",
    )
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--evidence-n", type=int, default=15)
    parser.add_argument("--student", help="student model(s), comma-separated")
    parser.add_argument("--answer-format", choices=("letter", "reason"), default="letter")
    parser.add_argument("--max-tokens", type=int, default=48, help="a reason answer's tokens")
    parser.add_argument("--out", type=Path, default=Path("bench-results/gate-cost"))
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    try:
        summary = run(args)
    except (DragError, ValueError) as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    print(render(summary))
    return 0


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.n < 1:
        raise ValueError("--n: 1 or more questions")
    letter = args.answer_format == "letter"
    questions = load_questions(args.dataset, None, args.n, args.seed)
    if args.first > 0:
        questions = questions[: args.first]
    flags = {
        "student.max_tokens": 2 if letter else args.max_tokens,
        "privacy.review": "never",
        "files.learn_names": False,
    }
    base = config.load(flags)
    students = [s.strip() for s in (args.student or "").split(",") if s.strip()]
    students = students or [base.student.model]
    args.out.mkdir(parents=True, exist_ok=True)
    times: list[dict[str, Any]] = []
    # The teacher is the configured one, or the default student (the embedded teacher),
    # as in the accuracy benchmark: never the student measured here.
    teacher = base.teacher.model or base.student.model
    with Session(base.with_flags({"teacher.model": teacher, "student.model": students[0]})) as rt:
        gathered = gather_all(
            rt,
            teacher,
            questions,
            Records(args.out / "teacher.jsonl"),
            n=args.evidence_n,
            k=args.k,
            concurrency=1,
            log=lambda m: print(m, file=sys.stderr, flush=True),
            mode="evidence",
        )
        usable = [q for q in questions if (f := gathered.get(q.id)) is not None and f.evidence]
        if not usable:
            raise ValueError("no question has the teacher's evidence to answer with")
        for student in students:
            if student != rt.settings.student.model:
                rt.switch_student(student)
            # One untimed answer each way first: the template and grammar are built once.
            for way in WAYS:
                _answer(rt, gathered, usable[0], way, args)
            for i, q in enumerate(usable):
                for way in WAYS if i % 2 == 0 else reversed(WAYS):
                    seconds, attempt = _answer(rt, gathered, q, way, args)
                    times.append(
                        {
                            "student": student,
                            "id": q.id,
                            "way": way,
                            "seconds": seconds,
                            "gate_seconds": attempt.timings.get("gate", 0.0),
                            "went": attempt.gate.get("went", ""),
                        }
                    )
    (args.out / "times.jsonl").write_text("".join(json.dumps(t) + "\n" for t in times), "utf-8")
    summary = summarise(times, args) | {"teacher": teacher}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2), "utf-8")
    (args.out / "summary.md").write_text(render(summary) + "\n", "utf-8")
    return summary


def _answer(
    rt: Session,
    gathered: dict[str, AskResult | None],
    q: MCQuestion,
    way: str,
    args: argparse.Namespace,
) -> tuple[float, AskResult]:
    """One answer from a cold student (the system prompt read, as a new question finds
    it), timed."""
    found = gathered[q.id]
    assert found is not None
    attempt = dataclasses.replace(found, mode="evidence", k=args.k, timings={})
    rt.student.forget()
    rt.student.prime(answer.SYSTEM)
    letter = args.answer_format == "letter"
    started = time.perf_counter()
    pipeline.respond(
        rt,
        attempt,
        prompt=q.student_prompt(args.answer_format),
        choices=q.labels if letter else (),
        gate_setting=way,  # type: ignore[arg-type]
    )
    return time.perf_counter() - started, attempt


def summarise(times: Sequence[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for student in dict.fromkeys(t["student"] for t in times):
        by_way = {
            way: [t["seconds"] for t in times if t["student"] == student and t["way"] == way]
            for way in WAYS
        }
        plain, gated = by_way["always-evidence"], by_way["gate"]
        paired = [g - p for p, g in zip(plain, gated, strict=True)]  # same question, both ways
        gate_seconds = [
            t["gate_seconds"] for t in times if t["student"] == student and t["way"] == "gate"
        ]
        rows.append(
            {
                "student": student,
                "questions": len(plain),
                "ungated_mean": statistics.fmean(plain),
                "ungated_p50": statistics.median(plain),
                "gated_mean": statistics.fmean(gated),
                "gated_p50": statistics.median(gated),
                "cost": statistics.fmean(gated) / statistics.fmean(plain) - 1,
                "added_p50": statistics.median(paired),
                "gate_seconds_mean": statistics.fmean(gate_seconds),
            }
        )
    scope = {k: str(v) for k, v in vars(args).items()}
    return {"scope": scope, "rows": rows}


def render(summary: dict[str, Any]) -> str:
    scope = summary["scope"]
    lines = [
        f"## The gate's cost · {scope['dataset']} · "
        + (f"the first {scope['first']} of " if scope.get("first", "0") != "0" else "")
        + f"{scope['n']} questions · "
        f"{scope['answer_format']} answers · teacher {summary.get('teacher', '?')}",
        "",
        "| student | questions | s ungated mean | p50 | s gated mean | p50 "
        "| added p50 (paired) | gate's cost |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in summary["rows"]:
        lines.append(
            f"| {r['student']} | {r['questions']} | {r['ungated_mean']:.3f} "
            f"| {r['ungated_p50']:.3f} | {r['gated_mean']:.3f} | {r['gated_p50']:.3f} "
            f"| {r['added_p50']:+.3f} | {100 * r['cost']:+.1f} % |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
