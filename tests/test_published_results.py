"""The benchmark results the README cites (docs/results/*) agree with themselves.

Every cell of each ``summary.json`` and every paired count against the student alone is
recounted from the gzipped per-answer records by plain counting, and each McNemar p by
the binomial formula: no code of ``drag_bench`` is used, so a fault in the
benchmark's own counting would show here.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results"
# Accuracy runs: a summary recounted from its answers (the gate's cost folders keep
# times.jsonl instead, recounted by their own test).
FOLDERS = sorted(
    p.parent for p in RESULTS.glob("*/summary.json") if (p.parent / "answers.jsonl.gz").exists()
)


def _answers(folder: Path) -> list[dict[str, Any]]:
    with gzip.open(folder / "answers.jsonl.gz", "rt", encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    return [r for r in records if r["kind"] == "answer"]


def _mcnemar(b: int, c: int) -> float:
    """Exact two-sided McNemar p: the binomial test of min(b, c) in b + c at 1/2."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def test_there_are_published_results() -> None:
    assert {"arc-c-n200", "medmcqa-n200", "mmlu-n342"} <= {f.name for f in FOLDERS}


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_the_summary_is_recounted_from_the_answers(folder: Path) -> None:
    answers = _answers(folder)
    summary = json.loads((folder / "summary.json").read_text("utf-8"))
    assert answers and all(a["correct"] == (a["choice"] == a["answer_key"]) for a in answers)
    for row in summary["rows"].values():
        by_column: dict[str, dict[str, bool]] = {}
        for a in answers:
            if (a["student"], a["teacher"]) == (row["student"], row["teacher"]):
                column = "none" if a["mode"] == "none" else f"{a['mode']} K={a['k']}"
                assert a["id"] not in by_column.setdefault(column, {}), "answered twice"
                by_column[column][a["id"]] = a["correct"]
        assert set(by_column) == set(row["cells"])
        for column, cell in row["cells"].items():
            got = by_column[column]
            assert (cell["correct"], cell["total"]) == (sum(got.values()), len(got)), column
        alone = by_column["none"]
        assert set(row["against_none"]) == set(row["cells"]) - {"none"}
        for column, pair in row["against_none"].items():
            both = [q for q in alone if q in by_column[column]]
            w2r = sum(not alone[q] and by_column[column][q] for q in both)
            r2w = sum(alone[q] and not by_column[column][q] for q in both)
            assert (pair["wrong_to_right"], pair["right_to_wrong"]) == (w2r, r2w), column
            assert pair["mcnemar_p"] == pytest.approx(_mcnemar(w2r, r2w)), column
        mine = [
            a for a in answers if (a["student"], a["teacher"]) == (row["student"], row["teacher"])
        ]
        for column, g in row.get("gate", {}).items():  # the confidence gate's table
            mode, k = column.split(" K=")
            gated = {a["id"]: a for a in mine if a["mode"] == mode and a["k"] == int(k)}
            plain = by_column[f"{mode.removesuffix('+gate')} K={k}"]
            both = [q for q in gated if q in plain and q in alone]
            assert g["questions"] == len(both), column
            assert g["used_context"] == sum(
                gated[q]["gate"].get("went") == "evidence" for q in both
            )
            right = (
                sum(alone[q] for q in both),
                sum(plain[q] for q in both),
                sum(gated[q]["correct"] for q in both),
            )
            assert (g["correct_alone"], g["correct_ungated"], g["correct_gated"]) == right
            lift = right[1] - right[0]  # kept of a lift: none where the context lowers it
            want = None if lift <= 0 else (right[2] - right[0]) / lift
            assert g["lift_kept"] == (None if want is None else pytest.approx(want, abs=1e-4))


PRIVACY = sorted(p.parent for p in RESULTS.glob("privacy-*/**/privacy-summary.json"))


def test_there_are_published_privacy_results() -> None:
    assert len(PRIVACY) >= 3


