"""Student speed, side by side: load time, prompt evaluation (prefill), time to the
first token and decode speed of each named model, in one run on one machine.

    drag bench speed --students qwen2.5-coder-0.5b-instruct,qwen2.5-coder-1.5b-instruct
    drag bench speed --ask 5      # whole questions with the configured teacher instead

``--ask N`` asks N bundled ARC-Challenge dev questions through ``pipeline.ask`` as the
app does (default settings: the local teacher, combined mode), once with the graph built
before the answer and once after it (``pipeline.graph_timing``), each with an empty cache
of its own.  Per question: first answer token, answer complete, and done (graph cached).
Then the same questions once more with ``store.offline`` on, answered from that cache:
the offline path.  In the same run, the same loaded student reads the standard prompt
below, so that each first token can be set against what the hardware allows: the
offline answer's prompt tokens divided by the student's raw prefill speed.

Each run sends the same prompt shape the DRAG student gets: a system prompt, a bundled
ARC-Challenge question and 15 statements of context (about 450 tokens), with the run's
number first so that no cached prefix is reused.  Prefill is timed on a reply held to one
token; decode on a free reply of up to ``--decode-tokens``.  Figures are medians over
``--runs``, and each model is compared with the first one named.  Nothing else should
run on the machine meanwhile: two llama.cpp processes on the same cores slow each other
far more than twice.
"""

from __future__ import annotations

import functools
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from assistant.base.errors import DragError
from assistant.drag import answer
from assistant.models import llamabuild, modelfiles
from assistant.models.student import Student
from drag_bench import arguments
from drag_bench.mc import bundled, bundled_arc, load_arc


@functools.cache
def _drag_prompt() -> tuple[str, tuple[str, ...]]:
    """A bundled ARC question, and 15 other questions' stems standing in for evidence:
    real sentences, about 15 tokens each."""
    items = load_arc(bundled_arc())
    statements = tuple(q.question.split("?")[0][:160] + "." for q in items[1:16])
    return items[0].student_prompt(), statements


def prompt(run: int) -> list[dict[str, str]]:
    """The student's prompt in the DRAG shape; its run number defeats prefix reuse."""
    question, statements = _drag_prompt()
    messages = answer.build_messages(question, statements, [], "evidence")
    messages[0]["content"] = f"Session {run}.\n" + messages[0]["content"]
    return messages


def measure(name: str, runs: int, decode_tokens: int, threads: int) -> dict[str, Any]:
    path, _spec = modelfiles.resolve(name)
    started = time.perf_counter()
    student = Student(path, threads=threads)
    load = time.perf_counter() - started
    try:
        first, prefill, prompt_tokens, decode = [], [], 0, []
        for run in range(runs):
            messages = prompt(run)
            gen = student.chat(messages, max_tokens=1)
            first.append(gen.prompt_seconds)
            # The content as one text; the template adds a few more.
            prompt_tokens = student.count_tokens("".join(m["content"] for m in messages))
            prefill.append(prompt_tokens / gen.prompt_seconds if gen.prompt_seconds else 0.0)
            free = prompt(1000 + run)
            free[1]["content"] += "\nExplain your answer in detail."
            long = student.chat(free, max_tokens=decode_tokens)
            decode.append(long.tokens_per_second)
        cpu, features = student.build.name, llamabuild.features()
    finally:
        student.close()
    return {
        "model": name,
        "cpu": cpu,  # the CPU code llama.cpp ran (a portable build's variant)
        "features": features,
        "file": path.name,
        "size_mb": round(path.stat().st_size / 1e6),
        "load_s": round(load, 2),
        "prompt_tokens": prompt_tokens,
        "first_token_s": round(statistics.median(first), 3),
        "prefill_tok_s": round(statistics.median(prefill), 1),
        "decode_tok_s": round(statistics.median(decode), 1),
        "runs": runs,
    }


