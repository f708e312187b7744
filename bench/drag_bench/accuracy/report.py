"""The accuracy benchmark's summary (Wilson intervals, McNemar against the student
alone), its Markdown table and its plot."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from drag_bench.accuracy.questions import (
    GATED,
    STAGES,
    Z95,
)
from drag_bench.stats import paired, spread


def wilson(correct: int, total: int, z: float = Z95) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion (sound at small n and at 0 or 1)."""
    if total == 0:
        return (0.0, 0.0)
    p = correct / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return (max(0.0, centre - half), min(1.0, centre + half))


def columns(modes: Sequence[str], ks: Sequence[int]) -> list[tuple[str, int]]:
    """(mode, K) in the table's order: the student alone first (it has no K: 0)."""
    ordered = sorted(modes, key=lambda m: m != "none")
    return [(m, k) for m in ordered for k in ([0] if m == "none" else ks)]


def column_name(mode: str, k: int) -> str:
    return "none" if mode == "none" else f"{mode} K={k}"


def row_name(student: str, teacher: str, several_teachers: bool) -> str:
    return f"{student} · {teacher}" if several_teachers else student


def summarise(
    answers: Iterable[dict[str, Any]],
    teachers: Iterable[dict[str, Any]],
    rows: Sequence[tuple[str, str]],
    cols: Sequence[tuple[str, int]],
    ids: Sequence[str],
) -> dict[str, Any]:
    """The table and the side figures, from the records alone (a run or a file)."""
    wanted = set(ids)
    several = len({t for _, t in rows}) > 1
    kept = [a for a in answers if a["id"] in wanted]
    cells: dict[tuple[str, str, str, int], list[dict[str, Any]]] = {}
    for a in kept:
        cells.setdefault((a["student"], a["teacher"], a["mode"], a["k"]), []).append(a)
    gated = gate_triples(kept)
    table: dict[str, dict[str, Any]] = {}
    for student, teacher in rows:
        line: dict[str, Any] = {}
        for mode, k in cols:
            got = cells.get((student, teacher, mode, k), [])
            correct = sum(bool(a["correct"]) for a in got)
            lo, hi = wilson(correct, len(got))
            line[column_name(mode, k)] = {
                "correct": correct,
                "total": len(got),
                "accuracy": correct / len(got) if got else None,
                "ci95": [lo, hi],
                "unparsed": sum(a["choice"] is None for a in got),
            }
        mine = [
            a for (s, t, _, _), got in cells.items() if (s, t) == (student, teacher) for a in got
        ]
        tps = [a["tokens_per_second"] for a in mine if a.get("tokens_per_second")]
        table[row_name(student, teacher, several)] = {
            "student": student,
            "teacher": teacher,
            "cells": line,
            "against_none": _against_none(cells, student, teacher, cols),
            "gate": _gate(gated, student, teacher, cols),
            "student_tokens_per_second": round(statistics.fmean(tps), 2) if tps else None,
            "answer_seconds": _spread(a["seconds"] for a in mine if "seconds" in a),
        }
    per_teacher: dict[str, dict[str, Any]] = {}
    # The teachers of the rows; with no rows (--teacher-only), those of the records.
    for teacher in dict.fromkeys([t for _, t in rows] or [r["teacher"] for r in teachers]):
        every = [r for r in teachers if r["teacher"] == teacher and r["id"] in wanted]
        got = [r for r in every if not r.get("error")]  # the means: where it answered
        per_teacher[teacher] = {
            "questions": len(every),
            "failed": len(every) - len(got),
            "calls_per_question": _mean(r["calls"] for r in got),
            "prompt_tokens_per_question": _mean(r["prompt_tokens"] for r in got),
            "completion_tokens_per_question": _mean(r["completion_tokens"] for r in got),
            "seconds_per_question": _mean(
                r["seconds"] for r in got if r.get("served") == "teacher"
            ),
            # Stage latencies where the teacher itself worked (a cache hit has no teacher stages).
            "stages": {
                stage: spread
                for stage in STAGES
                if (
                    spread := _spread(
                        r["timings"][stage]
                        for r in got
                        if r.get("served") == "teacher" and stage in r.get("timings", {})
                    )
                )
            },
        }
    return {"rows": table, "columns": [column_name(m, k) for m, k in cols], "teachers": per_teacher}


