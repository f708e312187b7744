"""Answers from your own files, on MiniRAG's LiHuaWorld: the MiniRAG-style retriever
against plain vector RAG over the same chunks, with the same student, in one run.

    drag bench local-docs --docs ../shared/data/lihuaworld/LiHua-World \\
        --questions ../shared/data/lihuaworld/lihua_dev.csv --limit 60 --out DIR

It indexes ``--docs`` into a database of its own under ``--out`` (an unchanged file is
not indexed twice, so a second run reuses the index), then asks each question of the
CSV (``Question, Gold Answer, Evidence, Type``) once per method and reading budget
(``--read-tokens``: the messages that carry the question's words within that many of the
student's tokens, 0 the passages whole; ``--decoding``: the answer a token at a time,
or drafted from the passages) through the product's own path
(:func:`assistant.core.localfiles.ask_files`; nothing is sent).  ``--alternate`` takes
the rows in turns, each first for one question in so many.  It writes

- ``local-docs-items.jsonl``: question, type, gold, method, reply, sources, whether the
  gold's evidence chats were among them, the check of the answer against the passages
  read (:mod:`assistant.drag.filessupport`), seconds, the verdict;
- ``local-docs-summary.json`` and ``summary.md``: accuracy and error rate per type and
  method, retrieval recall of the evidence chats, index time and size against the raw
  text and the embeddings, answer latency p50/p90.

A run resumes: questions already in the items file are not asked again.  The scorer
(:mod:`.scoring`) imports nothing from the product.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from assistant.base import config
from assistant.base.errors import DragError
from assistant.core import localfiles
from assistant.core.session import Session
from assistant.files import readers
from assistant.store import files as stored
from assistant.store.index import DIM
from drag_bench import arguments, split_choices
from drag_bench.localdocs.scoring import score
from drag_bench.stats import percentile

ITEMS = "local-docs-items.jsonl"
SUMMARY = "local-docs-summary.json"
METHODS = ("minirag", "vector")
TYPES = ("Single", "Multi", "Null")
Row = tuple[str, int, str, str]  # method, read tokens, headings, decoding
DECODINGS = ("drafted", "plain")


def load_questions(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    wanted = {"Question", "Gold Answer", "Evidence", "Type"}
    if not rows or not wanted <= set(rows[0]):
        raise ValueError(f"{path}: a CSV with the columns {', '.join(sorted(wanted))}")
    return [_repaired({k: (r.get(k) or "").strip() for k in wanted}) for r in rows]


_TIME = re.compile(r"\d{8}_\d\d:\d\d")


def _repaired(row: dict[str, str]) -> dict[str, str]:
    """One row of MiniRAG's CSV as its authors meant it: in lihua_dev.csv one gold answer
    holds its evidence after a tab (its Evidence column a stray word), and one evidence is
    written "Time: …" (a chat's own header).  Nothing else is changed."""
    gold, _tab, time = row["Gold Answer"].rpartition("\t")
    if gold and _TIME.fullmatch(time.strip()) and not _TIME.search(row["Evidence"]):
        row = {**row, "Gold Answer": gold.strip(), "Evidence": time.strip()}
    if row["Evidence"].startswith("Time:"):
        row = {**row, "Evidence": row["Evidence"].removeprefix("Time:").strip()}
    return row


def part_of(question: str) -> str:
    """A fixed half of the questions: "tune" (the retriever's constants were chosen on
    it) or "report" (the published figures; never looked at while tuning)."""
    return "tune" if hashlib.blake2b(question.encode("utf-8")).digest()[0] % 2 == 0 else "report"


def evidence_times(evidence: str) -> set[str]:
    """``20261005_10:05<and>…`` as the index's chat times (``2026-10-05 10:05``)."""
    out = set()
    for part in evidence.split("<and>"):
        part = part.strip()
        if len(part) >= 14 and part[:8].isdigit():
            out.add(f"{part[:4]}-{part[4:6]}-{part[6:8]} {part[9:14]}")
    return out


def path_of(item: dict[str, Any]) -> str:
    """The row an item counts in: its method, and how much of the passages it read (a run
    of before ``--read-tokens`` read them whole, and is named by its method alone); an
    item of the run that measured shorter headings (issue 51, taken back: the student
    reads each passage under its whole path) also by how each passage was headed; an
    item of a run that measured the answer's decodings, by its decoding; of a run that
    measured another prompt (issue 51, not kept: ``--prompt`` went with it), by its
    prompt."""
    read = item.get("read_tokens")
    if read is None:
        return str(item["method"])
    row = f"{item['method']}, " + ("whole passages" if read == 0 else f"{read} tokens")
    headings = item.get("headings")
    row = row if headings is None else f"{row}, {headings} headings"
    decoding = item.get("decoding")
    row = row if decoding is None else f"{row}, {decoding}"
    prompt = item.get("prompt")
    return row if prompt is None else f"{row}, {prompt} prompt"


def in_turn(rows: list[Row], number: int, alternate: bool) -> list[Row]:
    """The rows in the order question ``number`` (from 1) asks them: as given, or, with
    ``alternate``, each row first in its turn (a machine that slows down or speeds up
    during the run then favours no row)."""
    turn = (number - 1) % len(rows) if alternate else 0
    return rows[turn:] + rows[:turn]


def _done(path: Path) -> set[str]:
    if not path.exists():
        return set()
    with path.open(encoding="utf-8") as handle:
        return {r["question"] + "\0" + path_of(r) for r in map(json.loads, handle)}


def raw_sizes(docs: Path) -> int:
    return sum(p.stat().st_size for p in docs.rglob("*") if p.is_file())


def run(args: Any) -> dict[str, Any]:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    questions = [
        q for q in load_questions(args.questions) if args.part in ("all", part_of(q["Question"]))
    ][: args.limit or None]
    settings = config.load(
        {
            "store.database": str(out / "index.db"),
            "student.max_tokens": args.max_tokens,
            "files.k": args.k,
            "files.learn_names": False,  # the benchmark's files teach the user's detector nothing
            **({"student.model": args.student} if args.student else {}),
        }
    )
    items_path = out / ITEMS
    done = _done(items_path)
    summary: dict[str, Any] = {
        "questions": len(questions),
        "part": args.part,
        "k": args.k,
        "methods": args.methods,
        "read_tokens": args.read_tokens,
    }
    with Session(settings) as rt:
        if "drafted" in args.decoding and not rt.student.can_draft():
            # Its row would be decoded a token at a time under the name "drafted".
            raise ValueError(
                f"--decoding drafted: {rt.student.path.name} cannot draft its replies "
                "(another prompt format, or a model whose context cannot take tokens back)"
            )
        report = localfiles.index(rt, [args.docs])
        chunks = int(rt.store.db.execute("SELECT count(*) FROM file_chunks").fetchone()[0])
        entities = int(rt.store.db.execute("SELECT count(*) FROM file_entities").fetchone()[0])
        earlier = out / SUMMARY
        summary["index"] = {
            "files_added": len(report.added) + len(report.replaced),
            "files_unchanged": len(report.unchanged),
            "skipped": len(report.skipped),
            "seconds": round(report.seconds, 2),
            "chunks": chunks,
            "entities": entities,
            "raw_bytes": raw_sizes(args.docs),
            "embedding_bytes": (chunks + entities) * DIM * 2,  # float16
            "index_bytes": stored.size_on_disk(rt.store.db),
        }
        if not summary["index"]["files_added"] and earlier.exists():
            # A run that resumed on the index built before: that build's figures stand.
            summary["index"] = json.loads(earlier.read_text(encoding="utf-8"))["index"]
        print(
            f"index: {chunks} chunks, {entities} entities, {report.seconds:.1f} s "
            f"({len(report.unchanged)} files unchanged)",
            file=sys.stderr,
        )
        with items_path.open("a", encoding="utf-8") as handle:
            paths: list[Row] = [
                (m, r, h, d)
                for m in args.methods
                for r in args.read_tokens
                for h in args.headings
                for d in args.decoding
            ]
            named = args.headings != ["name"]  # rows named by their headings too
            decoded = args.decoding != ["plain"]  # and by their decoding
            for number, q in enumerate(questions, start=1):
                for method, read, headings, decoding in in_turn(paths, number, args.alternate):
                    item = {"question": q["Question"], "method": method, "read_tokens": read}
                    extra = {
                        **({"headings": headings} if named else {}),
                        **({"decoding": decoding} if decoded else {}),
                    }
                    if q["Question"] + "\0" + path_of({**item, **extra}) in done:
                        continue
                    item = {**_ask(rt, q, method, read, args.docs, headings, decoding), **extra}
                    handle.write(json.dumps(item, ensure_ascii=False) + "\n")
                    handle.flush()
                    print(
                        f"[{number}/{len(questions)}] {path_of(item)}: "
                        f"{'right' if item['right'] else 'wrong'} ({item['seconds']:.1f} s)",
                        file=sys.stderr,
                        flush=True,
                    )
        summary["student"] = rt.student.path.name
    asked = {q["Question"] for q in questions}
    with items_path.open(encoding="utf-8") as handle:
        every = [rescore(r) for r in map(json.loads, handle)]
    # The file keeps the verdicts the summary counts (the scorer as it is now).
    fresh = items_path.with_suffix(".tmp")
    fresh.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in every), "utf-8")
    fresh.replace(items_path)
    items = [r for r in every if r["question"] in asked]
    summary.update(summarise(items))
    (out / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(render(summary) + "\n", encoding="utf-8")
    return summary


def _relative(path: str, docs: Path) -> str:
    """A source as a path inside ``--docs`` (the stored results name no machine's folders)."""
    try:
        # Both named as the index names a file (from the root, ".." worked out, links kept).
        return str(readers.absolute(Path(path)).relative_to(readers.absolute(docs)))
    except ValueError:
        return path


def _ask(
    rt: Session,
    q: dict[str, str],
    method: str,
    read: int,
    docs: Path,
    headings: str = "name",
    decoding: str = "plain",
) -> dict[str, Any]:
    # Each answer starts from the same state, as in a new process: nothing read (llama.cpp
    # would otherwise reuse the prompt another row of the same question has just read);
    # the product loads its prompt's fixed head from the cache folder.
    rt.student.forget()
    started = time.perf_counter()
    try:
        result = localfiles.ask_files(
            rt,
            q["Question"],
            method=method,  # type: ignore[arg-type]
            read_tokens=read,
            remember=False,
            headings=headings,  # type: ignore[arg-type]
            draft=decoding == "drafted",
        )
        reply, passages, error = result.answer, result.passages, ""
        support, held = result.provenance.get("support"), result.held_back
        parts = {k: v for k, v in result.timings.items() if k != "total"}
        tokens = result.student.get("prompt_tokens")
        student = {k: result.student.get(k) for k in ("prompt_seconds", "decode_seconds")}
    except DragError as exc:
        reply, passages, error, support, held, parts, tokens = (
            "",
            [],
            str(exc),
            None,
            False,
            {},
            None,
        )
        student = {}
    seconds = time.perf_counter() - started
    verdict = score(reply, q["Gold Answer"], q["Type"])
    wanted = evidence_times(q["Evidence"])
    found = {p.time for p in passages}
    return {
        "question": q["Question"],
        "type": q["Type"],
        "gold": q["Gold Answer"],
        "evidence": q["Evidence"],
        "method": method,
        "read_tokens": read,
        "reply": reply,
        "sources": [
            {"path": _relative(p.path, docs), "time": p.time, "score": p.score} for p in passages
        ],
        # What the check of the answer against the passages read found (None: not
        # checked), and whether that made the reply "Your files do not say.".
        "support": support,
        "held_back": held,
        "evidence_found": len(wanted & found),
        "evidence_wanted": len(wanted),
        "seconds": round(seconds, 3),
        "timings": parts,  # the product's own: search, cut, answer, check
        "student_seconds": student,  # of the answer: reading the prompt, then writing
        "prompt_tokens": tokens,
        "right": verdict.right,
        "abstained": verdict.abstained,
        "error": verdict.error and not error,  # a failure claims nothing
        "scored_by": verdict.how,
        "failure": error,
    }


def rescore(item: dict[str, Any]) -> dict[str, Any]:
    """The item's verdict by the scorer as it is now (a stored run is scored anew)."""
    verdict = score(item["reply"], item["gold"], item["type"])
    failed = bool(item.get("failure"))
    return {
        **item,
        "right": verdict.right,
        "abstained": verdict.abstained,
        "error": verdict.error and not failed,
        "scored_by": verdict.how,
    }


def summarise(items: list[dict[str, Any]]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for method in dict.fromkeys(path_of(r) for r in items):
        mine = [r for r in items if path_of(r) == method]
        rows: dict[str, Any] = {}
        for kind in (*TYPES, "all"):
            part = [r for r in mine if kind == "all" or r["type"] == kind]
            if not part:
                continue
            wanted = sum(r["evidence_wanted"] for r in part)
            rows[kind] = {
                "n": len(part),
                "accuracy": round(100 * sum(r["right"] for r in part) / len(part), 1),
                "error_rate": round(100 * sum(r["error"] for r in part) / len(part), 1),
                "abstained": sum(r["abstained"] for r in part),
                "evidence_recall": round(100 * sum(r["evidence_found"] for r in part) / wanted, 1)
                if wanted
                else None,
            }
        seconds = [r["seconds"] for r in mine]
        answerable = [r for r in mine if r["type"] != "Null"]
        table[method] = {
            "by_type": rows,
            # Questions with an answer in the files whose reply said they do not tell.
            "answerable_held_back": round(
                100 * sum(r["abstained"] for r in answerable) / max(1, len(answerable)), 1
            ),
            "seconds_p50": round(percentile(seconds, 0.5), 2),
            "seconds_p90": round(percentile(seconds, 0.9), 2),
        }
    return {"results": table}


def render(summary: dict[str, Any]) -> str:
    ix = summary["index"]
    mb = 1024 * 1024
    lines = [
        f"## Answers from your own files · LiHuaWorld · {summary['questions']} questions "
        f"({summary['part']} part) · "
        f"K={summary['k']} · {summary.get('student', '')}",
        "",
        "Accuracy % / error rate % (wrong answers that claim something); evidence recall: "
        "share of the gold evidence chats among the K passages.",
        "",
        "| method | type | n | accuracy | error rate | abstained | evidence recall |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for method, data in summary["results"].items():
        for kind, row in data["by_type"].items():
            recall = "" if row["evidence_recall"] is None else f"{row['evidence_recall']:.1f}"
            lines.append(
                f"| {method} | {kind} | {row['n']} | {row['accuracy']:.1f} | "
                f"{row['error_rate']:.1f} | {row['abstained']} | {recall} |"
            )
    lines += [
        "",
        "| method | answerable held back % | answer s p50 | answer s p90 |",
        "|---|---:|---:|---:|",
        *(
            f"| {m} | {d['answerable_held_back']:.1f} | {d['seconds_p50']:.2f} | "
            f"{d['seconds_p90']:.2f} |"
            for m, d in summary["results"].items()
        ),
        "",
        f"Index: {ix['chunks']} chunks, {ix['entities']} entities; "
        f"{ix['seconds']:.1f} s for {ix['files_added']} files "
        f"({ix['files_unchanged']} unchanged); "
        f"{ix['index_bytes'] / mb:.2f} MB on disk against {ix['raw_bytes'] / mb:.2f} MB of text "
        f"and {ix['embedding_bytes'] / mb:.2f} MB of embeddings "
        f"(target: at most {(3 * ix['raw_bytes'] + ix['embedding_bytes']) / mb:.2f} MB).",
    ]
    return "\n".join(lines)


def _budgets(text: str) -> list[int]:
    try:
        budgets = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--read-tokens {text}: whole numbers, comma-separated") from None
    if any(b < 0 for b in budgets) or len(set(budgets)) != len(budgets):
        raise ValueError(f"--read-tokens {text}: each 0 or more, none twice")
    return budgets


def main(argv: list[str] | None = None) -> int:
    parser = arguments("local-docs", __doc__)
    parser.add_argument("--docs", type=Path, required=True, help="folder of files to index")
    parser.add_argument("--questions", type=Path, required=True, help="CSV of questions")
    parser.add_argument(
        "--part",
        choices=("report", "tune", "all"),
        default="report",
        help="which half of the questions (report: the one never tuned on)",
    )
    parser.add_argument("--limit", type=int, default=0, help="first N questions (0: all)")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--k", type=int, default=5, help="passages per answer")
    parser.add_argument(
        "--read-tokens",
        default="500",
        help="the student's tokens of passages, comma-separated (each a row; 0: whole)",
    )
    parser.add_argument(
        "--headings",
        default="name",
        help="how the student's prompt heads each passage, comma-separated (each a row): "
        "name (the product's: the file's name and time), path (the whole path, as before)",
    )
    parser.add_argument(
        "--alternate",
        action="store_true",
        help="take the rows in turns, question by question, each first in its turn",
    )
    parser.add_argument(
        "--decoding",
        default="plain",
        help="how the answer is decoded, comma-separated (each a row): plain (the "
        "product's: a token at a time), drafted (drafted from the passages; issue 51, "
        "not kept)",
    )
    parser.add_argument("--student", default="", help="student model (default: the settings')")
    parser.add_argument("--max-tokens", type=int, default=96, help="longest reply")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        args.methods = split_choices(args.methods, METHODS, "method")
        args.read_tokens = _budgets(args.read_tokens)
        args.headings = split_choices(args.headings, ("path", "name"), "headings")
        if not args.headings or len(set(args.headings)) != len(args.headings):
            raise ValueError("--headings: name, path or both, each once")
        args.decoding = split_choices(args.decoding, DECODINGS, "decoding")
        if not args.decoding or len(set(args.decoding)) != len(args.decoding):
            raise ValueError("--decoding: drafted, plain or both, each once")
        if not args.docs.is_dir():
            raise ValueError(f"--docs {args.docs}: not a folder")
        summary = run(args)
    except (ValueError, OSError) as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    except DragError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(render(summary))
    return 0