@pytest.mark.parametrize("folder", PRIVACY, ids=lambda p: str(p.relative_to(RESULTS)))
def test_the_privacy_summary_is_recounted_from_its_items(folder: Path) -> None:
    """Units, units leaked (any form, and whole), refusals and changed controls per
    method, counted again from the per-item records by plain counting."""
    summary = json.loads((folder / "privacy-summary.json").read_text("utf-8"))
    lines = (folder / "privacy-items.jsonl").read_text("utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    assert set(summary) == {r["method"] for r in records}
    for method, s in summary.items():
        mine = [r for r in records if r["method"] == method]
        units = [v for r in mine for v in r["values"] if v.get("present", True)]
        assert s["items"] == len(mine)
        assert s["units"] == len(units)
        assert s["unit_leaked"] == sum(1 for v in units if v["unit"])
        assert s["unit_leaked_whole"] == sum(1 for v in units if v["unit"] == "whole")
        assert s["blocked"] == sum(1 for r in mine if r["blocked"])
        assert s["control_changed"] == sum(1 for r in mine if r["control"] and r["changed"])


README = RESULTS.parent.parent / "README.md"


def _headline(label: str) -> str:
    """The README's headline row whose first cell starts with ``label``."""
    rows = [ln for ln in README.read_text("utf-8").splitlines() if ln.startswith(f"| {label}")]
    assert len(rows) == 1, (label, rows)
    return rows[0]


def _units(folder: Path, method: str) -> tuple[float, float, list[float]]:
    """Units leaked and sent whole, as shares of the units present, and the reader's
    seconds per question, counted from the stored per-item records."""
    present = leaked = whole = 0
    reads = []
    for line in (folder / "privacy-items.jsonl").read_text("utf-8").splitlines():
        record = json.loads(line)
        if record["method"] != method:
            continue
        units = [v for v in record["values"] if v["type"] == "UNIT" and v["present"]]
        present += len(units)
        leaked += sum(1 for v in units if v["unit"])
        whole += sum(1 for v in units if v["unit"] == "whole")
        reads += [record["seconds"]["read"]] if "read" in record["seconds"] else []
    return 100 * leaked / present, 100 * whole / present, sorted(reads)


def _p50_p95(reads: list[float]) -> tuple[float, float]:
    """The median (the mean of the middle two of an even count) and the 95th
    percentile (the nearest rank) of sorted seconds."""
    n = len(reads)
    p50 = (reads[n // 2 - 1] + reads[n // 2]) / 2 if n % 2 == 0 else reads[n // 2]
    return p50, reads[math.ceil(0.95 * n) - 1]


def test_the_readme_headline_figures_are_counted_from_the_stored_results() -> None:
    """Each figure of the README's headline table, counted again from the per-item
    records in docs/results (plain counting: no code of the benchmark)."""
    unseen = RESULTS / "privacy-figures" / "pupa-unseen-95-reader-v4"
    units, whole, reads = _units(unseen, "full+reader")
    records = [
        json.loads(line)
        for line in (unseen / "privacy-items.jsonl").read_text("utf-8").splitlines()
    ]
    with_reader = [r for r in records if r["method"] == "full+reader"]
    refused = sum(1 for r in with_reader if r["blocked"])
    assert f"| {units:.2f} % ({whole:.2f} % whole; {refused} of {len(with_reader)} refused) |" in (
        _headline("PUPA-TNB real queries")
    )
    units, whole, _ = _units(unseen, "full")
    assert f"| {units:.2f} % ({whole:.2f} % whole) |" in _headline("the same, detector alone")
    p50, p95 = _p50_p95(reads)
    assert f"| {p50:.1f} s / {p95:.1f} s |" in _headline("the reader's time")
    controls = [
        json.loads(line)
        for line in (
            RESULTS / "privacy-reader" / "mmlu-controls-120-179-reader-v4" / "privacy-items.jsonl"
        )
        .read_text("utf-8")
        .splitlines()
    ]
    shipped = [r for r in controls if r["method"] == "full+reader"]
    changed = sum(1 for r in shipped if r["control"] and (r["changed"] or r["blocked"]))
    refused = sum(1 for r in shipped if r["blocked"])
    row = _headline("MMLU controls 120–179")
    assert f"| {changed} / {len(shipped)} |" in row and f"({refused} refused" in row
    answers = _answers(RESULTS / "arc-c-n200")
    big = [a for a in answers if a["student"] == "qwen2.5-coder-1.5b-instruct"]

    def share(mode: str, k: int) -> float:
        cell = [a["correct"] for a in big if a["mode"] == mode and (mode == "none" or a["k"] == k)]
        return 100 * sum(cell) / len(cell)

    row = _headline("ARC-Challenge, 200 test questions")
    assert f"| {share('none', 0):.1f} % → {share('evidence', 10):.1f} % |" in row


def test_the_readme_is_a_users_guide_of_at_most_400_lines() -> None:
    """Issue 31: the guide stays short; the full accounts live in docs/, and every page
    it links to is there."""
    text = README.read_text("utf-8")
    assert len(text.splitlines()) <= 400
    for target in re.findall(r"\]\(((?:docs|models|packaging)/[^)#]+)", text):
        assert (README.parent / target).exists(), target


DOCS = RESULTS.parent / "benchmarks.md"


def _cell_numbers(cell: str) -> list[float]:
    """The accuracies a table cell shows: "22.5 (13/17, p 0.59)" -> [22.5];
    "31.5 / 30.0 / 30.0" -> [31.5, 30.0, 30.0]."""
    head = cell.split("(")[0].replace("*", "")
    return [float(x) for x in re.findall(r"\d+\.\d", head)]


@pytest.mark.parametrize("folder", ["arc-c-n200", "medmcqa-n200", "mmlu-n342"])
def test_the_docs_accuracy_tables_are_their_folders_summaries(folder: str) -> None:
    """docs/benchmarks.md: the first table after the link to a results folder shows, per
    student, that folder's accuracies in its columns' order (one decimal)."""
    text = DOCS.read_text("utf-8")
    after = text[text.index(f"](results/{folder})") :]
    summary = json.loads((RESULTS / folder / "summary.json").read_text("utf-8"))
    for size in ("0.5B", "1.5B"):
        row = next(ln for ln in after.splitlines() if ln.startswith(f"| {size} |"))
        shown = [n for cell in row.strip("|").split("|")[1:] for n in _cell_numbers(cell)]
        (cells,) = [
            r["cells"]
            for r in summary["rows"].values()
            if r["student"] == f"qwen2.5-coder-{size.lower()}-instruct"
        ]
        want = [round(100 * cells[c]["correct"] / cells[c]["total"], 1) for c in summary["columns"]]
        assert shown == want, (folder, size)


# The privacy tables of docs/benchmarks.md that stand on a results folder: the table
# after the folder's link, one row per method, in this order and with these labels.
PRIVACY_TABLES = {
    "privacy-figures/pupa-unseen-95-reader-v3": {
        "full (detector alone)": "full",
        "full without public": "full -public",
        "full without value-parts": "full -value-parts",
        "full + reader, reader-v3": "full+reader",
        "full + reader without public": "full+reader -public",
        "full + reader without value-parts": "full+reader -value-parts",
    },
    "privacy-figures/world-streets/pupa-unseen-95": {
        "full (detector alone)": "full",
        "full without the world's streets": "full -world-streets",
        "full + reader": "full+reader",
        "full + reader without the world's streets": "full+reader -world-streets",
    },
    "privacy-figures/more-streets/pupa-unseen-95": {
        "full (detector alone)": "full",
        "full without the more street forms": "full -more-streets",
        "full + reader": "full+reader",
        "full + reader without the more street forms": "full+reader -more-streets",
    },
    "privacy-figures/pupa-unseen-95-reader-v4": {
        "full (detector alone)": "full",
        "full + reader, reader-v4": "full+reader",
    },
    "privacy-reader/reader-v6/pupa-unseen-95": {
        "full (detector alone)": "full",
        "full + reader, reader-v6, not kept": "full+reader (grammar fallback)",
        "full + reader, the same text again under the grammar (drag's)": (
            "full+reader (grammar again)"
        ),
    },
    "privacy-reader/values-v2/pupa-unseen-95-head": {
        "full (detector alone)": "full",
        "full + reader, the head": "full+reader",
    },
    "privacy-reader/values-v2/pupa-unseen-95-values-v2": {
        "full (detector alone)": "full",
        "full + reader, values-v2, not kept": "full+reader",
    },
    "privacy-figures/pupa-unseen-95-lookup": {
        "full (detector alone)": "full",
        "full + reader, drafting from the question (drag's)": "full+reader (decoding lookup)",
        "full + reader, a token at a time": "full+reader (decoding plain)",
    },
    "privacy-figures/pupa-unseen-95-reader-v2": {
        "full (detector alone)": "full",
        "full + reader (Qwen2.5-Coder-0.5B), reader-v2": "full+reader",
        "Presidio defaults": "presidio-default",
    },
    "privacy-figures/pupa-unseen-95": {
        "full (detector alone)": "full",
        "full + reader, reader-v1 (2026-11-26)": "full+reader",
        "Presidio defaults": "presidio-default",
    },
    "privacy-figures/pupa-seen-142": {
        "full (detector alone)": "full",
        "Presidio defaults": "presidio-default",
    },
}


def _privacy_row(label: str, s: dict[str, Any]) -> str:
    leaked, units = s["by_category"].get("PERSON", (0, 0))
    return (
        f"| {label} | {s['units']} | {100 * s['unit_leak_rate']:.2f} % "
        f"| {100 * s['unit_whole_rate']:.2f} % | {leaked}/{units} "
        f"| {s['blocked']} | {100 * s['kept_words']:.1f} % |"
    )


@pytest.mark.parametrize("folder", sorted(PRIVACY_TABLES))
def test_the_docs_privacy_tables_are_their_folders_summaries(folder: str) -> None:
    """docs/benchmarks.md: the table after the link to a privacy results folder shows,
    per method, that folder's summary (units, leaked, whole, PERSON, refused, words
    kept), and PUPA's own redaction beside them."""
    text = DOCS.read_text("utf-8")
    after = text[text.index(f"](results/{folder})") :]
    table = after[: after.index("\n\n", after.index("\n|"))]
    summary = json.loads((RESULTS / folder / "privacy-summary.json").read_text("utf-8"))
    for label, method in PRIVACY_TABLES[folder].items():
        assert _privacy_row(label, summary[method]) in table.splitlines(), (folder, label)
    s = next(iter(summary.values()))
    reference = (
        f"| PUPA's own redaction (a strong LLM) | {s['units']} "
        f"| {100 * s['reference_unit_leak_rate']:.2f} % | {100 * s['reference_whole_rate']:.2f} % "
        f"| – | – | {100 * s['reference_kept_words']:.1f} % |"
    )
    assert reference in table.splitlines(), folder


_DRAFTING = "full+reader (decoding lookup)"


def _read_seconds(folder: str, method: str, under: str = "privacy-figures") -> dict[str, float]:
    """Each item's reader seconds for ``method`` in a privacy-figures folder (or one
    ``under`` another folder of the results; an item whose reading failed has none)."""
    lines = (RESULTS / under / folder / "privacy-items.jsonl").read_text("utf-8")
    rows = [json.loads(line) for line in lines.splitlines()]
    return {
        r["id"]: r["seconds"]["read"]
        for r in rows
        if r["method"] == method and "read" in r["seconds"]
    }


def test_the_docs_reader_decoding_times_are_counted_from_the_records() -> None:
    """Issue 48: the reader's seconds with each decoding, side by side in one run, as
    docs/benchmarks.md gives them (readings, p50, p95, the sum, and how many readings
    drafting made faster), counted again from the per-item records."""
    folder = "privacy-figures/pupa-unseen-95-lookup"
    text = DOCS.read_text("utf-8")
    after = text[text.index(f"](results/{folder})") :]
    table = after[after.index("| the reader's decoding |") :]
    table = table[: table.index("\n\n")]
    lookup = _read_seconds("pupa-unseen-95-lookup", _DRAFTING)
    plain = _read_seconds("pupa-unseen-95-lookup", "full+reader (decoding plain)")
    both = sorted(set(lookup) & set(plain))
    faster = sum(1 for i in both if lookup[i] < plain[i])
    for label, seconds, than in (
        ("drafting from the question (drag's)", lookup, f"{faster} of {len(both)}"),
        ("a token at a time", plain, "–"),
    ):
        reads = sorted(seconds.values())
        p50, p95 = _p50_p95(reads)
        row = f"| {label} | {len(reads)} | {p50:.2f} s | {p95:.1f} s | {sum(reads):.0f} s |"
        assert f"{row} {than} |" in table.splitlines(), label
    ratio = sum(lookup[i] for i in both) / sum(plain[i] for i in both)
    assert f"**{ratio:.3f}×**" in after[: after.index("\n#")]  # in the same section


def test_the_docs_reader_v4_times_are_counted_from_the_records() -> None:
    """Issue 48: reader-v4's readings against reader-v3's decoded the same way (the
    decoding run's drafting rows), as docs/benchmarks.md gives them."""

    v3 = _read_seconds("pupa-unseen-95-lookup", _DRAFTING)
    v4 = _read_seconds("pupa-unseen-95-reader-v4", "full+reader")
    both = sorted(set(v3) & set(v4))
    before, after = sorted(v3[i] for i in both), sorted(v4[i] for i in both)
    (p50, p95), (p50_before, p95_before) = _p50_p95(after), _p50_p95(before)
    text = DOCS.read_text("utf-8")
    assert f"On the {len(both)} queries both read, its\nreadings took" in text
    assert (
        f"readings took {sum(after):,.0f} s in all\nagainst {sum(before):,.0f} s "
        f"({sum(after) / sum(before):.2f}×; p50 {p50:.2f} s against {p50_before:.2f} s, "
        f"p95 {p95:.1f} s against {p95_before:.1f} s"
    ) in text


_V6 = "full+reader (grammar fallback)"
_AGAIN = "full+reader (grammar again)"
# The unseen readings whose traces the reader-v6 change was written from.
_TRACED = ("PUPA_TNB/23", "PUPA_TNB/163", "PUPA_TNB/200")


def _controls_changed(records: list[dict[str, Any]], method: str) -> str:
    """ "changed / all (refused)" of one method's control records."""
    rows = [r for r in records if r["method"] == method]
    moved = sum(1 for r in rows if r["changed"] or r["blocked"])
    refused = sum(1 for r in rows if r["blocked"])
    return f"{moved} / {len(rows)} ({refused})"


def _control_reads(records: list[dict[str, Any]], method: str) -> list[float]:
    """The reader's seconds of one method's control records (a failed reading has none)."""
    return [
        r["seconds"]["read"] for r in records if r["method"] == method and "read" in r["seconds"]
    ]


def test_the_docs_reader_v6_times_are_counted_from_the_records() -> None:
    """Issue 48: reader-v6 against the same reader reading a broken free reply's text
    again under the grammar, side by side in one run, as docs/benchmarks.md gives them
    (readings, p50, p95, the sum, how many reader-v6 made faster; all queries and
    without the three whose traces the change came from), and the MMLU controls
    120–179 (changed, and refused, by each)."""
    under = "privacy-reader/reader-v6"
    text = DOCS.read_text("utf-8")
    after = text[text.index(f"](results/{under}/pupa-unseen-95)") :]
    section = after[: after.index("\n#")]
    v6 = _read_seconds("pupa-unseen-95", _V6, under)
    again = _read_seconds("pupa-unseen-95", _AGAIN, under)
    for skip, label in (((), "all"), (_TRACED, "without the three traced")):
        new = {i: t for i, t in v6.items() if i not in skip}
        old = {i: t for i, t in again.items() if i not in skip}
        both = sorted(set(new) & set(old))
        faster = sum(1 for i in both if new[i] < old[i])
        ratio = sum(new[i] for i in both) / sum(old[i] for i in both)
        for how, seconds, than in (
            ("reader-v6, not kept", new, f"{faster} of {len(both)} ({ratio:.2f}×)"),
            ("the same text again under the grammar (drag's)", old, "–"),
        ):
            reads = sorted(seconds.values())
            p50, p95 = _p50_p95(reads)
            row = (
                f"| {label}, {how} | {len(reads)} | {p50:.2f} s | {p95:.1f} s "
                f"| {sum(reads):.0f} s | {than} |"
            )
            assert row in section.splitlines(), row
    for span in ("120-179",):
        records = [
            json.loads(line)
            for line in (RESULTS / under / f"mmlu-controls-{span}")
            .joinpath("privacy-items.jsonl")
            .read_text("utf-8")
            .splitlines()
        ]

        cells = " | ".join(_controls_changed(records, m) for m in ("full", _V6, _AGAIN))
        assert f"| {span.replace('-', '–')} | {cells} |" in section.splitlines(), span
        took = [sum(_control_reads(records, m)) for m in (_V6, _AGAIN)]
        assert f"took {took[0]:.0f} s for the 60 readings against {took[1]:.0f} s" in section


def test_the_docs_reader_prototypes_are_counted_from_their_records() -> None:
    """Issue 48: the two prototypes tried and not kept (a shorter reply form; the
    detector's values hidden from the reader), each table row as docs/benchmarks.md
    gives it, counted again from the stored per-query numbers."""
    folder = RESULTS / "privacy-reader" / "reader-prototypes"
    text = DOCS.read_text("utf-8")
    after = text[text.index("](results/privacy-reader/reader-prototypes/)") :]
    lines = after[: after.index("\n#")].splitlines()

    def rows(name: str) -> list[dict[str, Any]]:
        stored = (folder / f"{name}-items.jsonl").read_text("utf-8").splitlines()
        return [json.loads(line) for line in stored]

    forms = [
        ("forms-seen", "json", "JSON (drag's)"),
        ("forms-seen", "lines", "a line a value (`person: priya`; `none`)"),
        ("compact-seen", "json", "JSON (drag's), a second run"),
        ("compact-seen", "compact", 'a compact JSON list (`[["person","priya"]]`)'),
    ]
    for name, way, label in forms:
        got = [r[way] for r in rows(name)]
        assert len(got) == 40
        row = (
            f"| {label} | {statistics.median(g['seconds'] for g in got):.2f} s "
            f"| {sum(g['seconds'] for g in got):.1f} | {sum(g['tokens'] for g in got)} "
            f"| {sum(g['parsed'] for g in got)} "
            f"| {sum(g['parsed'] and not g['values'] for g in got)} "
            f"| {sum(g['units_hit'] for g in got)} |"
        )
        assert row in lines, row
        assert sum(g["units"] for g in got) == 99
    masked = rows("masked-seen")
    for way, label in (
        ("raw", "the question as it is (drag's)"),
        ("masked", "the question with the detector's values hidden"),
    ):
        got = [r[way] for r in masked]
        assert len(got) == 40 and sum(g["units"] for g in got) == 104
        row = (
            f"| {label} | {statistics.median(g['seconds'] for g in got):.2f} s "
            f"| {sum(g['seconds'] for g in got):.1f} | {sum(g['leaked'] for g in got)} "
            f"| {sum(g['refused'] for g in got)} "
            f"| {sum(not g['complete'] and not g['refused'] for g in got)} |"
        )
        assert row in lines, row


def test_the_docs_flash_attention_table_is_counted_from_the_records() -> None:
    """Issue 48: the reader with flash attention off and on, tried and not kept: each
    row as docs/benchmarks.md gives it, counted again from the stored per-text numbers."""
    folder = RESULTS / "privacy-reader" / "flash-attn"
    text = DOCS.read_text("utf-8")
    after = text[text.index("](results/privacy-reader/flash-attn/command.txt)") :]
    lines = after[: after.index("\n#")].splitlines()
    stored = (folder / "readings.jsonl").read_text("utf-8").splitlines()
    rows = [json.loads(line) for line in stored]
    for part, label, n in (
        ("controls 0-59", "MMLU controls 0–59", 60),
        ("pupa seen, first 40", "PUPA-TNB seen, first 40", 40),
    ):
        got = [r for r in rows if r["set"] == part]
        off = [r["seconds_off"] for r in got]
        on = [r["seconds_on"] for r in got]
        assert len(got) == n
        row = (
            f"| {label} | {sum(r['same'] for r in got)} of {n} "
            f"| {statistics.median(off):.2f} s | {statistics.median(on):.2f} s "
            f"| {sum(off):.1f} | {sum(on):.1f} | {sum(on) / sum(off):.3f} |"
        )
        assert row in lines, row


def test_the_review_street_forms_comparison_is_as_the_docs_say() -> None:
    """Issue 48: the street forms of 2026-12-07's review, run over the same texts before
    and after: the count of texts and of those whose matches differ, as the docs say."""
    folder = RESULTS / "privacy-figures" / "street-forms-review-2"
    lines = (folder / "compare.txt").read_text("utf-8").splitlines()
    texts = int(next(line for line in lines if line.startswith("texts:")).split()[-1])
    differ = [line for line in lines if line.startswith("DIFF")]
    assert lines[-1] == f"texts whose matches differ: {len(differ)}"
    text = " ".join(DOCS.read_text("utf-8").split())
    assert f"patterns before and after were run over {texts:,} texts" in text
    assert f"{len(differ)} texts whose matches differ, so no figure above moves" in text


def test_the_docs_figures_without_the_public_units_are_counted_from_the_records() -> None:
    """Issue 48: the figures without the units the rule calls public, and those units,
    as docs/benchmarks.md gives them, counted again from the per-item records."""
    folder = RESULTS / "privacy-figures" / "pupa-unseen-95-reader-v3"
    text = DOCS.read_text("utf-8")
    section = text[text.index("](results/privacy-figures/pupa-unseen-95-reader-v3)") :]
    section = section[: section.index("Without the") + 900]
    named: set[str] = set()
    for method in ("full+reader", "full+reader -public", "full", "full -public"):
        units = [
            v
            for line in (folder / "privacy-items.jsonl").read_text("utf-8").splitlines()
            if (r := json.loads(line))["method"] == method
            for v in r["values"]
            if v["present"]
        ]
        named |= {v["public"] for v in units if v.get("public")}
        private = [v for v in units if not v.get("public")]
        leaked = 100 * sum(1 for v in private if v["unit"]) / len(private)
        whole = 100 * sum(1 for v in private if v["unit"] == "whole") / len(private)
        assert f"{leaked:.2f} %" in section and f"({whole:.2f} %" in section, method
    start = section.index("call public (") + len("call public (")
    listed = " ".join(section[start : section.index(";", start)].split())
    assert sorted(named) == sorted(n.strip() for n in listed.split(",")), listed


# The tables of other sets: (folder, set label, method label, method key).
SET_ROWS = [
    ("privacy-figures/bundled", "bundled (1,200)", "this product", "full"),
    ("privacy-figures/bundled", "bundled (1,200)", "Presidio defaults", "presidio-default"),
    (
        "privacy-figures/presidio-unseen",
        "presidio-research, unseen templates (32)",
        "this product",
        "full",
    ),
    (
        "privacy-figures/presidio-unseen",
        "presidio-research, unseen templates (32)",
        "Presidio defaults",
        "presidio-default",
    ),
    (
        "privacy-figures/presidio-seen",
        "presidio-research, seen templates (1,468)",
        "this product",
        "full",
    ),
    (
        "privacy-figures/presidio-seen",
        "presidio-research, seen templates (1,468)",
        "Presidio defaults",
        "presidio-default",
    ),
]


def test_the_docs_privacy_table_of_the_other_sets_is_their_folders_summaries() -> None:
    """docs/benchmarks.md's table of the bundled set and presidio-research: each row is
    its folder's summary (values, the guard's partial forms, the unit scorer, refused,
    controls changed), and the table links each folder."""
    text = DOCS.read_text("utf-8")
    lines = text.splitlines()
    for folder, set_label, label, method in SET_ROWS:
        assert f"](results/{folder})" in text, folder
        s = json.loads((RESULTS / folder / "privacy-summary.json").read_text("utf-8"))[method]
        row = (
            f"| {set_label} | {label} | {s['units']:,} | {100 * s['leak_rate']['partial']:.2f} % "
            f"| {100 * s['unit_leak_rate']:.2f} % | {s['blocked']} "
            f"| {s['control_changed']} / {s['control_items']} |"
        )
        assert row in lines, row


# The confidence gate's tables: the rows' labels, and the folder's (student, teacher).
GATE_TABLES = {
    "gate-arc-dev-n60": {
        "0.5B · local 1.5B": ("qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"),
        "1.5B · local 1.5B": ("qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-1.5b-instruct"),
        "0.5B · SIMULATION": (
            "qwen2.5-coder-0.5b-instruct",
            "SIMULATION: answer key + qwen2.5-coder-1.5b-instruct",
        ),
        "1.5B · SIMULATION": (
            "qwen2.5-coder-1.5b-instruct",
            "SIMULATION: answer key + qwen2.5-coder-1.5b-instruct",
        ),
    }
}


GATE_TABLES["gate-medmcqa-dev-n100"] = GATE_TABLES["gate-arc-dev-n60"]
GATE_TABLES["gate-medmcqa-test-n100"] = GATE_TABLES["gate-arc-dev-n60"]
GATE_TABLES["gate-arc-test-n100"] = GATE_TABLES["gate-arc-dev-n60"]
GATE_TABLES["gate-mmlu-dev-n100"] = GATE_TABLES["gate-arc-dev-n60"]
GATE_TABLES["gate-mmlu-test-n100"] = GATE_TABLES["gate-arc-dev-n60"]
# Test-split tables also show McNemar's p against the student alone, ungated and gated.
WITH_P = {"gate-medmcqa-test-n100", "gate-arc-test-n100", "gate-mmlu-test-n100"}


def _p_cell(pair: dict[str, Any]) -> str:
    p = pair["mcnemar_p"]
    shown = "<0.001" if p < 0.001 else f"{p:.3f}"
    return f"{shown} ({pair['wrong_to_right']}↑ {pair['right_to_wrong']}↓)"


@pytest.mark.parametrize("folder", sorted(GATE_TABLES))
def test_the_docs_gate_tables_are_their_folders_summaries(folder: str) -> None:
    """docs/benchmarks.md: the table after the folder's link shows, per row, the
    accuracies (and, on a test split, p against the student alone), how often the
    context was used, the lift kept and the seconds."""
    text = DOCS.read_text("utf-8")
    after = text[text.index(f"](results/{folder})") :].splitlines()
    summary = json.loads((RESULTS / folder / "summary.json").read_text("utf-8"))
    for label, (student, teacher) in GATE_TABLES[folder].items():
        line = next(ln for ln in after if ln.startswith(f"| {label} |"))
        (row,) = [
            r
            for r in summary["rows"].values()
            if (r["student"], r["teacher"]) == (student, teacher)
        ]
        cells = row["cells"]
        (g,) = row["gate"].values()
        kept = "–" if g["lift_kept"] is None else f"{100 * g['lift_kept']:.0f} %"
        p_cells = [_p_cell(row["against_none"][c]) for c in summary["columns"][1:]]
        want = [
            *(f"{100 * cells[c]['correct'] / cells[c]['total']:.1f}" for c in summary["columns"]),
            *(p_cells if folder in WITH_P else []),
            f"{g['used_context']}/{g['questions']}",
            kept,
            f"{g['seconds_ungated']:.2f} → {g['seconds_gated']:.2f}",
        ]
        assert [c.strip() for c in line.strip("|").split("|")[1:]] == want, label


GATE_RULE_TABLES = sorted([*RESULTS.glob("*/margins.md"), *RESULTS.glob("*/alone-sure.md")])


@pytest.mark.parametrize("table", GATE_RULE_TABLES, ids=lambda p: str(p.relative_to(RESULTS)))
def test_the_gate_rules_tried_on_a_dev_split_are_recounted_from_its_readings(
    table: Path,
) -> None:
    """margins.md, alone-sure.md: per row, the questions the gate read, right alone,
    right without the gate, and right with each rule (its column's head), recounted
    from the gated answers' two readings."""
    assert json.loads((table.parent / "run.json").read_text("utf-8"))["dataset"].endswith("-dev")
    answers = _answers(table.parent)
    by_key = {(a["student"], a["teacher"], a["mode"], a["k"], a["id"]): a for a in answers}
    head, _, *rows = table.read_text("utf-8").splitlines()
    rules = [c.strip() for c in head.strip("|").split("|")[5:]]
    assert rows and rules
    for line in rows:
        who, column, *cells = (c.strip() for c in line.strip("|").split("|"))
        student, teacher = who.split(" · ", 1)
        gated_mode, k = column.split(" K=")
        plain = (student, teacher, gated_mode.removesuffix("+gate"), int(k))
        read = [
            (by_key[(student, teacher, "none", 0, a["id"])], by_key[(*plain, a["id"])], a)
            for a in answers
            if (a["student"], a["teacher"], a["mode"], a["k"])
            == (student, teacher, gated_mode, int(k))
            and a["gate"].get("setting") == "auto"
        ]
        want = [
            len(read),
            sum(a["correct"] for a, _, _ in read),
            sum(p["correct"] for _, p, _ in read),
        ]
        for rule in rules:
            right = 0
            for _, _, g in read:
                alone = g["gate"]["confidence_alone"]
                context = g["gate"]["confidence_with_context"]
                alone = -math.inf if alone is None else alone
                context = -math.inf if context is None else context
                if rule.startswith("m="):
                    use_context = context > alone + float(rule[2:])
                else:  # alone>P: the context unless sure alone, and no less than with it
                    sure = alone > math.log(float(rule.removeprefix("alone>")))
                    use_context = not (sure and alone >= context)
                way = "reply_with_context" if use_context else "reply_alone"
                right += g["gate"][way].strip() == g["answer_key"]
            want.append(right)
        assert [int(c) for c in cells] == want, (table.name, who)


AFTER_CHOICE = sorted(RESULTS.glob("*/after-choice.md"))


@pytest.mark.parametrize("table", AFTER_CHOICE, ids=lambda p: str(p.parent.name))
def test_a_test_split_scored_after_the_margin_was_chosen_is_recounted(table: Path) -> None:
    """after-choice.md: per row and margin, the context used, right alone / without the
    gate / with it, the lift kept and p against the student alone, recounted from the
    answers (at the run's own margin, as recorded; at another, from the two readings)."""
    answers = _answers(table.parent)
    by_key = {(a["student"], a["teacher"], a["mode"], a["k"], a["id"]): a for a in answers}
    _, _, *rows = table.read_text("utf-8").splitlines()
    assert rows
    for line in rows:
        who, column, margin_cell, used_cell, right_cell, kept_cell, p_cell = (
            c.strip() for c in line.strip("|").split("|")
        )
        student, teacher = who.split(" · ", 1)
        gated_mode, k = column.split(" K=")
        margin = float(margin_cell.removesuffix(" (as run)"))
        n = used = alone_right = plain_right = gated_right = up = down = 0
        for g in answers:
            if (g["student"], g["teacher"], g["mode"], g["k"]) != (
                student,
                teacher,
                gated_mode,
                int(k),
            ):
                continue
            alone = by_key[(student, teacher, "none", 0, g["id"])]["correct"]
            plain = by_key[(student, teacher, gated_mode.removesuffix("+gate"), int(k), g["id"])]
            gate = g["gate"]
            if margin_cell.endswith("(as run)") or gate.get("setting") != "auto":
                took, right = gate.get("went") == "evidence", g["correct"]
            else:
                sure_alone = gate["confidence_alone"]
                sure_context = gate["confidence_with_context"]
                took = sure_context is not None and (
                    sure_alone is None or sure_context > sure_alone + margin
                )
                way = "reply_with_context" if took else "reply_alone"
                right = gate[way].strip() == g["answer_key"]
            n += 1
            used += took
            alone_right += alone
            plain_right += plain["correct"]
            gated_right += right
            up += right and not alone
            down += alone and not right
        lift = plain_right - alone_right
        kept = f"{100 * (gated_right - alone_right) / lift:.0f} %" if lift > 0 else "–"
        p = _mcnemar(down, up)
        shown = "<0.001" if p < 0.001 else f"{p:.3f}"
        assert [used_cell, right_cell, kept_cell, p_cell] == [
            f"{used}/{n}",
            f"{alone_right} / {plain_right} / {gated_right}",
            kept,
            f"{shown} ({up}↑ {down}↓)",
        ], (table.parent.name, who, margin_cell)


LOCAL_DOCS = sorted(p.parent for p in RESULTS.glob("**/local-docs-summary.json"))


def test_there_are_published_local_docs_results() -> None:
    assert "local-docs-report" in {f.name for f in LOCAL_DOCS}


def _local_docs_row(item: dict[str, Any]) -> str:
    """The summary's row of an item: its method, with --read-tokens how much it read,
    with --headings how each passage was headed, with --decoding how the answer was
    decoded, with --prompt the student's prompt."""
    read = item.get("read_tokens")
    if read is None:
        return str(item["method"])
    row = f"{item['method']}, " + ("whole passages" if read == 0 else f"{read} tokens")
    row = row if item.get("headings") is None else f"{row}, {item['headings']} headings"
    row = row if item.get("decoding") is None else f"{row}, {item['decoding']}"
    return row if item.get("prompt") is None else f"{row}, {item['prompt']} prompt"


@pytest.mark.parametrize("folder", LOCAL_DOCS, ids=lambda p: p.name)
def test_the_local_docs_summary_is_recounted_from_its_items(folder: Path) -> None:
    """Every cell of ``drag bench local-docs``'s summary, counted again from the items
    by plain counting; the docs' table is the summary's."""
    summary = json.loads((folder / "local-docs-summary.json").read_text("utf-8"))
    lines = (folder / "local-docs-items.jsonl").read_text("utf-8").splitlines()
    items = [json.loads(line) for line in lines if line.strip()]
    assert len({r["question"] for r in items}) == summary["questions"]
    for method, data in summary["results"].items():
        mine = [r for r in items if _local_docs_row(r) == method]
        assert len(mine) == summary["questions"]
        if "answerable_held_back" in data:
            answerable = [r for r in mine if r["type"] != "Null"]
            held = sum(r["abstained"] for r in answerable)
            assert data["answerable_held_back"] == round(100 * held / len(answerable), 1)
        for kind, row in data["by_type"].items():
            part = [r for r in mine if kind == "all" or r["type"] == kind]
            n = len(part)
            wanted = sum(r["evidence_wanted"] for r in part)
            assert row["n"] == n
            assert row["accuracy"] == round(100 * sum(r["right"] for r in part) / n, 1)
            assert row["error_rate"] == round(100 * sum(r["error"] for r in part) / n, 1)
            assert row["abstained"] == sum(r["abstained"] for r in part)
            found = sum(r["evidence_found"] for r in part)
            assert row["evidence_recall"] == (round(100 * found / wanted, 1) if wanted else None)
            assert all(r["error"] == (not r["right"] and not r["abstained"]) for r in part)
    docs = (RESULTS.parent / "benchmarks.md").read_text("utf-8")
    table = [
        ln for ln in (folder / "summary.md").read_text("utf-8").splitlines() if ln.startswith("|")
    ]
    assert table and all(line in docs for line in table)


@pytest.mark.parametrize("folder", LOCAL_DOCS, ids=lambda p: p.name)
def test_the_local_docs_verdicts_are_the_scorers(folder: Path) -> None:
    from drag_bench.localdocs.scoring import score

    for line in (folder / "local-docs-items.jsonl").read_text("utf-8").splitlines():
        r = json.loads(line)
        assert score(r["reply"], r["gold"], r["type"]).right == r["right"], r["question"]


def test_the_local_docs_hand_check_agrees_as_the_docs_say() -> None:
    folder = RESULTS / "local-docs-report"
    items = [
        json.loads(ln) for ln in (folder / "local-docs-items.jsonl").read_text("utf-8").splitlines()
    ]
    judged = [json.loads(ln) for ln in (folder / "handcheck.jsonl").read_text("utf-8").splitlines()]
    assert [j["n"] for j in judged] == list(range(50))
    agree = sum(i["right"] == j["right"] for i, j in zip(items[:50], judged, strict=True))
    hand, scorer = sum(j["right"] for j in judged), sum(i["right"] for i in items[:50])
    docs = (RESULTS.parent / "benchmarks.md").read_text("utf-8")
    assert (agree, hand, scorer) == (40, 32, 26)
    assert "They agree\n  on 40 of 50; the reader found 32 right, the scorer 26" in docs


def _local_docs(folder: str) -> list[dict[str, Any]]:
    path = RESULTS / folder / "local-docs-items.jsonl"
    return [json.loads(ln) for ln in path.read_text("utf-8").splitlines()]


@pytest.mark.parametrize(
    ("folder", "counts"), [("local-docs-report", (15, 6)), ("local-docs-report-judged", (16, 6))]
)
def test_the_local_docs_paired_comparison_is_as_the_docs_say(
    folder: str, counts: tuple[int, int]
) -> None:
    items = _local_docs(folder)
    graph = {r["question"]: r["right"] for r in items if r["method"] == "minirag"}
    vector = {r["question"]: r["right"] for r in items if r["method"] == "vector"}
    only_graph = sum(graph[q] and not vector[q] for q in graph)
    only_vector = sum(vector[q] and not graph[q] for q in graph)
    p = _mcnemar(only_vector, only_graph)
    docs = " ".join((RESULTS.parent / "benchmarks.md").read_text("utf-8").split())
    assert (only_graph, only_vector) == counts
    assert (
        f"it alone was right {only_graph} times, vector alone {only_vector}: "
        f"exact McNemar p = {p:.3f}" in docs
    )


def test_what_the_files_judge_held_back_is_as_the_docs_say() -> None:
    """Replies held back ("Your files do not say.") on the report half, by kind, and how
    many of the answerable ones the run without the judge had answered right."""
    before = {(r["question"], r["method"]): r["right"] for r in _local_docs("local-docs-report")}
    judged = _local_docs("local-docs-report-judged")
    docs = " ".join((RESULTS.parent / "benchmarks.md").read_text("utf-8").split())
    found = {}
    for method in ("minirag", "vector"):
        held = [r for r in judged if r["method"] == method and r["judged_not_in_files"]]
        answerable = [r for r in held if r["type"] != "Null"]
        right = sum(before[(r["question"], method)] for r in answerable)
        found[method] = (len(held), len(held) - len(answerable), len(answerable), right)
        assert all(r["reply"] == "Your files do not say." for r in held)
    assert found == {"minirag": (13, 4, 9, 8), "vector": (15, 5, 10, 5)}
    assert "it held back 13 replies, 4 of them unanswerable and 9 answerable, and 8" in docs
    assert "With vector RAG it held back 15 (5 unanswerable; 5 of the 10 answerable" in docs


def _chosen_again(folder: Path, readings: str) -> str:
    """What ``folder``'s choose.py makes of its stored readings now: the stored choice."""
    import subprocess
    import sys

    made = subprocess.run(
        [sys.executable, str(folder / "choose.py"), str(folder / readings)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert made == (folder / "choose.txt").read_text("utf-8")
    return made


def test_the_files_judge_threshold_was_the_one_the_tune_half_chose() -> None:
    """The stored choice is what its script makes of the stored readings, and the docs'
    threshold is that choice (the judge was the product's until issue 51)."""
    made = _chosen_again(RESULTS / "local-docs-judge-tune", "tune.jsonl")
    chosen = re.search(
        r"chosen: ln P\(no\) >= (-[\d.]+) .* right: 63 of 105 \(without the judge: 54\)", made
    )
    assert chosen is not None and float(chosen.group(1)) == -1.274
    docs = " ".join((RESULTS.parent / "benchmarks.md").read_text("utf-8").split())
    at = f"{math.exp(-1.274):.2f}"
    assert f'"no" among yes and no (both spellings, from the first step) is at least {at}' in docs
    assert "  0.830  the judge's ln P(no)" in made
    assert "| 63 | 10/14 | 11/91 | 1  <- chosen" in made


def test_the_files_support_thresholds_are_the_ones_the_tune_half_chose() -> None:
    """The stored choice is what its script makes of the stored readings (the product's
    check read again from the texts the student read), the product's constants are that
    choice, and the docs' figures of the budgets are the readings'."""
    from assistant.base.config import FilesSettings
    from assistant.drag import filessupport

    folder = RESULTS / "local-docs-support-tune"
    made = _chosen_again(folder, "tune-500.jsonl")
    chosen = made.splitlines()[-1]
    assert chosen.startswith("chosen, right answers held back at most 4 of 91: ")
    at = f"found_at {filessupport.FOUND_AT_LEAST}, covered_at {filessupport.COVERED_AT_LEAST}: "
    assert at + "60 right, 8 of 14 Null caught, 12 answerable held back (0 of them" in chosen
    assert FilesSettings().read_tokens == 500
    rows = {
        budget: [json.loads(ln) for ln in (folder / name).read_text("utf-8").splitlines()]
        for budget, name in (
            (400, "tune-400.jsonl"),
            (500, "tune-500.jsonl"),
            (600, "tune-600-first36.jsonl"),
        )
    }
    whole = {
        (r := json.loads(ln))["question"]: r
        for ln in (RESULTS / "local-docs-judge-tune" / "tune.jsonl").read_text("utf-8").splitlines()
    }
    assert [len(rows[b]) for b in (400, 500, 600)] == [105, 105, 36]
    right = {b: sum(r["right"] for r in rows[b]) for b in rows}
    p50 = {b: statistics.median(r["seconds"] for r in rows[b]) for b in rows}
    first = [r["question"] for r in rows[600]]
    on_first = {b: sum(r["right"] for r in rows[b] if r["question"] in first) for b in rows}
    docs = " ".join((RESULTS.parent / "benchmarks.md").read_text("utf-8").split())
    said = (
        f"read whole, {sum(r['right'] for r in whole.values())} of the 105 were right "
        f"({statistics.median(r['s_answer'] for r in whole.values()):.1f} s at the median); "
        f"cut to 400 tokens, {right[400]} ({p50[400]:.1f} s); to 500, {right[500]} "
        f"({p50[500]:.1f} s). On the first 36, 600 tokens gave {on_first[600]} right "
        f"({p50[600]:.1f} s), 500 gave {on_first[500]}"
    )
    assert said in docs, said


def test_the_local_docs_report_read_is_as_the_docs_say() -> None:
    """Issue 51's report half: the paired counts of the budget against whole passages and
    of the two methods, the time ratio, and the held-back answers the scorer would have
    counted right (scored from the answer kept under ``support.unsupported``)."""
    from drag_bench.localdocs.scoring import score

    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for r in _local_docs("local-docs-report-read"):
        rows.setdefault(_local_docs_row(r), {})[r["question"]] = r

    def paired(a: str, b: str) -> tuple[str, str]:
        only_a = sum(rows[a][q]["right"] and not rows[b][q]["right"] for q in rows[a])
        only_b = sum(rows[b][q]["right"] and not rows[a][q]["right"] for q in rows[a])
        return f"{only_a} times, {only_b}", f"{_mcnemar(only_a, only_b):.3f}"

    cut, whole, vector = "minirag, 500 tokens", "minirag, whole passages", "vector, 500 tokens"
    docs = " ".join((RESULTS.parent / "benchmarks.md").read_text("utf-8").split())
    (counts, p) = paired(cut, whole)
    assert counts == "3 times, 9" and f"the whole passages alone 9 (exact McNemar p = {p})" in docs
    (counts, p) = paired(cut, vector)
    assert counts == "12 times, 5" and f"right 12 times, vector alone 5 (p = {p})" in docs
    p50 = {m: statistics.median(r["seconds"] for r in rows[m].values()) for m in (cut, whole)}
    assert f"(a ratio of {p50[cut] / p50[whole]:.2f}; target 8 s)" in docs
    held = {}
    for method in (cut, "vector, 500 tokens"):
        back = [r for r in rows[method].values() if r["held_back"] and r["type"] != "Null"]
        assert all(r["reply"] == "Your files do not say." for r in back)
        would = sum(score(r["support"]["unsupported"], r["gold"], r["type"]).right for r in back)
        held[method] = (len(back), would)
    assert held == {cut: (2, 2), "vector, 500 tokens": (7, 3)}
    assert "With vector RAG 7 (8.6 %), 3 of them right." in docs


def test_the_shorter_headings_run_is_as_the_docs_say() -> None:
    """Issue 51's shorter headings on the tune half (not kept): the right answers, the
    paired counts, the prompt tokens and the time, counted again from the items."""
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for r in _local_docs("local-docs-headings-tune"):
        rows.setdefault(_local_docs_row(r), {})[r["question"]] = r
    short, longer, path = (
        f"minirag, {n} tokens, {h} headings"
        for n, h in ((500, "short"), (600, "short"), (500, "path"))
    )
    asked = list(rows[path])
    assert len(asked) == 105 and all(set(rows[m]) == set(asked) for m in (short, longer))
    right = {m: sum(r["right"] for r in rows[m].values()) for m in rows}
    only_short = sum(rows[short][q]["right"] and not rows[path][q]["right"] for q in asked)
    only_path = sum(rows[path][q]["right"] and not rows[short][q]["right"] for q in asked)

    def p50(m: str, key: str) -> float:
        ordered = sorted(r[key] for r in rows[m].values())
        return ordered[math.ceil(len(ordered) / 2) - 1]

    faster = sum(rows[short][q]["seconds"] < rows[path][q]["seconds"] for q in asked)
    ratio = sum(rows[short][q]["seconds"] for q in asked) / sum(
        rows[path][q]["seconds"] for q in asked
    )
    docs = " ".join((RESULTS.parent / "benchmarks.md").read_text("utf-8").split())
    said = [
        f"right on {right[short]} against {right[path]} (alone right {only_short} times, the "
        f"whole paths alone {only_path}: exact McNemar p = {_mcnemar(only_short, only_path):.3f})",
        f"two under the rule's bound of {right[path] - 2}",
        f"read {p50(short, 'prompt_tokens'):.0f} prompt tokens at the median against "
        f"{p50(path, 'prompt_tokens'):.0f}",
        f"answered faster on all {faster} questions",
        f"{ratio:.3f} of the time in all",
        f"The 600-token row was right on {right[longer]}",
    ]
    assert faster == len(asked) and right[short] < right[path] - 2
    assert all(line in docs for line in said), [line for line in said if line not in docs]
    tokens = (RESULTS / "local-docs-headings-tune" / "tokens.txt").read_text("utf-8")
    assert tokens == "whole path: 52 tokens\ntime: 18 tokens\n"
    assert "is 52 of the 1.5B's tokens, its time alone 18" in docs


def _paired(folder: str, a: str, b: str) -> dict[str, Any]:
    """Two rows of a side-by-side local-docs run, counted again from the items: right
    answers, each alone right, the same replies, median prompt tokens and seconds (the
    benchmark's percentile), faster, and the ratio of the seconds in all."""
    from drag_bench.stats import percentile

    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for r in _local_docs(folder):
        rows.setdefault(_local_docs_row(r), {})[r["question"]] = r
    x, y = rows[a], rows[b]
    asked = list(x)
    assert set(y) == set(asked)
    return {
        "n": len(asked),
        "right": (sum(r["right"] for r in x.values()), sum(r["right"] for r in y.values())),
        "alone": (
            sum(x[q]["right"] and not y[q]["right"] for q in asked),
            sum(y[q]["right"] and not x[q]["right"] for q in asked),
        ),
        "same": sum(x[q]["reply"] == y[q]["reply"] for q in asked),
        "tokens": tuple(
            statistics.median(r["prompt_tokens"] for r in side.values()) for side in (x, y)
        ),
        "p50": tuple(percentile([r["seconds"] for r in side.values()], 0.5) for side in (x, y)),
        "faster": sum(x[q]["seconds"] < y[q]["seconds"] for q in asked),
        "ratio": sum(x[q]["seconds"] for q in asked) / sum(y[q]["seconds"] for q in asked),
    }


def _prompt_sides(
    folder: str, prompts: tuple[str, str]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int], dict[str, int]]:
    """A prompt trial's rows by prompt, with each side's errors and answerable
    questions held back (counted from the stored rows)."""
    items = _local_docs(folder)
    side = {p: [i for i in items if i["prompt"] == p] for p in prompts}
    errors = {p: sum(i["error"] for i in side[p]) for p in side}
    held = {p: sum(i["abstained"] for i in side[p] if i["type"] != "Null") for p in side}
    return side, errors, held


def test_the_worked_examples_run_is_as_the_docs_say() -> None:
    """Issue 51: two worked exchanges in the files prompt against the rules alone, side
    by side on the tune half; by the rule written before the run, not kept."""
    docs = " ".join((RESULTS.parent / "benchmarks.md").read_text("utf-8").split())
    rules, examples = "minirag, 500 tokens, rules prompt", "minirag, 500 tokens, examples prompt"
    t = _paired("local-docs-examples-tune", examples, rules)
    assert t["n"] == 105 and t["right"][0] < t["right"][1] + 2  # the rule: not kept
    side, errors, held = _prompt_sides("local-docs-examples-tune", ("rules", "examples"))
    nulls = {p: sum(i["right"] for i in side[p] if i["type"] == "Null") for p in side}
    said = [
        f"right on {t['right'][0]} of the 105 against {t['right'][1]} (the examples alone "
        f"right {t['alone'][0]} times, the rules alone {t['alone'][1]}: exact McNemar p = "
        f"{_mcnemar(*t['alone']):.3f}; {t['same']} of the 105 replies word for word the same)",
        f"errors {errors['examples']} against {errors['rules']}, Null {nulls['examples']} of 14 "
        f"against {nulls['rules']}, {held['examples']} of the 91 answerable questions held "
        f"back against {held['rules']}",
        f"{t['ratio']:.3f} of the time in all",
    ]
    assert all(line in docs for line in said), [line for line in said if line not in docs]


def test_the_best_last_run_is_as_the_docs_say() -> None:
    """Issue 51: the passages best last against best first, side by side on the tune
    half; by the rule written before the run, not kept."""
    docs = " ".join((RESULTS.parent / "benchmarks.md").read_text("utf-8").split())
    rules, last = "minirag, 500 tokens, rules prompt", "minirag, 500 tokens, best-last prompt"
    t = _paired("local-docs-bestlast-tune", last, rules)
    assert t["n"] == 105 and t["right"][0] < t["right"][1] + 2  # the rule: not kept
    side, errors, held = _prompt_sides("local-docs-bestlast-tune", ("rules", "best-last"))
    assert t["alone"][0] == t["alone"][1]  # "each alone right … times"
    said = [
        f"right on {t['right'][0]} of the 105 against {t['right'][1]} (each alone right "
        f"{t['alone'][0]} times; {t['same']} of the 105 replies word for word the same), "
        f"under the rule's bound of {t['right'][1] + 2}",
        f"errors {errors['best-last']} against {errors['rules']}, {held['best-last']} of the "
        f"91 answerable questions held back against {held['rules']}; {t['ratio']:.3f} of "
        "the time in all",
    ]
    assert all(line in docs for line in said), [line for line in said if line not in docs]
    before = _local_docs("local-docs-examples-tune")
    again = {i["question"]: i["reply"] for i in side["rules"]}
    first = {i["question"]: i["reply"] for i in before if i["prompt"] == "rules"}
    assert again == first  # "the same 105 replies, word for word"


def test_the_drafted_answer_run_is_as_the_docs_say() -> None:
    """Issue 51: the files answer drafted from its passages against a token at a time,
    side by side on the report half; by the rule written before the run, not kept."""
    docs = " ".join((RESULTS.parent / "benchmarks.md").read_text("utf-8").split())
    drafted, plain = "minirag, 500 tokens, drafted", "minirag, 500 tokens, plain"
    r = _paired("local-docs-decoding-report", drafted, plain)
    assert r["n"] == 87 and r["ratio"] >= 1  # the rule: less time in all, which it is not
    items = _local_docs("local-docs-decoding-report")
    mine = [i for i in items if i["decoding"] == "plain"]
    spent = {
        k: sum(i["student_seconds"][f"{k}_seconds"] for i in mine) for k in ("prompt", "decode")
    }
    answer = sum(i["seconds"] for i in mine)
    decode = sum(
        i["student_seconds"]["decode_seconds"] for i in items if i["decoding"] == "drafted"
    )
    said = [
        f"**{r['ratio']:.3f}×** the time of a token at a time in all (faster on "
        f"{r['faster']} of the 87 questions; {r['p50'][0]:.2f} s against {r['p50'][1]:.2f} s",
        f"writing it is {100 * spent['decode'] / answer:.1f} % of a question's",
        f"reading the prompt {100 * spent['prompt'] / answer:.1f} % ({r['tokens'][1]:.0f} prompt",
        f"(decode seconds {decode:.1f} against {spent['decode']:.1f} in all)",
        f"{r['same']} of the 87 replies are word for word the same; drafted was right "
        f"{'once' if r['alone'][0] == 1 else r['alone'][0]} where",
        f"**{r['p50'][1]:.2f} s at the median**",
    ]
    assert r["alone"][1] == 0 and "never the other way" in docs
    # The one drafted alone got right: held back by the word check, not by sureness.
    pairs: dict[str, dict[str, Any]] = {}
    for i in items:
        pairs.setdefault(i["question"], {})[i["decoding"]] = i
    (gained,) = [p for p in pairs.values() if p["drafted"]["right"] and not p["plain"]["right"]]
    held, sent = gained["drafted"]["support"], gained["plain"]["support"]
    assert held["not_in_files"] and not held["unsure"] and not sent["unsure"]
    assert min(held["logprobs"]) >= -2.0 and min(sent["logprobs"]) >= -2.0
    assert f"{held['found']} of its words" in docs and f"plain reply's {sent['found']}" in docs
    for line in said:
        assert line in docs, line


def test_the_name_headings_runs_are_as_the_docs_say() -> None:
    """Issue 51: the passages headed by their file's name against their whole path, on
    the tune half (the rule written before: kept) and the report half, counted again."""
    docs = " ".join((RESULTS.parent / "benchmarks.md").read_text("utf-8").split())
    name, path = "minirag, 500 tokens, name headings", "minirag, 500 tokens, path headings"
    t = _paired("local-docs-filename-tune", name, path)
    assert t["n"] == 105 and t["right"][0] >= t["right"][1] - 2 and t["p50"][0] < t["p50"][1]
    said = [
        f"right on {t['right'][0]} against {t['right'][1]} (the names alone right "
        f"{t['alone'][0]} times, the whole paths alone {t['alone'][1]}; {t['same']} of the "
        f"105 replies word for word the same), at the rule's bound of {t['right'][1] - 2}",
        f"{t['tokens'][0]:.0f} prompt tokens at the median against {t['tokens'][1]:.0f}, "
        f"faster on {t['faster']} of the 105 questions, {t['ratio']:.3f} of the time in all",
    ]
    r = _paired("local-docs-filename-report", name, path)
    assert r["n"] == 87
    said += [
        f"**Time: {r['p50'][0]:.2f} s at the median** with the file's name, against "
        f"{r['p50'][1]:.2f} s with the whole path in the same run (faster on {r['faster']} "
        f"of the 87 questions, {r['ratio']:.3f} of the time in all; {r['tokens'][0]:.0f} "
        f"prompt tokens at the median against {r['tokens'][1]:.0f})",
        f"**Right on {r['right'][0]} against {r['right'][1]}** (the names alone right "
        f"{r['alone'][0]} time, the whole paths alone {r['alone'][1]}: exact McNemar p = "
        f"{_mcnemar(*r['alone']):.3f}; {r['same']} of the 87 replies word for word the same)",
    ]
    assert r["p50"][0] <= 8 < r["p50"][1]  # "the target … is met on this run"
    assert all(line in docs for line in said), [line for line in said if line not in docs]


def test_the_files_heads_cold_start_is_as_the_docs_say() -> None:
    """Issue 51: new processes with the files answer's head loaded or read, counted
    again from the stored lines (medians by nearest rank)."""
    lines = (RESULTS / "files-head" / "coldstart.txt").read_text("utf-8").splitlines()
    runs = [json.loads(ln) for ln in lines if ln.startswith("{")]
    way = {w: [r for r in runs if r["way"] == w] for w in ("read", "loaded")}
    assert [len(v) for v in way.values()] == [8, 8]
    assert {r["head"] for r in way["read"]} == {"saved"}
    assert {r["head"] for r in way["loaded"]} == {"loaded"}

    def p50(values: list[float]) -> float:
        ordered = sorted(values)
        return ordered[math.ceil(len(ordered) / 2) - 1]

    both = {w: p50([r["head_s"] + r["answer_s"] for r in v]) for w, v in way.items()}
    wall = {w: p50([r["wall"] for r in v]) for w, v in way.items()}
    loaded = [r["head_s"] for r in way["loaded"]]
    same = sum(a["reply"] == b["reply"] for a, b in zip(way["read"], way["loaded"], strict=True))
    docs = " ".join((RESULTS.parent / "benchmarks.md").read_text("utf-8").split())
    said = [
        f"the head took {min(loaded):.3f} to {max(loaded):.3f} s loaded",
        f"{both['loaded']:.2f} s against {both['read']:.2f} s (p50, the lower middle of 8)",
        f"the whole process {wall['loaded']:.2f} s against {wall['read']:.2f} s",
        f"the same reply for all {same}",
    ]
    assert same == 8 and all(line in docs for line in said), said
    head = (RESULTS / "files-head" / "headtokens.txt").read_text("utf-8")
    assert head == "files answer's head: 88 tokens\n"
    assert "the user's turn (88 of the 1.5B's tokens)" in docs


def test_the_lihua_privacy_table_is_the_stored_summary() -> None:
    summary = json.loads(
        (RESULTS / "privacy-lihua" / "learnt-192" / "privacy-summary.json").read_text("utf-8")
    )
    docs = (RESULTS.parent / "benchmarks.md").read_text("utf-8")
    for label, method in (("as shipped", "full"), ("taught by the indexed files", "full+learnt")):
        s = summary[method]
        n = s["unit_leaked"]
        leaked = f"{n} ({100 * n / s['units']:.1f} %)" if n else "**0**"
        row = (
            f"| {label} | {s['units']} | {leaked} | {s['blocked']} | "
            f"{100 * s['kept_words']:.1f} % | {s['control_changed']} of {s['control_items']} |"
        )
        assert row in docs, row


def test_the_lihua_text_names_table_is_recounted_from_its_items() -> None:
    """Names written only in the files' text: leaks counted again per unit from the
    stored items and the set's own types (a sender's name is PERSON), and the words kept
    from the stored summary."""
    folder = RESULTS / "privacy-lihua" / "text-28"
    summary = json.loads((folder / "privacy-summary.json").read_text("utf-8"))
    dataset = RESULTS.parents[1] / "bench" / "drag_bench" / "data" / "privacy_lihua_text.jsonl"
    units = {
        (item := json.loads(line))["id"]: [u["type"] for u in item["pii"]]
        for line in dataset.read_text("utf-8").splitlines()
    }
    docs = (RESULTS.parent / "benchmarks.md").read_text("utf-8")
    for label, method in (("as shipped", "full"), ("taught by the indexed files", "full+learnt")):
        counts = {True: [0, 0], False: [0, 0]}  # sender's name? -> [units, leaked]
        for line in (folder / "privacy-items.jsonl").read_text("utf-8").splitlines():
            row = json.loads(line)
            if row["method"] != method:
                continue
            assert len(row["values"]) == len(units[row["id"]])
            for kind, value in zip(units[row["id"]], row["values"], strict=True):
                counts[kind == "PERSON"][0] += 1
                counts[kind == "PERSON"][1] += bool(value["unit"])
        text, senders = counts[False], counts[True]
        table = (
            f"| {label} | {text[0]} | {text[1]} | {senders[0]} | {senders[1]} | "
            f"{100 * summary[method]['kept_words']:.1f} % |"
        )
        assert table in docs, table


STORE = RESULTS / "store-one-retriever"


def test_the_store_figures_are_recounted_from_their_records() -> None:
    """docs/benchmarks.md's local-store section: the hits and their kinds, the answers
    right online and offline, and the coverage table of both recalls, counted again from
    the per-question records and the per-paraphrase scores (the covers rule written
    here: the same or a near-duplicate question always, the graph from the threshold)."""
    text = DOCS.read_text("utf-8")
    section = text[text.index("](results/store-one-retriever)") :]
    records = [
        json.loads(line)
        for line in (STORE / "questions.jsonl").read_text("utf-8").splitlines()
        if line.strip()
    ]
    ran = [r for r in records if "paraphrase" in r]
    hits = [r for r in ran if r["offline"]["hit"]]
    kinds = {k: sum(r["offline"]["how"] == k for r in hits) for k in ("graph", "near-duplicate")}
    assert (
        f"{len(hits)} of the {len(ran)} paraphrases were answered from\nthe cache: "
        f"{kinds['graph']} by graph recall, {kinds['near-duplicate']} as near-duplicates, "
        f"{len(hits) - sum(kinds.values())} as the same question" in section
    )
    online = sum(r["online"]["correct"] for r in hits)
    offline = sum(r["offline"]["correct"] for r in hits)
    assert f"accuracy was {online}/{len(hits)} online and {offline}/{len(hits)} offline" in section
    calibration = json.loads((STORE / "calibration.json").read_text("utf-8"))["calibration"]
    para, ctrl = calibration["paraphrases"], calibration["unrelated"]

    def share(found: list[dict[str, Any]], method: str, t: float) -> str:
        covered = sum(
            f[method]["how"] in ("exact", "near-duplicate")
            or (f[method]["how"] == "graph" and f[method]["score"] >= t)
            for f in found
        )
        return f"{round(100 * covered / len(found))} %"

    for t in (0.5, 0.55, 0.6):
        line = next(ln for ln in section.splitlines() if ln.startswith(f"| {t:.2f} "))
        cells = [c.strip() for c in line.strip("|").split("|")[1:]]
        assert cells == [
            share(para, "one retriever", t),
            share(ctrl, "one retriever", t),
            share(para, "before", t),
            share(ctrl, "before", t),
        ]
    for method, shown in (("one retriever", "79 %"), ("before", "80 %")):
        shares = [
            p[method]["own_share"]
            for p in para
            if p[method]["how"] == "graph" and p[method]["own_share"] is not None
        ]
        assert len(shares) == 12 and f"{round(100 * sum(shares) / len(shares))} %" == shown
    scale = json.loads((STORE / "scale.json").read_text("utf-8"))["scale"]
    for row, label in zip(scale, ("10⁴", "10⁵"), strict=True):
        want = (
            f"| {label} | {row['query_ms']['p50']:.1f} ms | {row['query_ms']['p95']:.1f} ms | "
            f"{row['query_ms_before']['p50']:.1f} ms | {row['index_load_s']:.2f} s | "
            f"{row['grow_s']:.2f} s | {row['index_memory_mb']:.0f} MB | "
            f"{row['database_mb']:.0f} MB |"
        )
        assert want in section, want


@pytest.mark.parametrize(
    ("folder", "label"),
    [
        ("mmlu-controls-120-179-reader-v3", "120–179, seen by no rule"),
        ("mmlu-controls-120-179-reader-v3-lookup", "120–179, reader-v3 drafting"),
        ("mmlu-controls-120-179-reader-v4", "120–179, reader-v4"),
        ("mmlu-controls-60-119-reader-v3", "60–119, seen by the recheck rules"),
        ("options-article/mmlu-controls-60-119-reader-v4", "60–119, reader-v4's rules"),
        ("options-article/mmlu-controls-60-119-article", "60–119, + article ("),
        ("options-article/mmlu-controls-60-119-options", "60–119, + options, not"),
        ("options-article/mmlu-controls-60-119-options-article", "60–119, + options + article"),
        ("options-article/mmlu-controls-120-179-reader-v4", "120–179 (seen by no rule), reader"),
        ("options-article/mmlu-controls-120-179-article", "120–179, + article ("),
        ("options-article/mmlu-controls-120-179-options", "120–179, + options, not"),
        ("options-article/mmlu-controls-120-179-options-article", "120–179, + options + article"),
        ("values-v2/mmlu-controls-0-119-head", "0–119 (the rules' split), the head"),
        ("values-v2/mmlu-controls-0-119-values-v2", "0–119 (the rules' split), values-v2"),
        ("values-v2/mmlu-controls-120-199-head", "120–199 (seen by no rule), the head"),
        ("values-v2/mmlu-controls-120-199-values-v2", "120–199 (seen by no rule), values-v2"),
    ],
)
def test_the_docs_controls_table_is_counted_from_the_records(folder: str, label: str) -> None:
    """docs/benchmarks.md's MMLU controls rows (issue 48): changed with the detector
    alone, with the reader, and of those refused, counted from the per-item records."""
    records = [
        json.loads(line)
        for line in (RESULTS / "privacy-reader" / folder / "privacy-items.jsonl")
        .read_text("utf-8")
        .splitlines()
    ]

    def changed(method: str) -> str:
        rows = [r for r in records if r["method"] == method]
        return f"{sum(1 for r in rows if r['changed'] or r['blocked'])} / {len(rows)}"

    refused = sum(1 for r in records if r["method"] == "full+reader" and r["blocked"])
    row = next(ln for ln in DOCS.read_text("utf-8").splitlines() if ln.startswith(f"| {label}"))
    assert row.endswith(f"| {changed('full')} | {changed('full+reader')} | {refused} |"), row


@pytest.mark.parametrize(
    ("part", "heading", "with_label"),
    [
        ("world-streets", "Streets as other countries write them", "with the streets"),
        ("more-streets", "More street forms", "with the more street forms"),
    ],
)
def test_the_street_rows_are_their_records(part: str, heading: str, with_label: str) -> None:
    """docs/benchmarks.md's two street sections (issue 48): the MMLU controls' rows with
    and without the patterns, counted from the records, and presidio-research's rows,
    from their summaries."""
    folder = RESULTS / "privacy-figures" / part
    lines = DOCS.read_text("utf-8").splitlines()
    (start,) = [i for i, ln in enumerate(lines) if ln.startswith(f"### {heading}")]
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("#"))
    lines = lines[start:end]  # this section's rows only: both say "without them"

    def row(begins: str) -> str:
        (found,) = [ln for ln in lines if ln.startswith(begins)]
        return found

    records = [
        json.loads(line)
        for line in (folder / "mmlu-controls-120-179" / "privacy-items.jsonl")
        .read_text("utf-8")
        .splitlines()
    ]

    def changed(method: str) -> str:
        rows = [r for r in records if r["method"] == method]
        return f"{sum(1 for r in rows if r['changed'] or r['blocked'])} / {len(rows)}"

    for label, suffix in ((with_label, ""), ("without them", f" -{part}")):
        refused = sum(1 for r in records if r["method"] == "full+reader" + suffix and r["blocked"])
        want = f"| {changed('full' + suffix)} | {changed('full+reader' + suffix)} | {refused} |"
        assert row(f"| 120–179 (seen by no rule), {label} |").endswith(want), label
    for split, label in (("unseen", "unseen templates (32)"), ("seen", "seen templates (1,468)")):
        summary = json.loads((folder / f"presidio-{split}" / "privacy-summary.json").read_text())
        for method, how in (("full", with_label), (f"full -{part}", "without them")):
            s = summary[method]
            want = (
                f"| presidio-research, {label} | {how} | {s['units']} "
                f"| {100 * s['unit_leak_rate']:.2f} % | {100 * s['unit_whole_rate']:.2f} % "
                f"| {s['blocked']} | {s['control_changed']} / {s['control_items']} |"
            )
            assert want in lines, want


def test_the_two_reader_rules_change_no_query_they_should_not_as_the_docs_say() -> None:
    """docs/benchmarks.md, "Answer options and articles": on the same readings, no control
    sent as written under reader-v4's rules is changed by the two rules, and on PUPA-TNB's
    unseen half the three rows agree on every query (what leaked, refusals, words sent)."""
    folder = RESULTS / "privacy-reader" / "options-article"

    def records(name: str) -> dict[tuple[str, str], dict[str, Any]]:
        lines = (folder / name / "privacy-items.jsonl").read_text("utf-8").splitlines()
        return {(r["method"], r["id"]): r for r in map(json.loads, lines)}

    for split in ("mmlu-controls-60-119", "mmlu-controls-120-179"):
        before = records(f"{split}-reader-v4")
        for rules in ("article", "options", "options-article"):
            after = records(f"{split}-{rules}")
            assert after.keys() == before.keys()
            for key, r in after.items():
                if r["changed"] or r["blocked"]:
                    assert before[key]["changed"] or before[key]["blocked"], (rules, key)
    rows = [
        records(f"pupa-unseen-95-{rules}")
        for rules in ("reader-v4", "article", "options", "options-article")
    ]
    assert all(r.keys() == rows[0].keys() for r in rows) and len(rows[0]) == 190

    def outcome(r: dict[str, Any]) -> Any:
        return (r["values"], r["blocked"], r.get("kept_words"))

    for key in rows[0]:
        assert all(outcome(r[key]) == outcome(rows[0][key]) for r in rows), key


def test_values_v2_against_the_head_as_the_docs_say() -> None:
    """docs/benchmarks.md, "values-v2, tried and not kept": on the same readings, no
    control the head sent as written is changed by values-v2; on PUPA-TNB's unseen half
    the refusals are the same and one query sends a unit whole that the head replaced
    (PUPA_TNB/209), every other query the same units."""
    folder = RESULTS / "privacy-reader" / "values-v2"

    def records(name: str) -> dict[tuple[str, str], dict[str, Any]]:
        lines = (folder / name / "privacy-items.jsonl").read_text("utf-8").splitlines()
        return {(r["method"], r["id"]): r for r in map(json.loads, lines)}

    for split in ("mmlu-controls-0-119", "mmlu-controls-120-199"):
        head, rules = records(f"{split}-head"), records(f"{split}-values-v2")
        assert rules.keys() == head.keys()
        for key, r in rules.items():
            if r["changed"] or r["blocked"]:
                assert head[key]["changed"] or head[key]["blocked"], key
    head, rules = records("pupa-unseen-95-head"), records("pupa-unseen-95-values-v2")
    assert rules.keys() == head.keys() and len(head) == 190
    assert all(r["blocked"] == head[key]["blocked"] for key, r in rules.items())
    differ = [key for key, r in rules.items() if r["values"] != head[key]["values"]]
    assert differ == [("full+reader", "PUPA_TNB/209")]
    assert [v["unit"] for v in head[differ[0]]["values"]] == [""]
    assert [v["unit"] for v in rules[differ[0]]["values"]] == ["whole"]


def test_the_reader_v5_table_is_counted_from_the_records() -> None:
    """docs/benchmarks.md, "reader-v5": each cell counted from the per-item records of
    its folders (changed controls with refusals, PUPA's leaks and refusals, the reader's
    seconds as the README counts them)."""
    reader = RESULTS / "privacy-reader"
    rows = {
        "| reader-v4, + article |": (
            reader / "options-article",
            "mmlu-controls-60-119-article",
            "mmlu-controls-120-179-article",
            "pupa-unseen-95-article",
        ),
        "| reader-v5, not kept (": (
            reader / "reader-v5",
            "mmlu-controls-60-119",
            "mmlu-controls-120-179",
            "pupa-unseen-95",
        ),
    }
    lines = DOCS.read_text("utf-8").splitlines()
    for label, (folder, c60, c120, pupa) in rows.items():
        cells = []
        for split in (c60, c120):
            records = [
                r
                for r in map(
                    json.loads, (folder / split / "privacy-items.jsonl").open(encoding="utf-8")
                )
                if r["method"] == "full+reader"
            ]
            changed = sum(1 for r in records if r["changed"] or r["blocked"])
            refused = sum(1 for r in records if r["blocked"])
            cells.append(f"{changed} / {len(records)} ({refused})")
        units, whole, reads = _units(folder / pupa, "full+reader")
        refused = sum(
            1
            for r in map(json.loads, (folder / pupa / "privacy-items.jsonl").open(encoding="utf-8"))
            if r["method"] == "full+reader" and r["blocked"]
        )
        p50, p95 = _p50_p95(reads)
        cells.append(f"{units:.2f} % ({whole:.2f} %), {refused}")
        cells.append(f"{p50:.2f} / {p95:.1f} s, {sum(reads):,.0f} s")
        [row] = [ln for ln in lines if ln.startswith(label)]
        assert row.endswith("| " + " | ".join(cells) + " |"), (row, cells)
    passes = (reader / "reader-v5" / "grammar-passes-60-119.txt").read_text("utf-8")
    graded = [ln for ln in passes.splitlines() if "grammar tries 1" in ln]
    odd = [ln for ln in graded if not ln.endswith("odd []")]
    said = f"{len(graded)} readings went on to the grammar's pass; in {len(odd)} of them the"
    assert said in " ".join(DOCS.read_text("utf-8").split())


def test_the_quiz_names_table_is_counted_from_the_records() -> None:
    """docs/benchmarks.md, "Names in a multiple-choice question": the controls each row
    changed (refused) counted from its records, and PUPA-TNB's two detector rows alike on
    every query, as the text says."""
    folder = RESULTS / "privacy-reader" / "quiz-names"
    records = [
        json.loads(line)
        for line in (folder / "mmlu-controls-120-199" / "privacy-items.jsonl").open(
            encoding="utf-8"
        )
    ]
    lines = DOCS.read_text("utf-8").splitlines()
    for label, suffix in (
        ("with the two rules, not kept", ""),
        ("without them (drag's)", " -quiz"),
    ):
        alone = _controls_changed(records, "full" + suffix).split(" (")[0]
        read = _controls_changed(records, "full+reader" + suffix)
        assert f"| {label} | {alone} | {read} |" in lines, label
    pupa = [
        json.loads(line)
        for line in (folder / "pupa-all-detector" / "privacy-items.jsonl").open(encoding="utf-8")
    ]

    def sent(method: str) -> list[Any]:
        return [
            (r["id"], r["values"], r["blocked"], r.get("kept_words"))
            for r in pupa
            if r["method"] == method
        ]

    assert len(sent("full")) == 237 and sent("full") == sent("full -quiz")


RULE_SEARCHES = sorted(RESULTS.glob("*/rules.md"))


def _uses_context(rule: str, dist_alone: dict[str, float | None], a: str, b: str,
                  dist_context: dict[str, float | None]) -> bool:  # fmt: skip
    """The rule's way, written here again from its description in rules.md's folder
    (docs/benchmarks.md, "A teacher that is confidently wrong")."""

    def lp(d: dict[str, float | None], letter: str) -> float:
        v = d.get(letter)
        return -math.inf if v is None else v

    family, _, value = rule.partition(":")
    if family == "never":
        return False
    if family == "margin":
        return lp(dist_context, b) > lp(dist_alone, a) + float(value)
    if a == b:
        return True
    if family == "plausible":
        return math.exp(lp(dist_alone, b)) >= float(value) * math.exp(lp(dist_alone, a))
    if family == "unsure":
        return math.exp(lp(dist_alone, a)) < float(value)
    assert family == "top", rule
    order = sorted(dist_alone, key=lambda x: (-lp(dist_alone, x), x))
    return b in order[: int(value)]


@pytest.mark.parametrize("table", RULE_SEARCHES, ids=lambda p: str(p.relative_to(RESULTS)))
def test_the_gate_rule_search_is_recounted_from_the_stored_letters(table: Path) -> None:
    """rules.md (issue 49): per rule and row (student · teacher kind), right alone /
    without the gate / with the rule (the context used), recounted from the gated
    answers' two distributions over the letters and the run's answers alone."""
    answers = _answers(table.parent)
    alone = {(a["student"], a["teacher"], a["id"]): a for a in answers if a["mode"] == "none"}
    kinds = {"SIMULATION: answer key": "helpful", "SIMULATION: wrong key": "misleading",
             "SIMULATION: subtle wrong": "subtle"}  # fmt: skip
    lines = table.read_text("utf-8").splitlines()
    head = next(ln for ln in lines if ln.startswith("| rule |"))
    names = [c.strip() for c in head.strip("|").split("|")[2:]]
    body = [ln for ln in lines if ln.startswith("| ") and not ln.startswith(("| rule", "|---"))]
    assert len(body) == int(re.search(r"(\d+) rules tried", table.read_text("utf-8"))[1])
    for line in body:
        rule, met, *cells = (c.strip() for c in line.strip("|").split("|"))
        verdicts: list[bool] = []
        for name, cell in zip(names, cells, strict=True):
            size, kind = name.split(" · ")

            def kind_of(teacher: str) -> str:
                return next((v for k, v in kinds.items() if teacher.startswith(k)), "real")

            gated = [
                g
                for g in answers
                if g["mode"].endswith("+gate")
                and g["gate"].get("choices_alone")
                and size in g["student"]
                and kind_of(g["teacher"]) == kind
            ]
            right = [0, 0, 0]
            used = won = lost = 0  # against the answer without the gate
            for g in gated:
                r = g["gate"]
                a, b = r["reply_alone"].strip(), r["reply_with_context"].strip()
                take = _uses_context(rule, r["choices_alone"], a, b, r["choices_with_context"])
                used += take
                right[0] += alone[(g["student"], g["teacher"], g["id"])]["correct"]
                right[1] += b == g["answer_key"]
                right[2] += (b if take else a) == g["answer_key"]
                won += (b if take else a) == g["answer_key"] != b
                lost += b == g["answer_key"] != (b if take else a)
            want = f"{right[0]} / {right[1]} / {right[2]} ({used})"
            # Issue 49's targets, per kind of teacher; one that does not apply is left out.
            n, (n_alone, n_plain, n_gated) = len(gated), right
            if kind in ("misleading", "subtle"):
                mine = [100 * (n_gated - n_alone) / n >= -3]
                if n_plain < n_alone:
                    mine.append(n_gated > n_plain and _mcnemar(won, lost) < 0.05)
            elif kind == "helpful":
                lift = n_plain - n_alone
                mine = [(n_gated - n_alone) >= 0.85 * lift] if lift > 0 else []
            else:
                mine = [100 * (n_gated - n_alone) / n >= -2]
            verdicts += mine
            assert cell == want + ("" if all(mine) else " ✗"), (rule, name)
        assert met == f"{sum(verdicts)}/{len(verdicts)}", rule
    # The sentence the docs and the README rest on: no rule of the search meets every target.
    assert all(re.match(r"\| \S+ \| (\d+)/(?!\1 )\d+ \|", line) for line in body)


def test_the_gate_on_the_unseen_test_split_is_as_the_docs_say() -> None:
    """Issue 49's test split: the chosen rule only (the search runs on dev splits), its
    figures the docs' prose names, from rules.json (whose table the test above recounts
    from the stored letters)."""
    folder = RESULTS / "gate-misleading-mmlu-rest"
    (only,) = json.loads((folder / "rules.json").read_text("utf-8"))
    assert only["rule"] == "plausible:0.3" and (only["met"], only["of"]) == (7, 11)
    rows = {(r["student"].split("-")[2], r["kind"]): r for r in only["rows"]}
    assert {r["questions"] for r in only["rows"]} == {216}
    misled = rows[("1.5b", "misleading")]
    versus = misled["against_ungated"]
    docs = " ".join(DOCS.read_text("utf-8").split())
    assert (misled["alone"], misled["ungated"], misled["gated"]) == (107, 48, 64)
    assert (versus["wrong_to_right"], versus["right_to_wrong"]) == (16, 0)
    assert f"16 turned right, none wrong, exact McNemar p = {versus['mcnemar_p']:.5f})" in docs
    assert f"keeps {round(100 * rows[('1.5b', 'helpful')]['lift_kept'])} % of its lift" in docs
    teacher = (folder / "teacher-pass.md").read_text("utf-8")
    assert "| qwen2.5-coder-1.5b-instruct | 242 | 26 |" in teacher
    assert "the teacher's pass failed 26 of the 242" in docs


@pytest.mark.parametrize("form", ["letter", "reason"])
def test_the_gates_cost_table_is_recounted_from_each_answers_time(form: str) -> None:
    """docs/benchmarks.md, "What the gate costs": per student, the mean seconds of an
    answer without and with the gate, the median of the paired difference and the
    cost, recounted from times.jsonl (one line per answer)."""
    folder = RESULTS / f"gate-cost-mmlu-dev-{form}"
    assert f"](results/gate-cost-mmlu-dev-{form})" in DOCS.read_text("utf-8")
    times = [json.loads(line) for line in (folder / "times.jsonl").read_text().splitlines()]
    lines = DOCS.read_text("utf-8").splitlines()
    for student in dict.fromkeys(t["student"] for t in times):
        mine = [t for t in times if t["student"] == student]
        by_id: dict[str, dict[str, float]] = {}
        for t in mine:
            by_id.setdefault(t["id"], {})[t["way"]] = t["seconds"]
        plain = [w["always-evidence"] for w in by_id.values()]
        gated = [w["gate"] for w in by_id.values()]
        added = statistics.median(g - p for p, g in zip(plain, gated, strict=True))
        cost = statistics.fmean(gated) / statistics.fmean(plain) - 1
        size = "0.5B" if "0.5b" in student else "1.5B"
        row = (
            f"| {form} | {size} | {len(by_id)} | {statistics.fmean(plain):.2f} "
            f"| {statistics.fmean(gated):.2f} | {added:+.2f} s | {100 * cost:+.1f} % |"
        )
        assert row in lines, row


_NOT_IN_FILES = "Your files do not say."


def _held_where(r: dict[str, Any], unsure: Any) -> dict[str, Any]:
    """A stored files answer as a further sureness rule would leave it: one the run let
    through is held back ("Your files do not say.", scored again) where ``unsure(its
    tokens' log-probabilities)``; any other as it is."""
    from drag_bench.localdocs.scoring import abstains, score

    lp = r["support"]["logprobs"]
    if r["held_back"] or abstains(r["reply"]) or not lp or not unsure(lp):
        return r
    v = score(_NOT_IN_FILES, r["gold"], r["type"])
    return {**r, "reply": _NOT_IN_FILES, "held_back": True, "right": v.right, "error": v.error}


def _read_times(r: dict[str, Any]) -> list[str]:
    """The times of the passages a stored files answer read, in order."""
    return [s["time"] for s in r["sources"]]


def test_the_sureness_runs_are_as_the_docs_say() -> None:
    """Issue 51: the student's sureness, chosen on the tune half and read on the report
    half: each rule applied again to the stored replies and their tokens'
    log-probabilities, scored by the benchmark's scorer, and the product's threshold."""
    from drag_bench.localdocs.scoring import score

    from assistant.drag import filessupport

    def judged(items: list[dict[str, Any]], unsure: Any) -> tuple[int, int, int, int]:
        """Right, Null right, errors, answerable held back: an answer the run let
        through held back where ``unsure(its logprobs)``."""
        right = null = errors = back = 0
        for r in (_held_where(r, unsure) for r in items):
            v = score(r["reply"], r["gold"], r["type"])
            right, errors = right + v.right, errors + v.error
            null += v.right and r["type"] == "Null"
            back += r["reply"] == _NOT_IN_FILES and r["type"] != "Null"
        return right, null, errors, back

    def lowest(lp: list[float]) -> bool:
        return min(lp) < -2.0

    def either(lp: list[float]) -> bool:
        return lowest(lp) or statistics.fmean(lp) < -0.35

    docs = " ".join((RESULTS.parent / "benchmarks.md").read_text("utf-8").split())
    tune = _local_docs("local-docs-sureness-tune")
    assert len(tune) == 105 and filessupport.SURE_AT_LEAST == -2.0
    assert judged(tune, lambda _lp: False)[::2] == (60, 33)
    assert judged(tune, lowest)[::2] == (62, 31)
    assert judged(tune, either)[::2] == (60, 23)
    assert "62 right against 60, errors 33 to 31" in docs
    assert "Tune: errors 31 to 23, right 62 to 60" in docs
    earlier = (RESULTS / "local-docs-judge-tune" / "choose.txt").read_text("utf-8")
    assert "0.830  the judge's ln P(no)" in earlier and "0.727  the whole reply" in earlier
    assert "(AUC 0.727 against 0.830 on the tune half;" in docs
    yes_or_no = [
        r
        for r in tune
        if re.match(r"(?i)\s*(yes|no)\b", r["support"].get("unsupported", r["reply"]))
    ]
    lowest_yes_or_no = min(min(r["support"]["logprobs"]) for r in yes_or_no)
    assert f"their lowest token {lowest_yes_or_no:.2f}".replace("-", "−") in docs
    report = _local_docs("local-docs-sureness-report")
    assert len(report) == 87
    # The run had the kept rule on: the one answer with a token below -2.0 was held back
    # by the word rules too, so the run's replies are the word check's.
    unsure = [r["support"] for r in report if min(r["support"]["logprobs"]) < -2.0]
    assert len(unsure) == 1 and all(
        s["found"] < filessupport.FOUND_AT_LEAST
        or s["covered"] < filessupport.COVERED_AT_LEAST
        or s["day"] is False
        for s in unsure
    )
    n_answerable = sum(r["type"] != "Null" for r in report)
    rows = {
        "the word check alone": judged(report, lambda _lp: False),
        "and a token below −2.0 (kept)": judged(report, lowest),
        "and a mean below −0.35 (not kept)": judged(report, either),
    }
    for name, (right, null, errors, back) in rows.items():
        line = (
            f"| {name} | {right} | {null} of 6 | {100 * errors / 87:.1f} % | {back} of "
            f"{n_answerable} ({100 * back / n_answerable:.1f} %) |"
        )
        assert line in docs, line
    # What the mean's rule held back on the report half, and what it changed.
    let_through = [r for r in report if _held_where(r, either) != r]
    answerable = [r for r in let_through if r["type"] != "Null"]
    wrong = sum(not r["right"] for r in answerable)
    plain, with_mean = rows["the word check alone"], rows["and a mean below −0.35 (not kept)"]
    said = (
        f"Report: errors {plain[2]} to {with_mean[2]} and Null {plain[1]} to {with_mean[1]} of 6"
        f", the same {plain[0]} right"
    )
    assert said in docs, said
    said = f"held back in all ({len(answerable)} by this rule, {wrong} of them wrong), and "
    said += f"{len(let_through) - len(answerable)} unanswerable caught"
    assert said in docs, said
    # The bound: even holding back only wrong answers, up to 5 % of the answerable ones,
    # and catching every unanswerable one.
    right, _null, errors, back = rows["the word check alone"]
    answerable_right = right - rows["the word check alone"][1]
    wrong_claims = sum(r["error"] for r in report if r["type"] != "Null")
    best = wrong_claims - (int(0.05 * n_answerable) - back)
    assert (answerable_right, wrong_claims, errors - wrong_claims) == (45, 35, 5)
    said = f"still leaves {best} errors of 87 ({100 * best / 87:.1f} %)"
    assert said in docs, said
    assert "right on 45 of the 81 answerable questions; 35 of its wrong answers" in docs


def _files_row(name: str, items: list[dict[str, Any]]) -> str:
    """A row of the docs' tables of issue 51's tune and report runs: right, errors, Null
    right, answerable held back, evidence chats read; counted from the items."""
    nulls = [r for r in items if r["type"] == "Null"]
    answerable = [r for r in items if r["type"] != "Null"]
    return (
        f"| {name} | {sum(r['right'] for r in items)} | {sum(r['error'] for r in items)} | "
        f"{sum(r['right'] for r in nulls)} of {len(nulls)} | "
        f"{sum(r['held_back'] for r in answerable)} of {len(answerable)} | "
        f"{sum(r['evidence_found'] for r in items)} of "
        f"{sum(r['evidence_wanted'] for r in items)} |"
    )


def test_the_day_first_runs_are_as_the_docs_say() -> None:
    """Issue 51's named day first (kept) and names read apart (not kept): each row of the
    docs' table counted again from the stored items, the earlier runs with the kept
    sureness rule applied as the product applies it; the runs compare (a question whose
    passages did not change got the same reply)."""
    from assistant.base.textform import dates_in, month_days

    def kept_rule(lp: list[float]) -> bool:
        return min(lp) < -2.0

    runs = {
        "tune, before (the sureness run, kept rule)": [
            _held_where(r, kept_rule) for r in _local_docs("local-docs-sureness-tune")
        ],
        "tune, the day first (kept)": _local_docs("local-docs-dayfirst-tune"),
        "tune, and names read apart (not kept)": _local_docs("local-docs-names-tune"),
        "report, before (the sureness run)": _local_docs("local-docs-sureness-report"),
        "report, the day first": _local_docs("local-docs-dayfirst-report"),
    }
    docs = (RESULTS.parent / "benchmarks.md").read_text("utf-8")
    for name, items in runs.items():
        assert _files_row(name, items) in docs, _files_row(name, items)
    before, after = (list(runs)[i] for i in (0, 1))
    earlier = {r["question"]: r for r in runs[before]}
    same = [r for r in runs[after] if _read_times(r) == _read_times(earlier[r["question"]])]
    assert len(same) == 90 and all(r["reply"] == earlier[r["question"]]["reply"] for r in same)
    gained = sum(r["right"] and not earlier[r["question"]]["right"] for r in runs[after])
    lost = sum(earlier[r["question"]]["right"] and not r["right"] for r in runs[after])
    assert (gained, lost) == (1, 1)
    said = f"{len(runs[after]) - len(same)} questions read other passages; the {len(same)} whose"
    assert said in " ".join(docs.split())
    report = {r["question"]: r for r in runs["report, before (the sureness run)"]}
    moved = [
        r
        for r in runs["report, the day first"]
        if _read_times(r) != _read_times(report[r["question"]])
    ]
    naming = [
        q
        for q in report
        if dates_in(q, compact=True) or month_days(q)  # as the product reads
    ]
    assert {r["question"] for r in moved} == set(naming) and len(naming) == 2
    assert "On the report half only 2 questions name a day" in " ".join(docs.split())
    # The one stored reply writing "20260901_13:00": let through by the check as it was
    # and as it is (recheck.txt).
    [stored, now, before] = (
        (RESULTS / "local-docs-dayfirst-tune" / "recheck.txt").read_text("utf-8").splitlines()
    )
    assert stored.startswith("stored:") and "'not_in_files': False" in stored
    assert now.endswith("not_in_files False") and before.endswith("not_in_files False")
    assert "was let through either way" in " ".join(docs.split())


def test_the_prompt_trials_are_as_the_docs_say() -> None:
    """Issue 51's two wordings of the files prompt on the tune half (neither kept): each
    row counted from its items, and the product's prompt the one they were set against."""
    from assistant.drag import answer

    runs = {
        "the day first, files-answer-v1 (kept)": _local_docs("local-docs-dayfirst-tune"),
        "A: the question first too": _local_docs("local-docs-prompt-tune/question-first"),
        "B: in the words of the message": _local_docs("local-docs-prompt-tune/extractive"),
    }
    docs = (RESULTS.parent / "benchmarks.md").read_text("utf-8")
    for name, items in runs.items():
        assert len(items) == 105 and _files_row(name, items) in docs, _files_row(name, items)
    kept, *tried = (sum(r["right"] for r in items) for items in runs.values())
    assert max(tried) < kept + 2  # the rule's bound
    words = [statistics.median(len(r["reply"].split()) for r in items) for items in runs.values()]
    assert words == [7, 9, 5]
    assert "(7 words with the kept prompt, 9 with A, 5 with B)" in " ".join(docs.split())
    sources = [[_read_times(r) for r in items] for items in runs.values()]
    assert sources[0] == sources[1] == sources[2]
    assert answer.FILES_PROMPT_VERSION_PATHS == "files-answer-v1"  # whole paths, as then
