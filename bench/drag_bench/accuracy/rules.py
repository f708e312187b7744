"""Gate rules for letter answers, scored on a run's stored readings (issue 49).

    python -m drag_bench.accuracy.rules DEV_RUN [--out FOLDER]      # the search, on dev
    python -m drag_bench.accuracy.rules TEST_RUN --rule plausible:0.3  # one rule, any split

A gated answer's record keeps the student's distribution over the letters both ways
(alone and with the context: ``gate.choices_alone`` / ``gate.choices_with_context``),
so every rule below can be scored from one run, for every teacher row at once: the
real (embedded) teacher and the simulated helpful, misleading and subtle ones.  The
student alone is the run's ``none`` answer; the answer without a gate is the gate's
reading with the context (the prompt an ungated answer reads, read the same way).

The rules (``a``: the letter the student picks alone, ``b``: with the context):
- ``margin:m``: the context when the student is surer of ``b`` with the context than of
  ``a`` alone by more than ``m`` (log-probability; a negative ``m``: unless it is surer
  alone by more than its size; the gate before issue 49 used -0.2);
- ``plausible:t``: the context when ``a`` = ``b``, or when the student alone gives ``b``
  at least ``t`` times the probability it gives ``a`` (a teacher may move the student
  to a letter it found plausible, not to one it had ruled out);
- ``unsure:p``: the context when ``a`` = ``b``, or when the student alone gives ``a``
  less than ``p``;
- ``top:r``: the context when ``b`` is among the ``r`` letters the student alone finds
  most likely;
- ``never``: the student alone, always.

This scorer is written apart from ``assistant.drag.gate`` (it reads the letters from
the records, and its rules are its own code), so that it can judge the gate.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drag_bench.accuracy import simulated
from drag_bench.accuracy.margins import DEV_SETS, _records
from drag_bench.accuracy.questions import GATED
from drag_bench.stats import paired

MARGINS = (-1.0, -0.5, -0.2, -0.1, 0.0, 0.1, 0.2, 0.5, 1.0)
RATIOS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)
UNSURE = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
TOPS = (2, 3)

# The targets of issue 49, per student, in points of the row's questions.
MISLEAD_LOSS = 3.0  # misleading rows: gated >= alone - 3 points, and above ungated (p < 0.05)
LIFT_KEPT = 0.85  # helpful row: (gated - alone) >= 85 % of (ungated - alone)
EMBEDDED_LOSS = 2.0  # the real teacher: gated >= alone - 2 points
ALPHA = 0.05

Dist = Mapping[str, float | None]


@dataclass(frozen=True)
class Rule:
    family: str
    value: float = 0.0

    @property
    def name(self) -> str:
        return self.family if self.family == "never" else f"{self.family}:{self.value:g}"

    def uses_context(self, item: Item) -> bool:
        alone, context, a, b = item.alone, item.context, item.a, item.b
        if self.family == "never":
            return False
        if self.family == "margin":
            return _lp(context, b) > _lp(alone, a) + self.value
        if a == b:
            return True
        if self.family == "plausible":
            return _lp(alone, b) - _lp(alone, a) >= math.log(self.value)
        if self.family == "unsure":
            return math.exp(_lp(alone, a)) < self.value
        if self.family == "top":
            ranked = sorted(sorted(alone), key=lambda letter: -_lp(alone, letter))
            return b in ranked[: int(self.value)]
        raise ValueError(f"unknown rule family {self.family!r}")


def parse_rule(text: str) -> Rule:
    family, _, value = text.partition(":")
    if family == "never" and not value:
        return Rule("never")
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if family not in ("margin", "plausible", "unsure", "top") or not math.isfinite(number):
        raise ValueError(f"a rule is margin:M, plausible:T, unsure:P, top:R or never, not {text!r}")
    if family != "margin" and number <= 0:
        raise ValueError(f"{family}: a value above 0, not {value}")
    return Rule(family, number)


def grid() -> list[Rule]:
    """Every rule the search tries (its size is published with its result)."""
    return [
        *(Rule("margin", m) for m in MARGINS),
        *(Rule("plausible", t) for t in RATIOS),
        *(Rule("unsure", p) for p in UNSURE),
        *(Rule("top", r) for r in TOPS),
        Rule("never"),
    ]


def _lp(dist: Dist, letter: str) -> float:
    value = dist.get(letter)
    return -math.inf if value is None else value


def _pick(dist: Dist) -> str:
    """The most likely letter (the first of a tie, in the letters' order)."""
    return max(sorted(dist), key=lambda letter: _lp(dist, letter))


@dataclass(frozen=True)
class Item:
    """One question of one row: the answer key, the run's answers alone and without the
    gate, and the gate's two readings (the letter it read each way, and the
    distributions, rounded to 4 places in the record)."""

    key: str
    alone_right: bool  # the run's answer without context
    ungated_right: bool | None  # the run's answer with the context, no gate (if run)
    a: str  # the letter read alone
    b: str  # the letter read with the context
    alone: Dist
    context: Dist


Row = tuple[str, str, str, int]  # student, teacher, gated mode, K


def rows(records: Iterable[dict[str, Any]]) -> dict[Row, list[Item]]:
    """Per student, teacher row and gated column: the questions whose gated answer kept
    both readings (and whose answer alone the run has)."""
    answers = [r for r in records if r.get("kind") == "answer"]
    by_key = {(a["student"], a["teacher"], a["mode"], a["k"], a["id"]): a for a in answers}
    out: dict[Row, list[Item]] = {}
    for g in answers:
        reading = g.get("gate") or {}
        if not g["mode"].endswith(GATED) or not reading.get("choices_alone"):
            continue
        alone = by_key.get((g["student"], g["teacher"], "none", 0, g["id"]))
        if alone is None:
            continue
        plain = by_key.get(
            (g["student"], g["teacher"], g["mode"].removesuffix(GATED), g["k"], g["id"])
        )
        dist_alone, dist_context = reading["choices_alone"], reading["choices_with_context"]
        item = Item(
            g["answer_key"],
            bool(alone["correct"]),
            None if plain is None else bool(plain["correct"]),
            reading.get("reply_alone", "").strip() or _pick(dist_alone),
            reading.get("reply_with_context", "").strip() or _pick(dist_context),
            dist_alone,
            dist_context,
        )
        out.setdefault((g["student"], g["teacher"], g["mode"], g["k"]), []).append(item)
    return out


def score(items: Sequence[Item], rule: Rule) -> dict[str, Any]:
    """One row under ``rule``: right alone / ungated / gated, the context used, and the
    paired comparisons of the gated answers with the student alone and ungated.  Ungated
    is the gate's reading with the context (the ungated answer's prompt, read the same
    way); where the run also answered without the gate, how often the two differ is
    counted, as is the gate's reading alone against the run's answer alone."""
    alone = [i.alone_right for i in items]
    plain = [i.b == i.key for i in items]
    ways = [rule.uses_context(i) for i in items]
    gated = [(i.b if use else i.a) == i.key for i, use in zip(items, ways, strict=True)]
    n_alone, n_plain, n_gated = sum(alone), sum(plain), sum(gated)
    lift = n_plain - n_alone
    return {
        "questions": len(items),
        "used_context": sum(ways),
        "alone": n_alone,
        "ungated": n_plain,
        "gated": n_gated,
        "lift_kept": (n_gated - n_alone) / lift if lift > 0 else None,
        "alone_reading_differs": sum((i.a == i.key) != i.alone_right for i in items),
        "ungated_reading_differs": sum(
            (i.b == i.key) != i.ungated_right for i in items if i.ungated_right is not None
        ),
        "against_alone": paired(alone, gated).to_dict(),
        "against_ungated": paired(plain, gated).to_dict(),
    }


def targets(kind: str, row: Mapping[str, Any]) -> dict[str, bool | None]:
    """Which of issue 49's targets a scored row meets (``kind``: its simulation, "" for
    the real teacher); None where a target does not apply: "above ungated" where the
    teacher did not lower the student (nothing to protect from), "lift kept" where it
    did not lift it (nothing to keep)."""
    n = row["questions"]
    points = (row["gated"] - row["alone"]) * 100 / n if n else 0.0
    if kind in ("misleading", "subtle"):
        above = row["gated"] > row["ungated"] and row["against_ungated"]["mcnemar_p"] < ALPHA
        return {
            "no worse than alone - 3": points >= -MISLEAD_LOSS,
            "above ungated": above if row["ungated"] < row["alone"] else None,
        }
    if kind == "helpful":
        kept = row["lift_kept"]
        return {"lift kept >= 85 %": None if kept is None else kept >= LIFT_KEPT}
    return {"no worse than alone - 2": points >= -EMBEDDED_LOSS}


def search(records: Iterable[dict[str, Any]], rules: Sequence[Rule]) -> list[dict[str, Any]]:
    """Every rule on every row, with the targets each meets, best first (most targets
    met, then the fewest questions lost against the student alone in the misleading and
    subtle rows)."""
    by_row = rows(records)
    out: list[dict[str, Any]] = []
    for rule in rules:
        scored = []
        for (student, teacher, mode, k), items in sorted(by_row.items()):
            row = score(items, rule)
            kind = simulated.kind_of(teacher)
            row |= {"student": student, "teacher": teacher, "column": f"{mode} K={k}"}
            row["kind"] = kind or "real"
            row["targets"] = targets(kind, row)
            scored.append(row)
        met = sum(v is True for r in scored for v in r["targets"].values())
        total = sum(v is not None for r in scored for v in r["targets"].values())
        out.append({"rule": rule.name, "met": met, "of": total, "rows": scored})
    out.sort(key=lambda r: (-r["met"], -_slack(r["rows"])))
    return out


def pick(result: Sequence[Mapping[str, Any]]) -> str:
    """The rule the product takes from a search (the criterion was written on
    2026-11-27 with 7 of the 8 rows of the MMLU dev search seen, so it is the dev
    split's; the test split judges it): among the rules that keep at least 85 % of every
    helpful row's lift and leave every real-teacher row no worse than alone - 2 points,
    the one with the most right answers in the misleading and subtle rows together;
    "" when none qualifies."""

    def qualifies(r: Mapping[str, Any]) -> bool:
        return all(
            row["targets"].get(name) is not False
            for row in r["rows"]
            for name in ("lift kept >= 85 %", "no worse than alone - 2")
        )

    kept = [r for r in result if qualifies(r)]
    return max(kept, key=lambda r: _slack(r["rows"]))["rule"] if kept else ""


def _slack(scored: Sequence[Mapping[str, Any]]) -> int:
    return sum(
        int(r["gated"] - r["alone"]) for r in scored if r["kind"] in ("misleading", "subtle")
    )


def render(result: Sequence[Mapping[str, Any]], title: str) -> str:
    head = f"## {title}\n\n{len(result)} rules tried, every row scored with each.\n"
    lines = [head, "| rule | targets met | " + " | ".join(_row_names(result)) + " |"]
    lines.append("|---|---:|" + "---:|" * len(_row_names(result)))
    for r in result:
        cells = [_cell(row) for row in r["rows"]]
        lines.append(f"| {r['rule']} | {r['met']}/{r['of']} | " + " | ".join(cells) + " |")
    lines.append(
        "\nEach cell: right alone / ungated / gated (context used), ✗ where the row "
        'misses a target (a target that does not apply, "above ungated" where the '
        'teacher did not lower the student or "lift kept" where it did not lift it, '
        "is neither met nor missed). Rows: student · teacher (real: the run's own teacher)."
    )
    return "\n".join(lines) + "\n"


def _row_names(result: Sequence[Mapping[str, Any]]) -> list[str]:
    if not result:
        return []
    many = len({r["column"] for r in result[0]["rows"]}) > 1
    return [
        f"{_short(r['student'])} · {r['kind']}" + (f" · {r['column']}" if many else "")
        for r in result[0]["rows"]
    ]


def _short(model: str) -> str:
    return next((size for size in ("0.5b", "1.5b", "3b", "7b") if size in model), model)


def _cell(row: Mapping[str, Any]) -> str:
    mark = " ✗" if False in row["targets"].values() else ""
    return f"{row['alone']} / {row['ungated']} / {row['gated']} ({row['used_context']}){mark}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="drag_bench.accuracy.rules", description=__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--rule", default="", help="score this rule only (any split)")
    parser.add_argument("--out", type=Path, default=None, help="write rules.md and rules.json")
    args = parser.parse_args(argv)
    try:
        scope = json.loads((args.folder / "run.json").read_text("utf-8"))
        records = _records(args.folder)
        chosen = [parse_rule(args.rule)] if args.rule else None
    except (OSError, ValueError) as exc:
        print(f"rules: error: {exc}", file=sys.stderr)
        return 2
    if chosen is None and (scope.get("dataset") not in DEV_SETS or scope.get("data")):
        print(
            f"rules: error: {args.folder} is a run on "
            f"{scope.get('data') or scope.get('dataset')!r}: rules are searched on a "
            f"development split only ({', '.join(DEV_SETS)}); --rule scores one",
            file=sys.stderr,
        )
        return 2
    result = search(records, chosen or grid())
    if not result or not result[0]["rows"]:
        print("rules: error: no gated answer with both readings in this run", file=sys.stderr)
        return 2
    title = f"Gate rules on {scope.get('dataset')} ({args.folder.name})"
    text = render(result, title)
    if chosen is None:
        chosen_rule = pick(result) or "none qualifies"
        text += f"\nChosen by the stated criterion (`rules.pick`): {chosen_rule}.\n"
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "rules.md").write_text(text, "utf-8")
        (args.out / "rules.json").write_text(json.dumps(result, indent=2), "utf-8")
    print(text.rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