def _against_none(
    cells: dict[tuple[str, str, str, int], list[dict[str, Any]]],
    student: str,
    teacher: str,
    cols: Sequence[tuple[str, int]],
) -> dict[str, dict[str, float | int]]:
    """Each column against the student alone, on the questions both answered: the
    discordant pairs and the exact McNemar p (drag_bench.stats)."""
    alone = {a["id"]: bool(a["correct"]) for a in cells.get((student, teacher, "none", 0), [])}
    out: dict[str, dict[str, float | int]] = {}
    for mode, k in cols:
        if mode == "none" or not alone:
            continue
        got = {a["id"]: bool(a["correct"]) for a in cells.get((student, teacher, mode, k), [])}
        both = [qid for qid in alone if qid in got]
        if both:
            out[column_name(mode, k)] = paired(
                [alone[q] for q in both], [got[q] for q in both]
            ).to_dict()
    return out


Triple = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]
Column = tuple[str, str, str, int]  # student, teacher, mode, K


def gate_triples(answers: Iterable[dict[str, Any]]) -> dict[Column, list[Triple]]:
    """Each gated answer with its twins, the same student's answer alone and its answer
    without the gate (same teacher, question and K): ``(alone, ungated, gated)`` per
    (student, teacher, gated mode, K), for the questions that have all three."""
    by_key = {(a["student"], a["teacher"], a["mode"], a["k"], a["id"]): a for a in answers}
    out: dict[Column, list[Triple]] = {}
    for (student, teacher, mode, k, qid), gated in by_key.items():
        if not mode.endswith(GATED):
            continue
        alone = by_key.get((student, teacher, "none", 0, qid))
        plain = by_key.get((student, teacher, mode.removesuffix(GATED), k, qid))
        if alone is not None and plain is not None:
            out.setdefault((student, teacher, mode, k), []).append((alone, plain, gated))
    return out


def _gate(
    triples: dict[Column, list[Triple]],
    student: str,
    teacher: str,
    cols: Sequence[tuple[str, int]],
) -> dict[str, dict[str, Any]]:
    """Each gated column against its ungated twin, on the questions all three answered:
    how often the gate used the context, how much of the ungated lift over the student
    alone it kept, and what it cost (mean seconds, gate included)."""
    out: dict[str, dict[str, Any]] = {}
    for mode, k in cols:
        got = triples.get((student, teacher, mode, k), []) if mode.endswith(GATED) else []
        if not got:
            continue
        n_alone, n_plain, n_gated = (sum(bool(t[i]["correct"]) for t in got) for i in range(3))
        lift = n_plain - n_alone
        out[column_name(mode, k)] = {
            "questions": len(got),
            "used_context": sum(g["gate"].get("went") == "evidence" for _, _, g in got),
            "correct_alone": n_alone,
            "correct_ungated": n_plain,
            "correct_gated": n_gated,
            # Of a lift only: where the context lowers the student, the gain counts.
            "lift_kept": round((n_gated - n_alone) / lift, 4) if lift > 0 else None,
            "gain_over_ungated": n_gated - n_plain,
            "seconds_ungated": _mean(p["seconds"] for _, p, _ in got),
            "seconds_gated": _mean(g["seconds"] + g["gate_seconds"] for _, _, g in got),
        }
    return out


def _spread(values: Iterable[float]) -> dict[str, float] | None:
    """Mean, median and 95th percentile, in seconds, and the count; None for no values."""
    got = list(values)
    if not got:
        return None
    return {k: round(v, 3) for k, v in spread(got).items()} | {"count": len(got)}


