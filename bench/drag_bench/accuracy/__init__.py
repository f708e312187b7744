"""Accuracy benchmark: the DRAG effect measured the paper's way (arXiv 2506.01954,
Tables 2, 8, 11 and Figure 2): the student alone vs with the teacher's evidence, its
knowledge graph, or both, at several K.

    drag bench accuracy --dataset arc-c --n 100 --modes none,evidence,graph,combined \\
        --k 5,10,15,20 --seed 0

How a run goes:
1. The questions: a seeded sample of ``--n`` from the bundled subset of the dataset
   (or ``--data FILE``), optionally only some ``--subjects`` (MMLU).
2. The teacher's work, once per question and teacher: the real upload path (detector,
   egress guard, ledger), with up to ``--concurrency`` questions waiting on the teacher at
   once.  It is cached in the local store, so the mode and K sweeps, other students and a
   resumed run reuse it (this very question's work only, never a related question's).
3. Every student answers every question in every mode and K, serially (one local model).
   Each answer is a line in ``answers.jsonl`` as soon as it exists: an interrupted run
   started again with the same ``--out`` does only what is missing.
4. The table (rows: student, columns: mode x K, 95 % Wilson intervals) as Markdown and
   JSON, a PNG like the paper's Figure 2, teacher calls and tokens per question, and
   student decode speed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from assistant.base import config
from assistant.base.config import ORDERS
from assistant.base.errors import DragError, InputError
from assistant.core.results import AskResult
from assistant.core.session import Session
from assistant.drag import answer, gate
from drag_bench import arguments, split_choices
from drag_bench.accuracy import simulated
from drag_bench.accuracy.passes import (
    Records,
    answer_all,
    gather_all,
    teacher_record,
)
from drag_bench.accuracy.questions import (
    ANSWER_FORMATS,
    BENCH_MODES,
    DATASET_NAMES,
    DATASETS,
    GATED,
    STAGES,
    Z95,
    load_questions,
)
from drag_bench.accuracy.report import (
    column_name,
    columns,
    plot,
    render,
    row_name,
    summarise,
    wilson,
)
from drag_bench.mc import MCQuestion, extract_choice

__all__ = [
    "ANSWER_FORMATS",
    "DATASETS",
    "DATASET_NAMES",
    "STAGES",
    "Z95",
    "Records",
    "answer_all",
    "column_name",
    "columns",
    "gather_all",
    "load_questions",
    "main",
    "parse",
    "plot",
    "render",
    "rescore",
    "row_name",
    "run",
    "summarise",
    "teacher_record",
    "wilson",
]


def rescore(answers: Iterable[dict[str, Any]], questions: Sequence[MCQuestion]) -> None:
    """Read each stored reply again with the current extractor (answers.jsonl is kept as
    it was measured; the summary is what changes)."""
    by_id = {q.id: q for q in questions}
    for a in answers:
        q = by_id.get(a["id"])
        if q is not None:
            a["choice"] = extract_choice(a["reply"], q)
            a["correct"] = a["choice"] == q.answer


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"{what}: whole numbers separated by commas, not {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise InputError(f"{what}: one or more whole numbers, 1 or more")
    return sorted(set(values))


def _names(text: str | None) -> list[str]:
    return [v.strip() for v in (text or "").split(",") if v.strip()]


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = arguments("accuracy", __doc__)
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="arc-c")
    parser.add_argument("--data", type=Path, help="another file in the bundled JSONL form")
    parser.add_argument("--subjects", default="", help="MMLU subjects, comma-separated")
    parser.add_argument("--n", type=int, default=100, help="questions (seeded sample)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--modes",
        default="none,evidence,graph,combined",
        help="context modes, comma-separated; MODE+gate: with the confidence gate "
        f"({', '.join(BENCH_MODES)})",
    )
    parser.add_argument("--k", default="5,10,15,20", help="top K values, comma-separated")
    parser.add_argument(
        "--evidence-n",
        type=int,
        default=None,
        help="evidence asked of the teacher (default: pipeline.n, or the largest K if more)",
    )
    parser.add_argument("--student", help="student model(s), comma-separated")
    parser.add_argument("--teacher", help="teacher model(s) at the endpoint, comma-separated")
    parser.add_argument("--teacher-endpoint", help='"local" or an OpenAI-compatible base URL')
    parser.add_argument("--concurrency", type=int, default=4, help="questions at the teacher")
    parser.add_argument("--student-max-tokens", type=int, default=48)
    parser.add_argument(
        "--answer-format",
        choices=ANSWER_FORMATS,
        default="reason",
        help="reason: the letter, then a sentence, read back by the extractor; "
        "letter: the letter alone, enforced by a grammar",
    )
    parser.add_argument(
        "--order",
        choices=ORDERS,
        default=None,
        help="the student's prompt order (default: pipeline.order)",
    )
    parser.add_argument(
        "--repeat-threshold",
        type=float,
        default=None,
        help="cosine at which a statement counts as a repeat (default: pipeline.repeat_threshold)",
    )
    parser.add_argument(
        "--context-tokens",
        type=int,
        default=None,
        help="token budget of the student's context (default: pipeline.context_tokens)",
    )
    parser.add_argument(
        "--simulated-teacher",
        nargs="?",
        const="helpful",
        default="",
        metavar="KINDS",
        help="also SIMULATED teachers' rows (benchmark only): each teacher's statements plus "
        "one at a random rank in the top K; KINDS, comma-separated: helpful (the answer "
        "key, the default), misleading (a wrong option as the key), subtle (a sentence "
        "for that wrong option)",
    )
    parser.add_argument("--out", type=Path, default=None, help="run folder (resumes if it exists)")
    parser.add_argument("--fresh", action="store_true", help="start the run folder afresh")
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="run nothing: read the run's stored replies again with the current extractor",
    )
    parser.add_argument(
        "--teacher-only",
        action="store_true",
        help="only the teacher's work (cached for later runs); no student answers",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    try:
        out = run(args)
    except DragError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ValueError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    print((out / "summary.md").read_text("utf-8").rstrip())
    _stderr(f"\n{out}: summary.md, summary.json, accuracy.png, answers.jsonl (one line per answer)")
    return 0


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(args: argparse.Namespace, log: Callable[[str], None] = _stderr) -> Path:
    """The whole run; returns its folder (summary.md, summary.json, accuracy.png, …)."""
    modes = split_choices(args.modes, BENCH_MODES, "mode")
    ks = _ints(args.k, "--k")
    if args.n < 1:
        raise InputError("--n: 1 or more questions")
    subjects = _names(args.subjects)
    questions = load_questions(args.dataset, args.data, args.n, args.seed, subjects)
    flags: dict[str, Any] = {
        "student.max_tokens": 2 if args.answer_format == "letter" else args.student_max_tokens,
        "privacy.review": "never",  # public questions; a false detection would stop the run
    }
    for key, value in (
        ("pipeline.order", args.order),
        ("pipeline.repeat_threshold", args.repeat_threshold),
        ("pipeline.context_tokens", args.context_tokens),
    ):
        if value is not None:
            flags[key] = value
    if args.teacher_endpoint:
        flags["teacher.endpoint"] = args.teacher_endpoint
    flags["files.learn_names"] = False  # the user's own files do not change the figures
    base = config.load(flags)
    # Enough statements asked for the largest K (the paper asks 20 and uses 5..20).
    evidence_n = args.evidence_n or max(base.pipeline.n, max(ks))
    if max(ks) > evidence_n:
        raise InputError(
            f"--k {max(ks)} is more than the {evidence_n} statements asked (--evidence-n)"
        )
    students = _names(args.student) or [base.student.model]
    teachers = _names(args.teacher) or [base.teacher.model or base.student.model]
    needs_teacher = any(m != "none" for m in modes)

    out = args.out or Path("bench-results") / f"accuracy-{args.dataset}-n{args.n}-seed{args.seed}"
    scope = {
        "dataset": args.dataset,
        "data": str(args.data) if args.data else None,
        "subjects": subjects,
        "n": args.n,
        "seed": args.seed,
        "evidence_n": evidence_n,
        "student_max_tokens": args.student_max_tokens,
        "endpoint": base.teacher.endpoint,
        # The student's side: a change here makes other answers, in another folder.
        "answer_format": args.answer_format,
        "order": base.pipeline.order,
        "repeat_threshold": base.pipeline.repeat_threshold,
        "context_tokens": base.pipeline.context_tokens,
        "answer_prompt": answer.PROMPT_VERSION,
        # letters read from the first step's distribution (Student.probe), since issue 49
        "choice_reading": "probe-v1" if args.answer_format == "letter" else None,
    }
    if any(m.endswith(GATED) for m in modes):  # older runs, without the gate, still resume
        scope |= {
            "gate_margin": gate.MARGIN,
            # the rule a gated letter is answered with (a margin before issue 49)
            "gate_choice_rule": f"plausible:{gate.PLAUSIBLE:g}",
            "gate_probe_tokens": gate.PROBE_TOKENS,
        }
    asked = args.simulated_teacher
    kinds = split_choices(asked, simulated.KINDS, "simulation") if asked else []
    if kinds == ["helpful"]:  # the answer key alone, as issue 32's runs added it
        scope["simulated_teacher"] = "key-statement-v1"
    elif kinds:
        scope["simulated_teacher"] = {"version": simulated.VERSION, "kinds": kinds}
    out.mkdir(parents=True, exist_ok=True)
    run_file = out / "run.json"
    if args.fresh:
        for name in ("run.json", "answers.jsonl"):
            (out / name).unlink(missing_ok=True)
    if run_file.exists():
        before = json.loads(run_file.read_text("utf-8"))
        if before != scope:
            keys = scope.keys() | before.keys()  # a setting only one of them has differs too
            changed = sorted(k for k in keys if before.get(k) != scope.get(k))
            raise InputError(
                f"{out} holds a run with other settings ({', '.join(changed)}): "
                "use another --out, or --fresh to start it again"
            )
    run_file.write_text(json.dumps(scope, indent=2), "utf-8")
    records = Records(out / "answers.jsonl")
    if records.answers:
        log(f"resuming: {len(records.answers)} answers already in {out}")

    cols = columns(modes, ks)
    # A row per (student, teacher), teachers outermost: the order the work is done in.
    simulations = [simulated.name(t, kind) for t in teachers for kind in kinds]
    rows = (
        []
        if args.teacher_only and not args.rescore
        else [(s, t) for t in [*teachers, *simulations] for s in students]
    )
    if args.rescore:
        rescore(records.answers, questions)
    else:
        for teacher in teachers:
            settings = base.with_flags({"teacher.model": teacher, "student.model": students[0]})
            with Session(settings) as rt:
                gathered: dict[str, AskResult | None] = {}
                pending = [  # questions some answer of this teacher's row is still missing for
                    q
                    for q in questions
                    if any(
                        not records.answered(s, t, q.id, m, k)
                        for t in [teacher, *(simulated.name(teacher, kind) for kind in kinds)]
                        for s in students
                        for m, k in cols
                        if m != "none"
                    )
                ]
                if needs_teacher and pending:
                    gathered = gather_all(
                        rt,
                        teacher,
                        pending,
                        records,
                        n=evidence_n,
                        k=max(ks),
                        concurrency=args.concurrency,
                        log=log,
                        # the graph only where a mode reads it
                        mode="combined" if any(map(answer.uses_graph, modes)) else "evidence",
                    )
                if args.teacher_only:
                    continue
                for student in students:
                    if student != rt.settings.student.model:
                        rt.switch_student(student)
                    answer_all(
                        rt,
                        student,
                        teacher,
                        questions,
                        gathered,
                        cols,
                        records,
                        log,
                        answer_format=args.answer_format,
                    )
                    for kind in kinds:
                        keyed: dict[str, AskResult | None] = {
                            q.id: simulated.with_statement(found, q, min(ks), args.seed, kind)
                            for q in questions
                            if (found := gathered.get(q.id)) is not None and found.mode != "none"
                        }
                        answer_all(
                            rt,
                            student,
                            simulated.name(teacher, kind),
                            questions,
                            keyed,
                            cols,
                            records,
                            log,
                            answer_format=args.answer_format,
                        )

    ids = [q.id for q in questions]
    summary = summarise(records.answers, records.teachers, rows, cols, ids)
    title = (
        f"DRAG accuracy · {DATASET_NAMES[args.dataset]}"
        + (f" ({', '.join(subjects)})" if subjects else "")
        + f" · {len(questions)} questions · N={evidence_n} · seed {args.seed}"
    )
    summary.update({"title": title, "scope": scope})
    (out / "summary.json").write_text(json.dumps(summary, indent=2), "utf-8")
    table = render(summary, title)
    (out / "summary.md").write_text(table + "\n", "utf-8")
    if rows:
        plot(summary, out / "accuracy.png", title)
    return out


if __name__ == "__main__":
    sys.exit(main())
