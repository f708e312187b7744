"""The privacy benchmark's scoring (the unit scorer's categories, the guard's forms),
its summary, its Markdown table and its plot."""

from __future__ import annotations

import functools
import json
import re
import statistics
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from assistant.base.textform import normalise
from assistant.drag import evidence
from assistant.privacy.guard import template_fragments, value_form, without
from assistant.privacy.policy import load_policy
from drag_bench import leakscore
from drag_bench.privacy.datasets import Item
from drag_bench.privacy.methods import Outcome
from drag_bench.privacy.publicunits import public_unit
from drag_bench.stats import percentile

_PROMPT_WORDS = template_fragments((evidence.USER,))  # the evidence prompt's own text
_PROMPT_HEAD, _PROMPT_TAIL = evidence.USER.format(n="\0", question="\1").split("\1")


def sent_question(content: str) -> str:
    """The question part of the evidence prompt as sent (the unit scorer's own reading,
    not the guard's template handling): what stands between the prompt's head and tail."""
    head = _PROMPT_HEAD.split("\0")[-1]
    start = content.find(head)
    start = start + len(head) if start >= 0 else 0
    end = content.rfind(_PROMPT_TAIL) if _PROMPT_TAIL.strip() else -1
    return content[start : end if end >= start else len(content)]


class Categories:
    """The unit scorer's own classifier: LINK, EMAIL or NUMBER by shape, else the spaCy
    label of the entity the unit stands in (NONE when spaCy sees none)."""

    def __init__(self) -> None:
        import spacy

        from assistant.privacy.engine import spacy_model

        self.nlp = spacy.load(spacy_model(load_policy().model), disable=["parser"])
        self._docs: dict[str, Any] = {}

    def of(self, unit: str, text: str) -> str:
        if re.search(r"https?://|www\.|\.(?:com|org|net)\b|[\w-]/[\w-]", unit):
            return "LINK"
        if "@" in unit:
            return "EMAIL/HANDLE"
        if len(leakscore.digits(unit)) >= max(4, sum(c.isalpha() for c in unit)):
            return "NUMBER"
        if text not in self._docs:
            self._docs = {text: self.nlp(text[:100_000])}  # one item at a time
        doc = self._docs[text]
        at = text.lower().find(unit.lower())
        if at >= 0:
            end = at + len(unit)
            for ent in doc.ents:
                if ent.start_char < end and at < ent.end_char:
                    return str(ent.label_)
        labels = [e.label_ for e in self.nlp(unit).ents]
        return str(labels[0]) if labels else "NONE"


@functools.cache
def categories() -> Categories:
    """The classifier, loaded on first use (spaCy: a second or two)."""
    return Categories()


def score(item: Item, outcome: Outcome) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": item.id,
        "control": item.control,
        "blocked": outcome.sent is None,
        "changed": outcome.changed,
        "seconds": outcome.seconds,
        "note": outcome.note,
        "values": [],
    }
    sent = outcome.sent or ""
    # Look at the message text as the teacher would read it, JSON escapes undone, and
    # without our own prompt's words ("vide" is no leak for being in "evidence").
    content = json.loads(sent)["messages"][1]["content"] if sent else ""
    readable = without(content, _PROMPT_WORDS)
    flat = normalise(readable)
    question = sent_question(content) if sent else ""
    unit_view = leakscore.SentText(question)
    # Units not in their own text at all (PUPA's are a model's extraction) are not scored.
    source = leakscore.SentText(item.text)
    presence = {value: source.how_sent(value) is not None for _, value in item.pii}
    for entity, value in item.pii:
        # Strict byte-level forms: a value inside a longer word still counts.
        exact = bool(sent) and value in readable
        normalised = exact or (bool(sent) and normalise(value) in flat)
        partial = normalised or (
            bool(sent) and value_form(entity, value, readable, flat) is not None
        )
        present = presence[value]
        record["values"].append(
            {
                "type": entity,
                "exact": exact,
                "normalised": normalised,
                "partial": partial,
                "category": categories().of(value, item.text) if present else "ABSENT",
                "present": present,
                "unit": (unit_view.how_sent(value) or "") if present and sent else "",
            }
        )
        if present and public_unit(value):  # a public name, listed in the summary
            record["values"][-1]["public"] = value
    units = [v for _, v in item.pii]
    if sent:
        record["kept_words"] = leakscore.kept_words(item.text, question, units)
    if item.control and item.id.startswith("mmlu/") and outcome.changed:
        # A public MMLU question (never a user's query): what a method changed in it is
        # kept, so that over-redaction can be read item by item.
        record["sent_control"] = question
    if item.reference is not None:
        record["reference_kept_words"] = leakscore.kept_words(item.text, item.reference, units)
        ref = leakscore.SentText(item.reference)
        ref_forms = [ref.how_sent(v) for v in units if presence[v]]
        record["reference_leaks"] = sum(1 for form in ref_forms if form)
        record["reference_whole_leaks"] = ref_forms.count("whole")
    return record