def _mean(values: Iterable[float]) -> float | None:
    got = list(values)
    return round(statistics.fmean(got), 2) if got else None


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def render(summary: dict[str, Any], title: str) -> str:
    cols = summary["columns"]
    lines = [
        f"## {title}",
        "",
        "Accuracy % [95 % CI]; rows: student, columns: context mode and K.",
        "",
        "| student | " + " | ".join(cols) + " |",
        "|---|" + "---:|" * len(cols),
    ]
    for name, row in summary["rows"].items():
        cells = []
        for col in cols:
            c = row["cells"][col]
            lo, hi = c["ci95"]
            cells.append(f"{_pct(c['accuracy'])} [{_pct(lo)}–{_pct(hi)}]" if c["total"] else "–")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if any(row.get("against_none") for row in summary["rows"].values()):
        lines += [
            "",
            "Against the student alone, on the same questions (exact McNemar test):",
            "",
            "| student | column | wrong→right | right→wrong | p |",
            "|---|---|---:|---:|---:|",
        ]
        for name, row in summary["rows"].items():
            for col, t in row.get("against_none", {}).items():
                lines.append(
                    f"| {name} | {col} | {t['wrong_to_right']} | {t['right_to_wrong']} "
                    f"| {t['mcnemar_p']:.3g} |"
                )
    if any(row.get("gate") for row in summary["rows"].values()):
        lines += [
            "",
            "The confidence gate against the same mode without it, on the same questions "
            "(lift kept, where the context lifts the student: gated minus alone over "
            "ungated minus alone; seconds: mean answer time, the gate's included):",
            "",
            "| student | column | context used | right: alone / ungated / gated "
            "| gated − ungated | lift kept | s ungated | s gated |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for name, row in summary["rows"].items():
            for col, g in row.get("gate", {}).items():
                kept = "–" if g["lift_kept"] is None else f"{100 * g['lift_kept']:.0f} %"
                lines.append(
                    f"| {name} | {col} | {g['used_context']}/{g['questions']} "
                    f"| {g['correct_alone']} / {g['correct_ungated']} / {g['correct_gated']} "
                    f"| {g['gain_over_ungated']:+d} | {kept} | {_seconds(g['seconds_ungated'])} "
                    f"| {_seconds(g['seconds_gated'])} |"
                )
    lines += [
        "",
        "| student | answers | unparsed | decode tok/s | answer s p50 | answer s p95 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, row in summary["rows"].items():
        total = sum(c["total"] for c in row["cells"].values())
        unparsed = sum(c["unparsed"] for c in row["cells"].values())
        tps = row["student_tokens_per_second"]
        spread = row.get("answer_seconds") or {}
        lines.append(
            f"| {name} | {total} | {unparsed} | {tps if tps is not None else '–'} "
            f"| {_seconds(spread.get('p50'))} | {_seconds(spread.get('p95'))} |"
        )
    lines += [
        "",
        "| teacher | questions | failed | calls/q | prompt tok/q | completion tok/q | s/q |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for teacher, t in summary["teachers"].items():
        values = [
            t["calls_per_question"],
            t["prompt_tokens_per_question"],
            t["completion_tokens_per_question"],
            t["seconds_per_question"],
        ]
        shown = " | ".join("–" if v is None else f"{v:g}" for v in values)
        lines.append(f"| {teacher} | {t['questions']} | {t['failed']} | {shown} |")
    stages = [(teacher, t["stages"]) for teacher, t in summary["teachers"].items() if t["stages"]]
    if stages:
        lines += [
            "",
            "Where the teacher's time goes, per question it answered (seconds):",
            "",
            "| teacher | stage | mean | p50 | p95 |",
            "|---|---|---:|---:|---:|",
        ]
        for teacher, spreads in stages:
            for stage, v in spreads.items():
                lines.append(
                    f"| {teacher} | {stage} | {v['mean']:.2f} | {v['p50']:.2f} | {v['p95']:.2f} |"
                )
    return "\n".join(lines)


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def plot(summary: dict[str, Any], path: Path, title: str) -> Path:
    """Accuracy against K (the paper's Figure 2): a colour per mode, a line style per
    student, the student alone as a grey level in its student's line style; bars are 95 %
    intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.8), dpi=120)
    colours = {"none": "#555555", "evidence": "#1f77b4", "graph": "#2ca02c", "combined": "#d62728"}
    lines = ["-", ":", "-.", "--"]
    ks = sorted({int(c.split("K=")[1]) for c in summary["columns"] if "K=" in c})
    step = (ks[-1] - ks[0]) / 60 if len(ks) > 1 else 0.05
    for i, (name, row) in enumerate(summary["rows"].items()):
        alone = row["cells"].get("none")
        if alone and alone["accuracy"] is not None:
            xs = [ks[0] - 3 * step, ks[-1] + 3 * step] if ks else [0, 1]
            level = 100 * alone["accuracy"]
            style = lines[i % len(lines)]
            ax.plot(xs, [level, level], style, color=colours["none"], label=f"{name}: none")
        for j, mode in enumerate(("evidence", "graph", "combined")):
            points = [
                (k, row["cells"][f"{mode} K={k}"])
                for k in ks
                if row["cells"].get(f"{mode} K={k}", {}).get("total")
            ]
            if not points:
                continue
            xs = [k + (j - 1) * step for k, _ in points]
            ys = [100 * c["accuracy"] for _, c in points]
            low = [y - 100 * c["ci95"][0] for y, (_, c) in zip(ys, points, strict=True)]
            high = [100 * c["ci95"][1] - y for y, (_, c) in zip(ys, points, strict=True)]
            ax.errorbar(
                xs,
                ys,
                yerr=[low, high],
                fmt="o",
                linestyle=lines[i % len(lines)],
                color=colours[mode],
                capsize=3,
                label=f"{name}: {mode}",
            )
    ax.set_xlabel("K (evidence statements / triples given to the student)")
    ax.set_ylabel("accuracy (%)")
    ax.set_xticks(ks or [0])
    ax.set_ylim(0, 100)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside, off the points
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


# -- the run ---------------------------------------------------------------------------------
