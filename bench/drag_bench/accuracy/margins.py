"""The confidence gate's margin, tried on a development run's stored readings.

    python -m drag_bench.accuracy.margins RUN_FOLDER [--margins 0,0.1,0.2,0.5]
        [--alone-sure 0.4,0.5,0.6]
    python -m drag_bench.accuracy.margins RUN_FOLDER --after-choice [--margins=-0.2,0]

A gated answer's record keeps both readings (the choice and how sure the student was,
with the context and alone), so every margin can be scored from one run without the
model.  This is how ``assistant.drag.gate.MARGIN_CHOICES`` was chosen before issue 49
(since then ``drag_bench.accuracy.rules`` searches other rules too): on development
splits only (``--dataset arc-c-dev``, ``medmcqa-dev``, ``mmlu-dev``); the folder's
run.json says which.
With ``--after-choice`` a run on any split (a test split, once the margin is chosen) is
scored at the margins given, as its gated column would read at each: the context used,
right alone, without the gate and with it, the lift kept and the exact McNemar p against
the student alone.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from assistant.drag import gate
from drag_bench.accuracy.report import gate_triples
from drag_bench.stats import paired

DEV_SETS = ("arc-c-dev", "medmcqa-dev", "mmlu-dev")
DEV_MARGINS = "0,0.05,0.1,0.2,0.3,0.5,1"


def _records(folder: Path) -> list[dict[str, Any]]:
    plain, packed = folder / "answers.jsonl", folder / "answers.jsonl.gz"
    if plain.exists():
        text = plain.read_text("utf-8")
    else:
        with gzip.open(packed, "rt", encoding="utf-8") as fh:
            text = fh.read()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _read(gate: dict[str, Any]) -> bool:
    """Whether the gate read the student for this answer ("auto" in runs before issue
    49, when it always did; "gate" since)."""
    return gate.get("ran", gate.get("setting")) in ("auto", "gate")


def _sure(value: float | None) -> float:
    return -math.inf if value is None else value


def table(
    records: Iterable[dict[str, Any]],
    margins: Sequence[float],
    alone_sure: Sequence[float] = (),
) -> list[dict[str, Any]]:
    """Per row (student, teacher) and gated column: questions right for each margin,
    against the student alone and the ungated answer; and for each probability in
    ``alone_sure``, right with the other rule tried: the context unless the student
    alone gives its letter more than that probability and is at least as sure of it as
    with the context (it reads how sure the student is on its own, not a difference)."""
    answers = [r for r in records if r.get("kind") == "answer"]
    out = []
    for (student, teacher, mode, k), triples in gate_triples(answers).items():
        # Only answers the gate read (a question without teacher work had no gate).
        got = [t for t in triples if _read(t[2]["gate"])]
        gated = [g for _, _, g in got]
        row: dict[str, Any] = {
            "student": student,
            "teacher": teacher,
            "column": f"{mode} K={k}",
            "questions": len(got),
            "alone": sum(alone["correct"] for alone, _, _ in got),
            "ungated": sum(plain["correct"] for _, plain, _ in got),
            "by_margin": {},
            "by_alone_sure": {},
        }
        for m in margins:
            row["by_margin"][f"{m:g}"] = _right(gated, partial(_surer_by, m))
        for p in alone_sure:
            row["by_alone_sure"][f"{p:g}"] = _right(gated, partial(_unless_sure_alone, p))
        out.append(row)
    return out


def after_choice(
    records: Iterable[dict[str, Any]], margin: float, as_run: float | None = None
) -> list[dict[str, Any]]:
    """Per row (student, teacher) and gated column, every question with its three
    answers: the gated one as it would be at ``margin`` (a question the gate did not read,
    with no teacher work or a failed reading, keeps its recorded answer; at ``as_run``,
    the run's own margin, every answer is the recorded one: the stored readings are
    rounded to 4 places, and a near tie could read the other way); the context used, the
    right answers, the lift kept and the paired comparison against the student alone."""
    answers = [r for r in records if r.get("kind") == "answer"]
    out = []
    for (student, teacher, mode, k), triples in gate_triples(answers).items():
        used, gated_right = 0, []
        for _, _, g in triples:
            if margin == as_run or not _read(g["gate"]) or g["gate"].get("error"):
                gated_right.append(bool(g["correct"]))  # no reading: the answer as recorded
                used += g["gate"].get("went") == "evidence"
                continue
            way = _way(g["gate"], partial(_surer_by, margin))
            used += way == "reply_with_context"
            gated_right.append(g["gate"][way].strip() == g["answer_key"])
        alone_right = [bool(a["correct"]) for a, _, _ in triples]
        n_alone, n_plain = sum(alone_right), sum(bool(p["correct"]) for _, p, _ in triples)
        lift = n_plain - n_alone
        out.append(
            {
                "student": student,
                "teacher": teacher,
                "column": f"{mode} K={k}",
                "margin": margin,
                "questions": len(triples),
                "used_context": used,
                "alone": n_alone,
                "ungated": n_plain,
                "gated": sum(gated_right),
                "lift_kept": (sum(gated_right) - n_alone) / lift if lift > 0 else None,
                "against_alone": paired(alone_right, gated_right).to_dict(),
            }
        )
    return out


def _surer_by(margin: float, alone: float, context: float) -> bool:
    return context > alone + margin


def _unless_sure_alone(p: float, alone: float, context: float) -> bool:
    return not (alone > math.log(p) and alone >= context)


def _right(gated: Iterable[dict[str, Any]], use_context: Callable[[float, float], bool]) -> int:
    """Questions right when the gate's way is ``use_context(sure alone, sure with the
    context)``, each a log-probability; None (nothing written that way) is the least
    sure there is."""
    return sum(a["gate"][_way(a["gate"], use_context)].strip() == a["answer_key"] for a in gated)


def _way(gate: dict[str, Any], use_context: Callable[[float, float], bool]) -> str:
    alone, context = _sure(gate["confidence_alone"]), _sure(gate["confidence_with_context"])
    return "reply_with_context" if use_context(alone, context) else "reply_alone"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="drag_bench.accuracy.margins", description=__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument(
        "--margins",
        default=None,
        help="on a dev run, default 0,0.05,0.1,0.2,0.3,0.5,1; with --after-choice, default "
        "the product's margin for letters (assistant.drag.gate.MARGIN_CHOICES)",
    )
    parser.add_argument(
        "--alone-sure",
        default="",
        help="probabilities P: also score 'the context unless the student alone is "
        "more than P sure of its letter, and no less sure than with the context'",
    )
    parser.add_argument(
        "--after-choice",
        action="store_true",
        help="a run on any split, scored at each margin already chosen: the context used, "
        "right alone / ungated / gated, the lift kept and p against the student alone",
    )
    args = parser.parse_args(argv)
    try:
        scope = json.loads((args.folder / "run.json").read_text("utf-8"))
        records = _records(args.folder)
        if args.margins is None:
            args.margins = f"{gate.MARGIN_CHOICES:g}" if args.after_choice else DEV_MARGINS
        margins = [float(v) for v in args.margins.split(",") if v.strip()]
        alone_sure = [float(v) for v in args.alone_sure.split(",") if v.strip()]
        if any(not 0 < p < 1 for p in alone_sure):
            raise ValueError("--alone-sure takes probabilities between 0 and 1")
    except (OSError, ValueError) as exc:
        print(f"margins: error: {exc}", file=sys.stderr)
        return 2
    if scope.get("answer_format") != "letter":
        print("margins: error: only letter answers keep readings to score", file=sys.stderr)
        return 2
    if "gate_choice_rule" in scope:
        print(
            "margins: error: this run's letters were gated by a rule, not a margin: "
            "score it with python -m drag_bench.accuracy.rules",
            file=sys.stderr,
        )
        return 2
    if args.after_choice:
        if alone_sure:
            print("margins: error: --after-choice scores margins only", file=sys.stderr)
            return 2
        # The letter answers' margin as run (gate_margin alone before the two existed).
        as_run = scope.get("gate_margin_choices", scope.get("gate_margin"))
        _print_after_choice(records, margins, as_run)
        return 0
    if scope.get("dataset") not in DEV_SETS or scope.get("data"):
        print(
            f"margins: error: {args.folder} is a run on "
            f"{scope.get('data') or scope.get('dataset')!r}: the margin is chosen on a "
            f"development split only ({', '.join(DEV_SETS)})",
            file=sys.stderr,
        )
        return 2
    heads = [f"m={m:g}" for m in margins] + [f"alone>{p:g}" for p in alone_sure]
    print("| student · teacher | column | n | alone | ungated | " + " | ".join(heads) + " |")
    print("|---|---|---:|---:|---:|" + "---:|" * len(heads))
    for row in table(records, margins, alone_sure):
        scores = [*row["by_margin"].values(), *row["by_alone_sure"].values()]
        cells = " | ".join(str(v) for v in scores)
        print(
            f"| {row['student']} · {row['teacher']} | {row['column']} | {row['questions']} "
            f"| {row['alone']} | {row['ungated']} | {cells} |"
        )
    return 0


def _print_after_choice(
    records: list[dict[str, Any]], margins: Sequence[float], as_run: float | None
) -> None:
    print(
        "| student · teacher | column | margin | context used | right: alone / ungated / gated "
        "| lift kept | p against alone |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for margin in margins:
        for row in after_choice(records, margin, as_run):
            kept = "–" if row["lift_kept"] is None else f"{100 * row['lift_kept']:.0f} %"
            pair = row["against_alone"]
            p = pair["mcnemar_p"]
            shown = "<0.001" if p < 0.001 else f"{p:.3f}"
            print(
                f"| {row['student']} · {row['teacher']} | {row['column']} "
                f"| {margin:g}{' (as run)' if margin == as_run else ''} "
                f"| {row['used_context']}/{row['questions']} "
                f"| {row['alone']} / {row['ungated']} / {row['gated']} | {kept} "
                f"| {shown} ({pair['wrong_to_right']}↑ {pair['right_to_wrong']}↓) |"
            )


if __name__ == "__main__":
    sys.exit(main())
