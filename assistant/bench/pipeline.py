"""DRAG pipeline benchmark on ARC-Challenge: per-stage latency, teacher cost, student
speed and multiple-choice accuracy by context mode, all from one run.

The teacher's work (evidence, ranking, graph) is done once per question; the
student then answers the same question in every mode, so the modes are
compared on identical context.

    python -m assistant.bench.pipeline --questions 20
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from assistant import config, pipeline
from assistant.bench import split_choices
from assistant.bench.mc import MCQuestion, bundled_arc, extract_choice, load_arc
from assistant.bench.stats import percentile
from assistant.config import MODES
from assistant.errors import DragError

STAGES = ("evidence", "rank_evidence", "graph", "rank_triples")


def run_question(
    rt: pipeline.Runtime, q: MCQuestion, modes: list[str], n: int, k: int
) -> dict[str, Any]:
    with rt.own_placeholders():  # each question is a conversation of its own
        return _run_question(rt, q, modes, n, k)


def _run_question(
    rt: pipeline.Runtime, q: MCQuestion, modes: list[str], n: int, k: int
) -> dict[str, Any]:
    needs_teacher = any(m != "none" for m in modes)
    gathered = pipeline.gather(rt, q.text(), mode="combined" if needs_teacher else "none", n=n, k=k)
    record: dict[str, Any] = {
        "id": q.id,
        "answer_key": q.answer,
        "timings": dict(gathered.timings),
        "teacher": {
            "calls": len(gathered.teacher.get("calls", [])),
            "prompt_tokens": gathered.teacher.get("prompt_tokens", 0),
            "completion_tokens": gathered.teacher.get("completion_tokens", 0),
        },
        "evidence": len(gathered.evidence),
        "triples": len(gathered.triples),
        "modes": {},
    }
    for mode in modes:
        attempt = dataclasses.replace(gathered, mode=mode, timings={})  # type: ignore[arg-type]
        pipeline.respond(rt, attempt, prompt=q.student_prompt())
        choice = extract_choice(attempt.answer, q)
        record["modes"][mode] = {
            "reply": attempt.answer,
            "choice": choice,
            "correct": choice == q.answer,
            "seconds": attempt.timings.get("answer", 0.0),
            "prompt_tokens": attempt.student["prompt_tokens"],
            "completion_tokens": attempt.student["completion_tokens"],
            "tokens_per_second": attempt.student["tokens_per_second"],
        }
    return record


def summarise(records: list[dict[str, Any]], modes: list[str]) -> dict[str, Any]:
    stages = {s: [r["timings"][s] for r in records if s in r["timings"]] for s in STAGES}
    answer_s = [m["seconds"] for r in records for m in r["modes"].values()]
    tps = [
        m["tokens_per_second"]
        for r in records
        for m in r["modes"].values()
        if m["tokens_per_second"]
    ]
    out: dict[str, Any] = {
        "questions": len(records),
        "latency_s": {
            name: {
                "mean": statistics.fmean(v),
                "p50": percentile(v, 0.5),
                "p95": percentile(v, 0.95),
            }
            for name, v in {**stages, "student_answer": answer_s}.items()
            if v
        },
        "teacher_per_question": {
            key: statistics.fmean(r["teacher"][key] for r in records)
            for key in ("calls", "prompt_tokens", "completion_tokens")
        },
        "teacher_calls_max": max((r["teacher"]["calls"] for r in records), default=0),
        "student_decode_tok_s": {
            "mean": statistics.fmean(tps) if tps else 0.0,
            "p50": percentile(tps, 0.5) if tps else 0.0,
        },
        "accuracy": {},
    }
    for mode in modes:
        rows = [r["modes"][mode] for r in records if mode in r["modes"]]
        correct = sum(m["correct"] for m in rows)
        out["accuracy"][mode] = {
            "correct": correct,
            "total": len(rows),
            "accuracy": correct / len(rows) if rows else 0.0,
            "unparsed": sum(m["choice"] is None for m in rows),
        }
    return out


def render(summary: dict[str, Any], header: str) -> str:
    lines = [f"## {header}", "", "| stage | mean s | p50 s | p95 s |", "|---|---:|---:|---:|"]
    for name, v in summary["latency_s"].items():
        lines.append(f"| {name} | {v['mean']:.2f} | {v['p50']:.2f} | {v['p95']:.2f} |")
    t = summary["teacher_per_question"]
    lines += [
        "",
        f"Teacher per question: {t['calls']:.2f} calls (max {summary['teacher_calls_max']}), "
        f"{t['prompt_tokens']:.0f} prompt + {t['completion_tokens']:.0f} completion tokens",
        f"Student decode: {summary['student_decode_tok_s']['mean']:.1f} tok/s mean, "
        f"{summary['student_decode_tok_s']['p50']:.1f} p50",
        "",
        "| mode | correct | accuracy | unparsed |",
        "|---|---:|---:|---:|",
    ]
    for mode, a in summary["accuracy"].items():
        lines.append(
            f"| {mode} | {a['correct']}/{a['total']} | {a['accuracy']:.1%} | {a['unparsed']} |"
        )
    return "\n".join(lines)


def rescore(path: Path, questions: list[MCQuestion]) -> int:
    """Recompute choices and figures from the replies stored in a run's JSONL."""
    by_id = {q.id: q for q in questions}
    records = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    for record in records:
        q = by_id[record["id"]]
        for outcome in record["modes"].values():
            outcome["choice"] = extract_choice(outcome["reply"], q)
            outcome["correct"] = outcome["choice"] == q.answer
    modes = list(records[0]["modes"]) if records else []
    summary = summarise(records, modes)
    print(render(summary, f"{path.name}, rescored: {len(records)} questions"))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m assistant.bench.pipeline",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", type=Path, default=None, help="ARC JSONL (default: bundled)")
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--n", type=int, default=None, help="evidence asked (default: pipeline.n)")
    parser.add_argument("--k", type=int, default=None, help="top K used (default: pipeline.k)")
    parser.add_argument("--student-max-tokens", type=int, default=48)
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument(
        "--rescore",
        type=Path,
        metavar="JSONL",
        help="re-read the answers of an earlier run with the current extractor; print figures",
    )
    args = parser.parse_args(argv)
    try:
        modes = split_choices(args.modes, MODES, "mode")
    except ValueError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    if args.rescore:
        return rescore(args.rescore, load_arc(args.data or bundled_arc()))
    try:
        # Every question goes to the teacher: the cache would hide its latency.
        settings = config.load(
            {
                "student.max_tokens": args.student_max_tokens,
                "store.cache": False,
                "privacy.review": "never",  # public questions; a false detection would stop it
            }
        )
        questions = load_arc(args.data or bundled_arc())[: args.questions]
        n, k = args.n or settings.pipeline.n, args.k or settings.pipeline.k
        args.out.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        per_q = args.out / f"pipeline-{stamp}.jsonl"
        records = []
        with pipeline.Runtime(settings) as rt, per_q.open("w", encoding="utf-8") as fh:
            for i, q in enumerate(questions, start=1):
                record = run_question(rt, q, modes, n, k)
                records.append(record)
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
                fh.flush()
                marks = " ".join(
                    f"{m}:{'✓' if r['correct'] else '✗'}" for m, r in record["modes"].items()
                )
                print(
                    f"[{i}/{len(questions)}] {q.id} teacher {record['teacher']['calls']} calls, "
                    f"{sum(record['timings'].values()):.0f} s · {marks}",
                    file=sys.stderr,
                    flush=True,
                )
            student_name, teacher_name = (
                rt.student.path.name,
                (rt.teacher_model_path.name if rt.teacher_is_local else settings.teacher.model),
            )
    except DragError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    summary = summarise(records, modes)
    summary.update({"student": student_name, "teacher": teacher_name, "n": n, "k": k})
    header = (
        f"DRAG pipeline on {len(records)} ARC-Challenge questions · student {student_name} · "
        f"teacher {teacher_name} · N={n} K={k}"
    )
    (args.out / f"pipeline-{stamp}.json").write_text(json.dumps(summary, indent=2), "utf-8")
    print(render(summary, header))
    print(f"\nper-question records: {per_q}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
