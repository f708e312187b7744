"""Privacy-leakage benchmark (the DRAG paper's App. G protocol, made exact).

Every item goes through an upload path and the benchmark measures what would
actually leave: the exact body of the evidence request.  Methods, in one run:

* ``full``      -- this product: detection, placeholders, optional student rewrite,
                   and the egress guard (a refused request sends nothing);
* ``reader``    -- the same, with the local model reading each question too
                   (privacy.reader, through ``Runtime.read`` as ``drag ask`` calls it);
* ``presidio``  -- baseline: Presidio's default recognizers and thresholds, each
                   finding replaced by ``<ENTITY_TYPE>``;
* ``rewrite``   -- baseline, the paper's method: the student's rewrite alone.

Two scorers, side by side:

* the **unit scorer** (``drag_bench.leakscore``, no code shared with the guard): a
  unit leaked when it, any of its words of 4+ letters, or its digit run is in what was
  sent, after Unicode and case folding -- for every type; reported per category (the
  spaCy label of the unit where it stands in the text, or LINK / EMAIL / NUMBER), and
  apart, the units sent whole (not only a word such as "services" of a longer one);
* the old columns, for comparison: *exact*, *normalised* and *partial* (the egress
  guard's own ``leak()`` forms).

Utility: the control set (no PII) gives over-redaction, and every item the share of
its non-personal words still in what was sent (for PUPA also of PUPA's own
``redacted_query``, a strong model's redaction).  Results: a Markdown table on stdout,
JSON and a per-item JSONL in ``--out``; ``--resume`` continues an interrupted run.

    drag bench privacy [--dataset bundled|presidio|pupa|FILE.csv|FILE.jsonl]
                       [--split all|seen|unseen] [--limit N] [--methods ...]

``--split seen|unseen`` keeps the items the rules were written from, or the others:
for presidio-research, ``seen`` = the templates of items 0-749 and ``unseen`` = items of
any other template (split by template, not by index); for PUPA, ``seen`` = queries whose
conversation hash starts with 0-7 (the half whose leaks were read), ``unseen`` = 8-f.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import functools
import itertools
import json
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from assistant import config, egress, evidence
from assistant.errors import DragError, GuardBlocked, PrivacyError
from assistant.privacy.detector import Detector
from assistant.privacy.engine import offline_email_recognizer, spacy_engine
from assistant.privacy.generalise import Generaliser
from assistant.privacy.guard import EgressGuard, leak, template_fragments, without
from assistant.privacy.placeholders import Vault
from assistant.privacy.policy import category_modes, load_policy
from assistant.privacy.reader import Reading
from assistant.privacy.sanitize import REWRITE_SYSTEM, sanitize
from assistant.privacy.textform import normalise
from assistant.runtime import Runtime
from drag_bench import arguments, leakscore, split_choices
from drag_bench.make_privacy_set import DEFAULT_MMLU, full_text
from drag_bench.mc import MCQuestion, extract_choice
from drag_bench.stats import paired, percentile

METHODS = ("full", "reader", "presidio", "rewrite")
# presidio-research labels that are personal data in this product's policy (GPE, dates,
# titles, ages and nationalities are left in questions on purpose: see policy.yaml).
PRESIDIO_RESEARCH_SCOPE = {
    "PERSON",
    "STREET_ADDRESS",
    "ORGANIZATION",
    "CREDIT_CARD",
    "PHONE_NUMBER",
    "EMAIL_ADDRESS",
    "IBAN_CODE",
    "US_SSN",
    "IP_ADDRESS",
    "US_DRIVER_LICENSE",
}


@dataclass(frozen=True)
class Item:
    id: str
    text: str
    pii: tuple[tuple[str, str], ...]  # (entity type, value)
    control: bool = False
    reference: str | None = None  # another redaction of the same text (PUPA's)
    # Whether the rules were written from this item's misses (None: no split known).
    seen: bool | None = None


PUPA_TNB = DEFAULT_MMLU.parent / "pupa" / "PUPA_TNB.csv"
# Units that are a redaction already ("<PRESIDIO_ANONYMIZED_PERSON>"): nothing to leak.
_ALREADY_REDACTED = re.compile(r"presidio_anonymi[sz]ed|^\s*[<\[].*[>\]]\s*$", re.IGNORECASE)
# presidio-research: rules were written from the misses of items 0-749 (see README).
PRESIDIO_LOOKED_AT = 750
PUPA_LOOKED_AT = frozenset("01234567")  # first hex digit of the conversation hash


def bundled_path() -> Path:
    return Path(str(resources.files("drag_bench") / "data" / "privacy_mmlu.jsonl"))


def load_bundled(path: Path | None = None) -> list[Item]:
    items = []
    for line in (path or bundled_path()).read_text("utf-8").splitlines():
        r = json.loads(line)
        pii = tuple((p["type"], p["value"]) for p in r["pii"])
        items.append(Item(r["id"], full_text(r), pii, control=not pii))
    return items


def load_presidio_research(path: Path) -> list[Item]:
    data = json.loads(path.read_text("utf-8"))
    looked_at = {r.get("template_id") for r in data[:PRESIDIO_LOOKED_AT]}
    items = []
    for n, r in enumerate(data):
        pii = tuple(
            (s["entity_type"], s["entity_value"])
            for s in r["spans"]
            if s["entity_type"] in PRESIDIO_RESEARCH_SCOPE
        )
        items.append(
            Item(
                f"presidio-research/{n}",
                r["full_text"],
                pii,
                control=not r["spans"],
                seen=r.get("template_id") in looked_at,
            )
        )
    return items


def split_items(items: list[Item], split: str) -> list[Item]:
    """``seen``: the items the rules were written from; ``unseen``: the others;
    ``all``: every item."""
    if split == "all":
        return items
    if any(i.seen is None for i in items):
        raise ValueError(f"--split {split}: this dataset has no seen/unseen split")
    return [i for i in items if i.seen == (split == "seen")]


def load_csv(path: Path) -> list[Item]:
    """PUPA's CSV: ``user_query`` and ``pii_units`` (joined by ``||``); its
    ``redacted_query`` is kept as the reference redaction."""
    items = []
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = {"user_query", "pii_units"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: no column {', '.join(sorted(missing))}")
        for n, r in enumerate(reader):
            units = [u.strip() for u in (r["pii_units"] or "").split("||")]
            pii = tuple(("UNIT", u) for u in units if u and not _ALREADY_REDACTED.search(u))
            items.append(
                Item(
                    f"{path.stem}/{n}",  # conversation hashes repeat: one per query
                    r["user_query"],
                    pii,
                    control=not pii,
                    reference=r.get("redacted_query") or None,
                    # The half of PUPA-TNB whose leaks were read to write the rules.
                    seen=r["conversation_hash"][:1] in PUPA_LOOKED_AT
                    if r.get("conversation_hash")
                    else None,
                )
            )
    return items


def load_jsonl(path: Path) -> list[Item]:
    """Generic: one ``{"text": ..., "pii": ["value", ...]}`` per line (types optional)."""
    items = []
    for n, line in enumerate(path.read_text("utf-8").splitlines()):
        if not line.strip():
            continue
        r = json.loads(line)
        pii = tuple(
            (p.get("type", "UNKNOWN"), p["value"]) if isinstance(p, dict) else ("UNKNOWN", str(p))
            for p in r.get("pii", [])
        )
        items.append(Item(str(r.get("id", n)), r["text"], pii, control=not pii))
    return items


def load_dataset(name: str) -> list[Item]:
    if name == "bundled":
        return load_bundled()
    if name == "presidio":
        return load_presidio_research(
            DEFAULT_MMLU.parent / "presidio_research" / "synth_dataset_v2.json"
        )
    if name == "pupa":
        return load_csv(PUPA_TNB)
    path = Path(name)
    if path.suffix == ".json":
        return load_presidio_research(path)
    if path.suffix == ".csv":
        return load_csv(path)
    return load_jsonl(path)


def evidence_request(
    question: str,
    protected: tuple[tuple[str, str], ...] = (),
    n: int = 15,
    public: tuple[str, ...] = (),
) -> egress.ChatRequest:
    """The evidence request that would carry ``question`` (as Teacher.request builds it)."""
    return egress.ChatRequest(
        purpose="evidence",
        model="teacher",
        messages=(
            {"role": "system", "content": evidence.SYSTEM},
            {"role": "user", "content": evidence.USER.format(n=n, question=question)},
        ),
        max_tokens=2048,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "evidence", "schema": evidence.schema(n)},
        },
        protected=protected,
        templates=(evidence.SYSTEM, evidence.USER),
        public=public,
    )


def evidence_body(question: str, n: int = 15) -> bytes:
    """The exact body the evidence request would carry for ``question``."""
    return evidence_request(question, n=n).payload_bytes()


@dataclass
class Outcome:
    """What one method did with one item."""

    sent: str | None  # the outgoing body as text; None = refused, nothing sent
    seconds: dict[str, float] = field(default_factory=dict)
    changed: bool = False  # the question was altered before upload
    note: str = ""


Method = Callable[[Item], Outcome]


class RecordingGuard:
    """Passes the judgement to the real guard and keeps the last body it let through."""

    def __init__(self, guard: EgressGuard) -> None:
        self.guard = guard
        self.last: bytes | None = None

    def check_body(self, body: bytes, request: egress.ChatRequest | egress.ModelsRequest) -> None:
        self.guard.check_body(body, request)
        self.last = body

    def check_headers(
        self, headers: dict[str, str], request: egress.ChatRequest | egress.ModelsRequest
    ) -> None:
        self.guard.check_headers(headers, request)


Sender = Callable[[egress.ChatRequest, RecordingGuard], None]


def make_full(
    detector: Detector,
    rewriter: Callable[[str, str], str] | None,
    send: Sender | None = None,
    read: Callable[[str], Reading | None] | None = None,
) -> Method:
    """This product's upload path; with ``send``, each request really goes to the teacher;
    with ``read`` (:meth:`Runtime.read`, as ``drag ask`` calls it), the local model reads
    each question too."""
    guard = EgressGuard(detector)
    generaliser = Generaliser.from_policy(detector.policy.generalise)

    def run(item: Item) -> Outcome:
        vault = Vault(tag_of=load_policy().tag)  # one fresh session per item
        try:
            reading = read(item.text) if read is not None else None
        except PrivacyError as exc:  # fails closed: nothing is sent
            return Outcome(None, {}, True, str(exc))
        san = sanitize(
            item.text,
            scanner=detector,
            vault=vault,
            guard=guard,
            rewriter=rewriter,
            rewrite="on-detection" if rewriter else "never",
            generaliser=generaliser,
            read=reading,
        )
        seconds = dict(san.stages)
        if san.unread:  # drag ask without a review (--yes) refuses it: so does this
            return Outcome(None, seconds, True, san.unread_line)
        request = evidence_request(
            san.text, tuple(vault.values()), public=tuple(san.hints.values())
        )
        recorder = RecordingGuard(guard)
        started = time.perf_counter()
        try:
            if send is None:  # --no-teacher: judge and record, send nothing
                recorder.check_body(request.payload_bytes(), request)
            else:  # through egress.send: recorder.last ends as the bytes the HTTP hook saw
                send(request, recorder)
        except GuardBlocked as exc:
            seconds["guard"] = time.perf_counter() - started
            return Outcome(None, seconds, True, str(exc))
        seconds["guard" if send is None else "guard+upload"] = time.perf_counter() - started
        sent = recorder.last.decode("utf-8") if recorder.last is not None else None
        return Outcome(sent, seconds, san.text != item.text, san.rewrite_note)

    return run


def make_presidio_default() -> Method:
    from presidio_analyzer import AnalyzerEngine

    # Presidio's defaults (all predefined recognizers, default thresholds, default entity
    # mapping); only the spaCy model differs: en_core_web_lg cannot be installed here, so
    # both methods run on the policy's en_core_web_md.
    nlp = spacy_engine(
        {
            "nlp_engine_name": "spacy",
            "models": [{"lang_code": "en", "model_name": load_policy().model}],
        }
    )
    engine = AnalyzerEngine(nlp_engine=nlp, supported_languages=["en"])
    # One deviation: Presidio's e-mail check would download a suffix list (no traffic here).
    engine.registry.remove_recognizer("EmailRecognizer")
    engine.registry.add_recognizer(offline_email_recognizer())

    def run(item: Item) -> Outcome:
        started = time.perf_counter()
        results = engine.analyze(text=item.text, language="en")
        spans = sorted(
            {(r.start, r.end, r.entity_type) for r in results}, key=lambda s: (s[0], -s[1])
        )
        out, cursor = [], 0
        for start, end, entity in spans:
            if start < cursor:
                continue
            out += [item.text[cursor:start], f"<{entity}>"]
            cursor = end
        out.append(item.text[cursor:])
        text = "".join(out)
        return Outcome(
            evidence_body(text).decode("utf-8"),
            {"detect": time.perf_counter() - started},
            text != item.text,
        )

    return run


def make_rewrite_only(rewriter: Callable[[str, str], str]) -> Method:
    def run(item: Item) -> Outcome:
        started = time.perf_counter()
        text = rewriter(REWRITE_SYSTEM, item.text).strip() or item.text
        return Outcome(
            evidence_body(text).decode("utf-8"),
            {"rewrite": time.perf_counter() - started},
            text != item.text,
        )

    return run


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
    presence = {value: source.leak(value) is not None for _, value in item.pii}
    for entity, value in item.pii:
        # Strict byte-level forms: a value inside a longer word still counts.
        exact = bool(sent) and value in readable
        normalised = exact or (bool(sent) and normalise(value) in flat)
        partial = normalised or (bool(sent) and leak(entity, value, readable, flat) is not None)
        present = presence[value]
        record["values"].append(
            {
                "type": entity,
                "exact": exact,
                "normalised": normalised,
                "partial": partial,
                "category": categories().of(value, item.text) if present else "ABSENT",
                "present": present,
                "unit": (unit_view.leak(value) or "") if present and sent else "",
            }
        )
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
        ref_forms = [ref.leak(v) for v in units if presence[v]]
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
    ref = next(iter(summaries.values()), {})
    if ref.get("reference_kept_words") is not None:
        lines.append(
            f"| reference redaction (the dataset's) | {ref['units']} | – "
            f"| {ref['reference_unit_leak_rate']:.2%} | {ref['reference_whole_rate']:.2%} "
            f"| – | {ref['reference_kept_words']:.1%} |"
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


def _student_rewriter() -> Callable[[str, str], str]:
    from assistant import modelfiles
    from assistant.student import Student

    settings = config.load()
    path, _spec = modelfiles.resolve(settings.student.model)
    student = Student(path, n_ctx=settings.student.n_ctx, gpu=settings.student.gpu)

    def rewrite(system: str, text: str) -> str:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": text}]
        return student.chat(messages, max_tokens=max(64, len(text) // 2)).text

    return rewrite


@contextlib.contextmanager
def _sender() -> Iterator[Sender]:
    """Send each request to the configured teacher (asking for one token: only the
    upload is measured), through egress.send and its HTTP hook."""

    with Runtime(config.load()) as rt:
        teacher = rt.teacher

        def to_ledger(sent: egress.Sent) -> None:
            """A real upload: it goes in the ledger like any other."""
            if teacher.ledger is not None:
                teacher.ledger(teacher.upload_of(sent))

        def send(request: egress.ChatRequest, guard: RecordingGuard) -> None:
            request = dataclasses.replace(
                request,
                model=teacher.model,
                max_tokens=1,
                response_format=teacher.response_format("evidence", evidence.schema(15)),
            )
            egress.send(teacher.endpoint, request, guard, record=to_ledger)

        yield send


Progress = Callable[[int, int, str, int], None]  # (done, total, method, partial leaks so far)


def run(
    items: list[Item],
    methods: dict[str, Method],
    out: Path,
    *,
    resume: bool,
    progress: bool,
    on_item: Progress | None = None,
) -> dict[str, dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    per_item = out / "privacy-items.jsonl"
    done: dict[tuple[str, str], dict[str, Any]] = {}
    if resume and per_item.exists():
        for line in per_item.read_text("utf-8").splitlines():
            r = json.loads(line)
            done[(r["method"], r["id"])] = r
    mode = "a" if resume else "w"
    total = len(items) * len(methods)
    count = 0
    # Item by item, every method on it in turn: their timings are taken side by side,
    # under the same load on the machine.
    with per_item.open(mode, encoding="utf-8") as fh:
        for item in items:
            for name, method in methods.items():
                count += 1
                if (name, item.id) in done:
                    continue
                record = {"method": name, **score(item, method(item))}
                done[(name, item.id)] = record
                fh.write(json.dumps(record) + "\n")
                fh.flush()
                if progress or on_item:
                    leaks = sum(
                        v["partial"]
                        for r in done.values()
                        if r["method"] == name
                        for v in r["values"]
                    )
                if on_item:
                    on_item(count, total, name, leaks)
                if progress:
                    print(
                        f"\r[{count}/{total}] {name}: {leaks} partial leaks so far",
                        end="",
                        file=sys.stderr,
                    )
    if progress:
        print(file=sys.stderr)
    ids = {i.id for i in items}
    return {
        name: summarise(r for (m, i), r in done.items() if m == name and i in ids)
        for name in methods
    }


def _mc(record: dict[str, Any], with_pii: bool) -> MCQuestion:
    labels = "ABCDEFGHIJ"
    stem = record["question"]
    if with_pii and record.get("pii_text"):
        stem = f"{record['pii_text']}\n{stem}"
    options = tuple((labels[i], str(c)) for i, c in enumerate(record["choices"]))
    return MCQuestion(record["id"], stem, options, record["answer"])


def utility(count: int, mode: str, out: Path, *, resume: bool) -> dict[str, Any]:
    """Accuracy of the whole pipeline on the questions with PII (the teacher gets the
    sanitized text, the local student the original) and on the same questions without.

    The cache is off, so both versions go to the teacher.
    """
    from assistant import pipeline

    records = [
        json.loads(line)
        for line in bundled_path().read_text("utf-8").splitlines()
        if json.loads(line)["pii"]
    ][:count]
    per_item = out / "privacy-utility.jsonl"
    done = {}
    if resume and per_item.exists():
        done = {json.loads(ln)["id"]: json.loads(ln) for ln in per_item.read_text().splitlines()}
    settings = config.load(
        {"store.cache": False, "privacy.review": "never", "student.max_tokens": 48}
    )
    with Runtime(settings) as rt, per_item.open("a" if resume else "w") as fh:
        for i, record in enumerate(records, start=1):
            if record["id"] in done:
                continue
            row: dict[str, Any] = {"id": record["id"], "answer": record["answer"]}
            for version in ("clean", "pii"):
                q = _mc(record, with_pii=version == "pii")
                try:
                    with rt.own_placeholders():  # each item a conversation of its own
                        result = pipeline.gather(rt, q.text(), mode=mode)  # type: ignore[arg-type]
                        pipeline.respond(rt, result, prompt=q.student_prompt())
                    choice = extract_choice(result.answer, q)
                    row[version] = {"choice": choice, "correct": choice == q.answer}
                    if version == "pii":
                        row["sent"] = result.privacy.get("sent_question", "")
                except GuardBlocked as exc:  # refused: nothing sent, counts as wrong
                    row[version] = {"choice": None, "correct": False, "refused": str(exc)}
            done[record["id"]] = row
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()
            print(
                f"[{i}/{len(records)}] {record['id']}: clean "
                f"{'✓' if row['clean']['correct'] else '✗'} · with PII "
                f"{'✓' if row['pii']['correct'] else '✗'}",
                file=sys.stderr,
                flush=True,
            )
    rows = [done[r["id"]] for r in records if r["id"] in done]
    clean = sum(r["clean"]["correct"] for r in rows)
    pii = sum(r["pii"]["correct"] for r in rows)
    # Paired difference with a normal-approximation 95 % interval.
    diffs = [int(r["pii"]["correct"]) - int(r["clean"]["correct"]) for r in rows]
    mean = statistics.fmean(diffs) if diffs else 0.0
    sd = statistics.stdev(diffs) if len(diffs) > 1 else 0.0
    half = 1.96 * sd / len(diffs) ** 0.5 if diffs else 0.0
    test = paired([r["clean"]["correct"] for r in rows], [r["pii"]["correct"] for r in rows])
    return {
        "questions": len(rows),
        "mode": mode,
        "accuracy_clean": clean / len(rows) if rows else 0.0,
        "accuracy_redacted": pii / len(rows) if rows else 0.0,
        "loss_pp": -100 * mean,
        "loss_pp_ci95": [-100 * (mean + half), -100 * (mean - half)],
        "refused": sum("refused" in r["pii"] for r in rows),
        **test.to_dict(),  # right→wrong, wrong→right and the exact McNemar p
    }


def render_utility(u: dict[str, Any]) -> str:
    lo, hi = u["loss_pp_ci95"]
    return "\n".join(
        [
            f"## Utility: the whole pipeline (mode {u['mode']}) on {u['questions']} questions",
            "",
            "| questions | accuracy without PII | accuracy with PII, redacted | loss (pp) | "
            "95 % CI |",
            "|---:|---:|---:|---:|---:|",
            f"| {u['questions']} | {u['accuracy_clean']:.1%} | {u['accuracy_redacted']:.1%} | "
            f"{u['loss_pp']:+.1f} | [{lo:+.1f}, {hi:+.1f}] |",
            "",
            f"Refused by the guard: {u['refused']}. Right without PII and wrong with it: "
            f"{u['right_to_wrong']}; the other way: {u['wrong_to_right']} (exact McNemar "
            f"p = {u['mcnemar_p']:.3g}).",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = arguments("privacy", __doc__)
    parser.add_argument(
        "--dataset",
        default="bundled",
        help="bundled | presidio | pupa | FILE.csv (PUPA's columns) | FILE.jsonl | FILE.json",
    )
    parser.add_argument(
        "--split",
        default="all",
        choices=("all", "seen", "unseen"),
        help="the items the rules were written from (seen) or the others (unseen): "
        "presidio-research by template, PUPA by conversation hash",
    )
    parser.add_argument("--limit", type=int, default=0, help="first N items (0 = all)")
    parser.add_argument(
        "--controls",
        type=int,
        default=0,
        metavar="N",
        help="only N control items (no PII: what a method changes needlessly)",
    )
    parser.add_argument(
        "--controls-from",
        type=int,
        default=0,
        metavar="M",
        help="with --controls: start at the M-th control item (0-based)",
    )
    parser.add_argument("--methods", default="full,presidio", help=f"some of {','.join(METHODS)}")
    parser.add_argument(
        "--rewrite", action="store_true", help="the full stack includes the student's rewrite"
    )
    parser.add_argument(
        "--reader-model",
        default="",
        help="the model(s) of the 'reader' method, comma-separated: one method each "
        "(default: privacy.reader_model, or the student)",
    )
    parser.add_argument(
        "--reader-grammar",
        default="fallback",
        help="how the 'reader' method uses the JSON grammar, comma-separated, one method "
        "each: fallback (free first, the grammar when that reply is not the JSON asked "
        "for: what drag does) or always",
    )
    parser.add_argument(
        "--categories",
        default="",
        metavar="ENTITY=MODE,...",
        help="the full stack with these privacy.categories modes over policy.yaml's "
        "(e.g. ORGANIZATION=strict,LOCATION=strict); default: the policy's own",
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--resume", action="store_true")
    parser.add_argument(
        "--no-teacher",
        action="store_true",
        help="record the outgoing bytes, send nothing (default: send to the configured teacher)",
    )
    parser.add_argument(
        "--utility",
        type=int,
        default=0,
        metavar="N",
        help="instead of leakage, measure accuracy on N bundled questions with and without "
        "PII (the whole pipeline, teacher included)",
    )
    parser.add_argument("--utility-mode", default="evidence", choices=("evidence", "combined"))
    args = parser.parse_args(argv)
    if args.utility:
        try:
            args.out.mkdir(parents=True, exist_ok=True)
            u = utility(args.utility, args.utility_mode, args.out, resume=args.resume)
        except DragError as exc:
            print(f"bench privacy: error: {exc}", file=sys.stderr)
            return exc.exit_code
        (args.out / "privacy-utility.json").write_text(json.dumps(u, indent=2), "utf-8")
        print(render_utility(u))
        return 0
    try:
        names = split_choices(args.methods, METHODS, "method")
    except ValueError as exc:
        print(f"bench privacy: error: {exc}", file=sys.stderr)
        return 2
    try:
        items = split_items(load_dataset(args.dataset), args.split)
        if args.controls:
            start = args.controls_from
            items = [i for i in items if i.control][start : start + args.controls]
        elif args.limit:
            # Keep the control share: take from PII items and control items alike.
            pii = [i for i in items if not i.control][: args.limit]
            ctrl = [i for i in items if i.control][: max(1, args.limit // 5)]
            items = pii + ctrl
        rewriter = _student_rewriter() if args.rewrite or "rewrite" in names else None
        stack = contextlib.ExitStack()
        send = (
            None
            if args.no_teacher or not {"full", "reader"} & set(names)
            else stack.enter_context(_sender())
        )
        methods: dict[str, Method] = {}
        modes = category_modes([c for c in args.categories.split(",") if c.strip()])
        readers = [m.strip() for m in args.reader_model.split(",") if m.strip()] or [""]
        grammars = [g.strip() for g in args.reader_grammar.split(",") if g.strip()]
        if not grammars or set(grammars) - {"fallback", "always"}:
            raise ValueError("--reader-grammar: fallback, always or both")
        label = "full" + "".join(f" {e}={m}" for e, m in modes.items())
        tail = "+rewrite" if args.rewrite else ""
        for name in names:
            if name == "full":
                methods[label + tail] = make_full(
                    Detector(categories=modes), rewriter if args.rewrite else None, send
                )
            elif name == "reader":  # the reader as drag ask runs it: Runtime.read
                for model, grammar in itertools.product(readers, grammars):
                    flags: dict[str, Any] = {"privacy.reader": "on", "store.offline": False}
                    if model:
                        flags["privacy.reader_model"] = model
                    runtime = stack.enter_context(Runtime(config.load().with_flags(flags)))
                    runtime.reader.free_first = grammar == "fallback"
                    about = [model] if model else []
                    about += [f"grammar {grammar}"] if len(grammars) > 1 else []
                    about_text = f" ({', '.join(about)})" if about else ""
                    methods[label + "+reader" + about_text + tail] = make_full(
                        Detector(categories=modes),
                        rewriter if args.rewrite else None,
                        send,
                        runtime.read,
                    )
            elif name == "presidio":
                methods["presidio-default"] = make_presidio_default()
            elif rewriter is not None:
                methods["rewrite-only"] = make_rewrite_only(rewriter)
        with stack:
            summaries = run(
                items, methods, args.out, resume=args.resume, progress=sys.stderr.isatty()
            )
    except (DragError, OSError, ValueError) as exc:
        print(f"bench privacy: error: {exc}", file=sys.stderr)
        return 1
    split = "" if args.split == "all" else f" ({args.split} split)"
    title = f"Privacy leakage · {args.dataset}{split} · {len(items)} items"
    (args.out / "privacy-summary.json").write_text(json.dumps(summaries, indent=2), "utf-8")
    (args.out / "privacy-summary.md").write_text(render(summaries, title) + "\n", "utf-8")
    print(render(summaries, title))
    png = plot(summaries, title, args.out / "privacy-leakage.png")
    print(f"\nplot: {png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