def _rate(n: int, d: int) -> float:
    return n / d if d else 0.0


def summarise(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    records = list(records)
    values = [v for r in records for v in r["values"]]
    by_type: dict[str, dict[str, Any]] = {}
    for v in values:
        t = by_type.setdefault(
            v["type"], {"injected": 0, "exact": 0, "normalised": 0, "partial": 0}
        )
        t["injected"] += 1
        for form in ("exact", "normalised", "partial"):
            t[form] += int(v[form])
    control = [r for r in records if r["control"]]
    stages: dict[str, list[float]] = {}
    for r in records:
        for stage, s in r["seconds"].items():
            stages.setdefault(stage, []).append(s * 1000)

    units = [v for v in values if v.get("present", True)]
    by_category: dict[str, list[int]] = {}
    for v in units:
        c = by_category.setdefault(v.get("category", v["type"]), [0, 0])
        c[0] += int(bool(v.get("unit")))
        c[1] += 1
    unit_leaks = sum(bool(v.get("unit")) for v in units)
    whole_leaks = sum(v.get("unit") == "whole" for v in units)
    with_reference = [r for r in records if "reference_kept_words" in r]
    private = [v for v in units if not v.get("public")]
    private_leaks = sum(bool(v.get("unit")) for v in private)
    private_whole = sum(v.get("unit") == "whole" for v in private)
    return {
        "items": len(records),
        "injected": len(values),
        "units": len(units),
        "units_absent": len(values) - len(units),
        "unit_leaked": unit_leaks,
        "unit_leak_rate": _rate(unit_leaks, len(units)),
        # The unit itself in what was sent, not only one of its words ("services").
        "unit_leaked_whole": whole_leaks,
        "unit_whole_rate": _rate(whole_leaks, len(units)),
        "by_category": by_category,
        # The same without the units the product's rule calls public (issue 48), and
        # those units, so that the split can be read.
        "public_units": sorted({v["public"] for v in units if v.get("public")}),
        "without_public": {
            "units": len(private),
            "unit_leaked": private_leaks,
            "unit_leak_rate": _rate(private_leaks, len(private)),
            "unit_leaked_whole": private_whole,
            "unit_whole_rate": _rate(private_whole, len(private)),
        },
        "kept_words": leakscore.share(tuple(r["kept_words"]) for r in records if "kept_words" in r),
        "reference_kept_words": (
            leakscore.share(tuple(r["reference_kept_words"]) for r in with_reference)
            if with_reference
            else None
        ),
        "reference_unit_leak_rate": (
            _rate(sum(r["reference_leaks"] for r in with_reference), len(units))
            if with_reference
            else None
        ),
        "reference_whole_rate": (
            _rate(sum(r.get("reference_whole_leaks", 0) for r in with_reference), len(units))
            if with_reference
            else None
        ),
        "leaked": {f: sum(v[f] for v in values) for f in ("exact", "normalised", "partial")},
        "leak_rate": {
            f: _rate(sum(v[f] for v in values), len(values))
            for f in ("exact", "normalised", "partial")
        },
        "by_type": by_type,
        "blocked": sum(r["blocked"] for r in records),
        "control_items": len(control),
        "control_changed": sum(r["changed"] for r in control),
        "over_redaction": _rate(sum(r["changed"] for r in control), len(control)),
        "latency_ms": {
            s: {"p50": statistics.median(xs), "p95": percentile(xs, 0.95, empty=0.0)}
            for s, xs in stages.items()
        },
    }


def _per_key(
    summaries: dict[str, dict[str, Any]], field: str, what: str, cell: Callable[[Any], str]
) -> list[str]:
    """A Markdown table: one row per key of each summary's ``field`` (a category, a
    type), one column per method, ``cell`` of that entry or "–"."""
    keys = sorted({k for s in summaries.values() for k in s[field]})
    lines = [f"| {what} | " + " | ".join(summaries) + " |", "|---|" + "---:|" * len(summaries)]
    for k in keys:
        cells = [cell(s[field][k]) if k in s[field] else "–" for s in summaries.values()]
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return lines


def render(summaries: dict[str, dict[str, Any]], title: str) -> str:
    lines = [f"## {title}", ""]
    lines += [
        "Unit scorer (independent of the guard: the unit, a word of 4+ letters or its "
        "digits, folded):",
        "",
        "| method | units | leaked | rate | whole unit leaked | refused | non-PII words kept |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for method, s in summaries.items():
        lines.append(
            f"| {method} | {s['units']} | {s['unit_leaked']} | {s['unit_leak_rate']:.2%} "
            f"| {s['unit_leaked_whole']} ({s['unit_whole_rate']:.2%}) "
            f"| {s['blocked']} | {s['kept_words']:.1%} |"
        )
    for method, s in summaries.items():
        w = s.get("without_public")
        if w and w["units"] < s["units"]:
            lines.append(
                f"| {method}, without the {s['units'] - w['units']} public units "
                f"| {w['units']} | {w['unit_leaked']} | {w['unit_leak_rate']:.2%} "
                f"| {w['unit_leaked_whole']} ({w['unit_whole_rate']:.2%}) | – | – |"
            )
    ref = next(iter(summaries.values()), {})
    if ref.get("reference_kept_words") is not None:
        lines.append(
            f"| reference redaction (the dataset's) | {ref['units']} | – "
            f"| {ref['reference_unit_leak_rate']:.2%} | {ref['reference_whole_rate']:.2%} "
            f"| – | {ref['reference_kept_words']:.1%} |"
        )
    if ref.get("public_units"):
        lines.append(
            "\nUnits the product's rule calls public (a listed company or a well-known "
            f"platform, docs/privacy.md): {', '.join(ref['public_units'])}."
        )
    if ref.get("units_absent"):
        lines.append(f"\n{ref['units_absent']} unit(s) not found in their own text: not counted.")
    lines += ["", "Unit scorer by category (leaked / units):", ""]
    lines += _per_key(summaries, "by_category", "category", lambda n: f"{n[0]}/{n[1]}")
    lines += ["", "The guard's own forms (the old columns, for comparison):", ""]
    lines += [
        "| method | items | injected | leaked exact | normalised | partial | refused "
        "| control changed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for method, s in summaries.items():
        r = s["leak_rate"]
        lines.append(
            f"| {method} | {s['items']} | {s['injected']} | {r['exact']:.2%} "
            f"| {r['normalised']:.2%} | {r['partial']:.2%} | {s['blocked']} "
            f"| {s['control_changed']}/{s['control_items']} |"
        )
    lines += ["", "Partial leakage by entity type (leaked / injected):", ""]
    lines += _per_key(summaries, "by_type", "type", lambda c: f"{c['partial']}/{c['injected']}")
    lines += ["", "Latency per question (ms, p50 / p95):", ""]
    for method, s in summaries.items():
        parts = [f"{k} {v['p50']:.0f} / {v['p95']:.0f}" for k, v in s["latency_ms"].items()]
        lines.append(f"- {method}: " + ", ".join(parts))
    return "\n".join(lines)


def plot(summaries: dict[str, dict[str, Any]], title: str, path: Path) -> Path:
    """Partial leakage per entity type (and overall), one bar per method."""
    from drag_bench.plots import grouped_bars

    types = sorted({t for s in summaries.values() for t in s["by_type"]})
    groups: dict[str, dict[str, float]] = {
        "all": {m: s["leak_rate"]["partial"] for m, s in summaries.items()}
    }
    for t in types:
        groups[t] = {
            m: _rate(s["by_type"][t]["partial"], s["by_type"][t]["injected"])
            for m, s in summaries.items()
            if t in s["by_type"]
        }
    groups["control changed"] = {m: s["over_redaction"] for m, s in summaries.items()}
    return grouped_bars(path, groups, title=title, ylabel="values leaked, partial form")