def render(rows: Sequence[dict[str, Any]]) -> str:
    base = rows[0]
    lines = [
        "| model | file MB | load s | prompt tokens | first token s | prefill tok/s "
        "| decode tok/s | prefill × | decode × |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        pre = r["prefill_tok_s"] / base["prefill_tok_s"] if base["prefill_tok_s"] else 0.0
        dec = r["decode_tok_s"] / base["decode_tok_s"] if base["decode_tok_s"] else 0.0
        lines.append(
            f"| {r['model']} | {r['size_mb']} | {r['load_s']:.2f} | {r['prompt_tokens']} "
            f"| {r['first_token_s']:.2f} | {r['prefill_tok_s']:.1f} | {r['decode_tok_s']:.1f} "
            f"| {pre:.2f} | {dec:.2f} |"
        )
    lines.append("")
    lines.append(f"Medians of {base['runs']} runs; × = against {base['model']}.")
    return "\n".join(lines)


class _Clock:
    """Seconds since it was made, at the first of each named moment."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.marks: dict[str, float] = {}

    def mark(self, name: str) -> None:
        self.marks.setdefault(name, time.perf_counter() - self.started)

    def text(self, _piece: str) -> None:
        self.mark("first_token")

    def stage(self, stage: str, _result: object) -> None:
        self.mark(stage)


def _timed_asks(rt: Any, questions: Sequence[str], label: str) -> list[dict[str, float]]:
    """Each question through ``pipeline.ask``: its moments, and the student's prompt."""
    from assistant.core import pipeline

    rows: list[dict[str, float]] = []
    for question in questions:
        clock = _Clock()
        result = pipeline.ask(rt, question, on_text=clock.text, progress=clock.stage)
        clock.mark("done")
        row = dict(clock.marks)
        student = result.student or {}
        row["prompt_tokens"] = float(student.get("prompt_tokens", 0))
        row["prompt_seconds"] = float(student.get("prompt_seconds", 0.0))
        rows.append(row)
        print(f"{label}: {row}", file=sys.stderr, flush=True)
    return rows


def _p50(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    keys = ("first_token", "answered", "done", "prompt_tokens", "prompt_seconds")
    return {k: round(statistics.median(r.get(k, r["done"]) for r in rows), 2) for k in keys}


def _raw_speed(student: Student, runs: int = 3) -> dict[str, float]:
    """The loaded student's raw prefill and decode speed on the standard prompt."""
    student.forget()
    prefill, decode = [], []
    for run in range(runs):
        messages = prompt(2000 + run)
        gen = student.chat(messages, max_tokens=1)
        tokens = student.count_tokens("".join(m["content"] for m in messages))
        prefill.append(tokens / gen.prompt_seconds if gen.prompt_seconds else 0.0)
        free = prompt(3000 + run)
        free[1]["content"] += "\nExplain your answer in detail."
        decode.append(student.chat(free, max_tokens=64).tokens_per_second)
    return {
        "prefill_tok_s": round(statistics.median(prefill), 1),
        "decode_tok_s": round(statistics.median(decode), 1),
    }


def ask_timings(count: int) -> dict[str, dict[str, Any]]:
    """Seconds to the first token, to the answer and to the end, per graph timing; then
    the same questions offline, and the student's raw speed."""
    import tempfile

    from assistant.base import config
    from assistant.core import pipeline
    from assistant.core.session import Session

    questions = [q.question for q in load_arc(bundled("arc_challenge_dev200.jsonl"))[-count:]]
    out: dict[str, dict[str, Any]] = {}
    for timing in ("before-answer", "after-answer"):
        with tempfile.TemporaryDirectory() as tmp:
            settings = config.load(
                {
                    "pipeline.graph_timing": timing,
                    "privacy.review": "never",
                    "store.database": str(Path(tmp) / "drag.db"),
                }
            )
            with Session(settings) as rt:
                # Loaded before the clock starts, as in the app after its first question.
                pipeline.ask(rt, "What is two plus two?", mode="evidence", n=3, k=3)
                out[timing] = _p50(_timed_asks(rt, questions, timing))
                if timing == "after-answer":  # the cache now holds every question's work
                    rt.settings = rt.settings.with_flags({"store.offline": True})
                    out["offline"] = _p50(_timed_asks(rt, questions, "offline"))
                    out["student"] = _raw_speed(rt.student)
    return out


def render_ask(timings: dict[str, dict[str, Any]], count: int) -> str:
    lines = [
        "| path | first token s p50 | answer complete s p50 | done s p50 "
        "| answer prompt tokens p50 |",
        "|---|---:|---:|---:|---:|",
    ]
    paths = {
        "before-answer": "online, graph before the answer",
        "after-answer": "online, graph after the answer",
        "offline": "offline, the same questions from the cache",
    }
    for key, name in paths.items():
        t = timings[key]
        lines.append(
            f"| {name} | {t['first_token']} | {t['answered']} | {t['done']} "
            f"| {t['prompt_tokens']:.0f} |"
        )
    before, after = timings["before-answer"], timings["after-answer"]
    offline, student = timings["offline"], timings["student"]
    lines.append("")
    lines.append(
        f"{count} questions each. The student (same build, threads and process): prefill "
        f"{student['prefill_tok_s']} tok/s, decode {student['decode_tok_s']} tok/s."
    )
    if after["answered"]:
        lines.append(
            f"The answer is complete {before['answered'] / after['answered']:.2f}x sooner "
            "with the graph after it."
        )
    reading = offline["prompt_tokens"] / student["prefill_tok_s"] if student["prefill_tok_s"] else 0
    if reading:
        first = offline["first_token"]
        lines.append(
            f"Offline, the answer's prompt ({offline['prompt_tokens']:.0f} tokens p50, the "
            "system prompt's included, which llama.cpp keeps from the question before) takes "
            f"{reading:.2f} s to read whole at the raw prefill speed; the first token came "
            f"{first} s after the question ({first / reading:.2f}x that)."
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments("speed", __doc__)
    parser.add_argument(
        "--students",
        default="qwen2.5-coder-0.5b-instruct,qwen2.5-coder-1.5b-instruct",
        help="models (manifest names or .gguf paths), comma-separated",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--decode-tokens", type=int, default=96)
    parser.add_argument("--threads", type=int, default=0, help="0 = every CPU")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--ask", type=int, default=0, help="time N whole questions instead (see above)"
    )
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.students.split(",") if n.strip()]
    if args.ask <= 0 and (not names or args.runs < 1 or args.decode_tokens < 2):
        print(
            "bench: error: one or more --students, --runs >= 1, --decode-tokens >= 2",
            file=sys.stderr,
        )
        return 2
    figures: Any
    try:
        if args.ask > 0:
            figures = ask_timings(args.ask)
            table = render_ask(figures, args.ask)
        else:
            figures = [measure(n, args.runs, args.decode_tokens, args.threads) for n in names]
            table = render(figures)
    except DragError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(table)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
