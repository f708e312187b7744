"""Privacy-leakage benchmark (the DRAG paper's App. G protocol, made exact).

Every item goes through an upload path and the benchmark measures what would
actually leave: the exact body of the evidence request.  Methods, in one run:

* ``full``      -- this product: detection, placeholders, optional student rewrite,
                   and the egress guard (a refused request sends nothing);
* ``reader``    -- the same, with the local model reading each question too
                   (privacy.reader, through ``Session.read`` as ``drag ask`` calls it);
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
  guard's own ``value_form()`` forms).

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
import dataclasses
import functools
import itertools
import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assistant.base import config
from assistant.base.errors import DragError
from assistant.core.session import Session
from assistant.privacy.detector import Detector
from assistant.privacy.policy import Policy, category_modes, load_policy
from assistant.privacy.reader import READER_VERSION, Reading
from assistant.privacy.recognizers import ValuePartRule
from drag_bench import arguments, split_choices
from drag_bench.privacy.datasets import (
    METHODS,
    PRESIDIO_LOOKED_AT,
    PRESIDIO_RESEARCH_SCOPE,
    PUPA_LOOKED_AT,
    PUPA_MOVED,
    PUPA_TNB,
    Item,
    bundled_path,
    load_bundled,
    load_csv,
    load_dataset,
    load_jsonl,
    load_presidio_research,
    split_items,
)
from drag_bench.privacy.methods import (
    Method,
    Outcome,
    RecordingGuard,
    Sender,
    _sender,
    _student_rewriter,
    cached_reads,
    evidence_body,
    evidence_request,
    make_full,
    make_presidio_default,
    make_rewrite_only,
)
from drag_bench.privacy.report import (
    Categories,
    categories,
    plot,
    render,
    score,
    sent_question,
    summarise,
)
from drag_bench.privacy.utility import render_utility, utility

__all__ = [
    "METHODS",
    "PRESIDIO_LOOKED_AT",
    "PRESIDIO_RESEARCH_SCOPE",
    "PUPA_LOOKED_AT",
    "PUPA_MOVED",
    "PUPA_TNB",
    "Categories",
    "Item",
    "Method",
    "Outcome",
    "RecordingGuard",
    "Sender",
    "bundled_path",
    "cached_reads",
    "categories",
    "evidence_body",
    "evidence_request",
    "load_bundled",
    "load_csv",
    "load_dataset",
    "load_jsonl",
    "load_presidio_research",
    "main",
    "make_full",
    "make_presidio_default",
    "make_rewrite_only",
    "plot",
    "render",
    "render_utility",
    "run",
    "score",
    "sent_question",
    "split_items",
    "summarise",
    "utility",
]

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
        "--ids",
        default="",
        metavar="ID,ID",
        help="only these items of the split (their ids, as in privacy-items.jsonl)",
    )
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
        "--reader-decoding",
        default="lookup",
        help="how the 'reader' method decodes its free reply, comma-separated, one method "
        "each: lookup (drafting from the question: what drag does) or plain (a token at "
        "a time)",
    )
    parser.add_argument(
        "--reader-cache",
        type=Path,
        metavar="FILE",
        help="keep the 'reader' method's readings in FILE and take them from there when "
        "the same reader read the same question before: a detector change measured "
        "again without the model's time (the reader's seconds are the first run's)",
    )
    parser.add_argument(
        "--categories",
        default="",
        metavar="ENTITY=MODE,...",
        help="the full stack with these privacy.categories modes over policy.yaml's "
        "(e.g. ORGANIZATION=strict,LOCATION=strict); default: the policy's own",
    )
    parser.add_argument(
        "--without",
        default="",
        metavar="PART,...",
        help=f"also run the full stack (and the reader) without these parts of the policy, "
        f"side by side, on the same readings: some of {','.join(PARTS)}",
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
    parser.add_argument(
        "--learnt-from",
        type=Path,
        default=None,
        metavar="DB",
        help="also run the full stack taught the names that the files indexed into this "
        "drag store name (files.learn_names), side by side",
    )
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
        if args.ids:
            wanted = {i.strip() for i in args.ids.split(",") if i.strip()}
            missing = sorted(wanted - {i.id for i in items})
            if missing:
                raise ValueError(f"--ids: not in this split: {', '.join(missing)}")
            items = [i for i in items if i.id in wanted]
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
        decodings = [d.strip() for d in args.reader_decoding.split(",") if d.strip()]
        if not decodings or set(decodings) - {"lookup", "plain"}:
            raise ValueError("--reader-decoding: lookup, plain or both")
        label = "full" + "".join(f" {e}={m}" for e, m in modes.items())
        tail = "+rewrite" if args.rewrite else ""
        parts = [p.strip() for p in args.without.split(",") if p.strip()]
        if set(parts) - set(PARTS):
            raise ValueError(f"--without: some of {', '.join(PARTS)}")
        variants = {"": load_policy(), **{f" -{p}": without_part(p) for p in parts}}
        for name in names:
            if name == "full":
                for suffix, policy in variants.items():
                    methods[label + suffix + tail] = make_full(
                        Detector(policy=policy, categories=modes),
                        rewriter if args.rewrite else None,
                        send,
                    )
                if args.learnt_from is not None:
                    methods[label + "+learnt" + tail] = make_full(
                        learnt_detector(modes, args.learnt_from),
                        rewriter if args.rewrite else None,
                        send,
                    )
            elif name == "reader":  # the reader as drag ask runs it: Session.read
                ways = itertools.product(readers, grammars, decodings)
                for model, grammar, decoding in ways:
                    flags: dict[str, Any] = {"privacy.reader": "on", "store.offline": False}
                    if model:
                        flags["privacy.reader_model"] = model
                    runtime = stack.enter_context(Session(config.load().with_flags(flags)))
                    runtime.reader.free_first = grammar == "fallback"
                    runtime.reader.model.lookup = decoding == "lookup"  # type: ignore[attr-defined]
                    about = [model] if model else []
                    about += [f"grammar {grammar}"] if len(grammars) > 1 else []
                    named = len(decodings) > 1 or decoding != "lookup"
                    about += [f"decoding {decoding}"] if named else []
                    about_text = f" ({', '.join(about)})" if about else ""
                    read: Callable[[str], Reading | None] = runtime.read
                    if args.reader_cache is None and len(variants) > 1:
                        read = functools.lru_cache(maxsize=4)(read)  # one reading each
                    if args.reader_cache is not None:
                        s = runtime.settings
                        # The model as it resolves (a name or a path), the reader's prompt
                        # version and the grammar's use: another of them reads afresh.
                        name_of = s.privacy.reader_model or s.student.model
                        reader = f"{name_of} {READER_VERSION} grammar {grammar}"
                        reader += " lookup" if decoding == "lookup" else ""
                        read = cached_reads(read, args.reader_cache, reader)
                    for suffix, policy in variants.items():  # the same reading each
                        methods[label + "+reader" + about_text + suffix + tail] = make_full(
                            Detector(policy=policy, categories=modes),
                            rewriter if args.rewrite else None,
                            send,
                            read,
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


# Parts of the policy a run can leave out (--without), each the rule of one issue.
PARTS = ("public", "value-parts", "world-streets", "more-streets")


def without_part(part: str) -> Policy:
    """The policy without one part: "public" (issue 48: public organisations kept unless
    tied, and the work tie phrases), "value-parts" (a name inside a found value),
    "world-streets" (streets as other countries write them: the policy's
    WorldStreetAddressRecognizer), "more-streets" (the forms its review found sent
    as written: MoreStreetFormsRecognizer)."""
    policy = load_policy()
    if part == "public":
        c = dataclasses.replace(policy.contextual, public=(), work_ties=(), work_words=())
        return dataclasses.replace(policy, contextual=c)
    if part == "value-parts":
        return dataclasses.replace(policy, value_parts=ValuePartRule())
    streets = {
        "world-streets": "WorldStreetAddressRecognizer",
        "more-streets": "MoreStreetFormsRecognizer",
    }
    if part in streets:
        kept = tuple(r for r in policy.recognizers if r["name"] != streets[part])
        return dataclasses.replace(policy, recognizers=kept)
    raise ValueError(f"--without: {part!r} is none of {', '.join(PARTS)}")


def learnt_detector(modes: Any, database: Path) -> Detector:
    """The full stack's detector taught the names the files indexed into ``database``
    named, as a user's own detector is (``files.learn_names``; sealed with this
    machine's key)."""
    if not database.is_file():
        raise ValueError(f"--learnt-from {database}: no such drag store")
    try:  # read-only first: opening another SQLite file as a store would change it
        with contextlib.closing(
            sqlite3.connect(f"{database.absolute().as_uri()}?mode=ro", uri=True)
        ) as peek:
            version = int(peek.execute("PRAGMA user_version").fetchone()[0])
            meta = peek.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone()
        known = version > 0 and meta is not None  # drag's migrations have run on it
    except sqlite3.Error:
        known = False
    if not known:
        raise ValueError(f"--learnt-from {database}: not a drag store")
    # The names as a user's session reads them (Session.personal_names).
    with Session(config.load({"store.database": str(database), "files.learn_names": True})) as rt:
        learnt = rt.learnt()
    if not learnt.names:
        raise ValueError(f"--learnt-from {database}: its indexed files taught no names")
    detector = Detector(categories=modes)
    detector.learn(learnt.names, people=learnt.people, written=learnt.written)
    return detector


if __name__ == "__main__":
    sys.exit(main())
