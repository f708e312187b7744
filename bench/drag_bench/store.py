"""Local-store benchmark: offline answers from the cache vs a teacher round trip, and
how retrieval scales with the size of the cached graph.

Two parts, both printed as Markdown and written as JSON (per-question JSONL too):

``--questions N`` (default 20): for each of N ARC-Challenge questions, one run
  1. asks the teacher (cache empty for it): the full round trip, timed;
  2. has the teacher paraphrase the question stem (options unchanged);
  3. asks the paraphrase with ``store.offline`` on: recall from the cache and
     the student's answer, timed; a miss is counted, never sent.
  It reports offline vs online latency (p50/p95 and their ratio, same
  questions), the cache-hit rate, accuracy online and offline, and the stored
  bytes per cached question.  It uses its own database under ``--out``.

``--scale 10000,100000,1000000``: fills a database with that many synthetic
  triples (unit vectors; entities = triples / 2; each triple drawn from one of its
  question's five statements), then times loading the retriever's corpus and the
  graph recall per query (the retriever's seeds, paths and fusion over all cached
  statements, triples touching the entities on the paths read back by id, ranking;
  the names are random, so seeds come by embedding).  Embedding the question's n-grams is
  timed separately on real questions with the real embedder, since random
  vectors stand in for entity names here.

    drag bench store --questions 20
    drag bench store --scale 10000,100000,1000000 --questions 0
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from assistant.base import config
from assistant.base.errors import DragError, NotCovered
from assistant.core import pipeline
from assistant.core.results import AskResult
from assistant.core.session import Session
from assistant.drag import recall
from assistant.drag.parsing import parse_objects
from assistant.store import cache
from drag_bench import arguments, storescale
from drag_bench.mc import MCQuestion, bundled_arc, extract_choice, load_arc
from drag_bench.recall_before import recall_before
from drag_bench.stats import percentile, spread

PARAPHRASE_VERSION = "paraphrase-v1"
PARAPHRASE_SYSTEM = (
    "You rewrite questions in different words. Keep the meaning exactly: same facts, same "
    "numbers, same negations. Do not answer. Reply with JSON only."
)
PARAPHRASE_USER = (
    "Rewrite this question in different words, keeping its meaning exactly.\n"
    "Question: {question}\n"
    'Reply with JSON only: {{"paraphrase": "the reworded question"}}'
)
PARAPHRASE_SCHEMA = {
    "type": "object",
    "properties": {"paraphrase": {"type": "string", "minLength": 8}},
    "required": ["paraphrase"],
}


def paraphrase(rt: Session, q: MCQuestion) -> MCQuestion:
    """The teacher's rewording of the stem; the options are kept as they are."""
    teacher = rt.teacher
    request = teacher.request(
        "paraphrase",
        PARAPHRASE_SYSTEM,
        PARAPHRASE_USER.format(question=q.question),
        PARAPHRASE_SCHEMA,
        templates=(PARAPHRASE_USER,),
        max_tokens=256,
        prompt_version=PARAPHRASE_VERSION,
    )
    reply = teacher.complete(request).text
    stems = [
        o["paraphrase"].strip()
        for o in parse_objects(reply)
        if isinstance(o.get("paraphrase"), str) and o["paraphrase"].strip()
    ]
    return dataclasses.replace(q, question=stems[0] if stems else q.question)


def _answer(rt: Session, result: AskResult, q: MCQuestion) -> dict[str, Any]:
    pipeline.respond(rt, result, prompt=q.student_prompt(), gate_setting="always-evidence")
    choice = extract_choice(result.answer, q)
    return {
        "choice": choice,
        "correct": choice == q.answer,
        "answer_s": result.timings.get("answer", 0.0),
        "completion_tokens": result.student["completion_tokens"],
    }


def run_question(rt: Session, q: MCQuestion) -> dict[str, Any]:
    with rt.own_placeholders():  # each question (and its paraphrase) a conversation of its own
        return _run_question(rt, q)


def _run_question(rt: Session, q: MCQuestion) -> dict[str, Any]:
    online_settings = rt.settings
    started = time.perf_counter()
    online = pipeline.gather(rt, q.text())
    gather_s = time.perf_counter() - started
    record: dict[str, Any] = {
        "id": q.id,
        "online": {"gather_s": gather_s, "source": online.source, **_answer(rt, online, q)},
    }
    record["online"]["total_s"] = gather_s + record["online"]["answer_s"]
    reworded = paraphrase(rt, q)
    record["paraphrase"] = reworded.question
    rt.settings = online_settings.with_flags({"store.offline": True})
    try:
        started = time.perf_counter()
        try:
            offline = pipeline.gather(rt, reworded.text())
        except NotCovered:
            record["offline"] = {"hit": False, "recall_s": time.perf_counter() - started}
            return record
        recall_s = time.perf_counter() - started
        record["offline"] = {
            "hit": True,
            "how": offline.provenance.get("how"),
            "score": offline.provenance.get("score"),
            "recall_s": recall_s,
            **_answer(rt, offline, reworded),
        }
        record["offline"]["total_s"] = recall_s + record["offline"]["answer_s"]
    finally:
        rt.settings = online_settings
    return record


def summarise(records: list[dict[str, Any]], stats: dict[str, Any]) -> dict[str, Any]:
    online = [r["online"]["total_s"] for r in records]
    hits = [r for r in records if r["offline"]["hit"]]
    offline = [r["offline"]["total_s"] for r in hits]
    recall_only = [r["offline"]["recall_s"] for r in records]
    same_online = [r["online"]["total_s"] for r in hits]
    hows: dict[str, int] = {}
    for r in hits:
        hows[r["offline"]["how"]] = hows.get(r["offline"]["how"], 0) + 1
    return {
        "questions": len(records),
        "online_s": spread(online),
        "offline_answer_s": spread(offline),
        "offline_recall_s": spread(recall_only),
        "ratio_p50_offline_to_online": (
            percentile(offline, 0.5) / percentile(same_online, 0.5) if offline else float("nan")
        ),
        "cache_hits": len(hits),
        "hit_rate": len(hits) / len(records) if records else 0.0,
        "hits_by_kind": hows,
        "accuracy_online": sum(r["online"]["correct"] for r in records) / max(1, len(records)),
        "accuracy_offline_of_hits": (
            sum(r["offline"]["correct"] for r in hits) / len(hits) if hits else float("nan")
        ),
        "online_correct_on_hits": sum(r["online"]["correct"] for r in hits),
        "offline_correct_on_hits": sum(r["offline"]["correct"] for r in hits),
        "bytes_per_cached_question": stats["bytes_per_question"],
        "database_bytes": stats.get("database_bytes", 0),
    }


def render_questions(s: dict[str, Any], header: str) -> str:
    def row(name: str, v: dict[str, float]) -> str:
        return f"| {name} | {v['mean']:.2f} | {v['p50']:.2f} | {v['p95']:.2f} |"

    return "\n".join(
        [
            f"## {header}",
            "",
            "| latency | mean s | p50 s | p95 s |",
            "|---|---:|---:|---:|",
            row("online: teacher round trip + answer", s["online_s"]),
            row("offline: recall + answer (hits)", s["offline_answer_s"]),
            row("offline: recall only (all)", s["offline_recall_s"]),
            "",
            f"- offline/online p50 ratio, same questions: {s['ratio_p50_offline_to_online']:.3f}",
            f"- cache hits on paraphrases: {s['cache_hits']}/{s['questions']} "
            f"({s['hit_rate']:.0%}); by kind {s['hits_by_kind']}",
            f"- accuracy online {s['accuracy_online']:.0%}; on the hits: online "
            f"{s['online_correct_on_hits']}/{s['cache_hits']}, offline "
            f"{s['offline_correct_on_hits']}/{s['cache_hits']}",
            f"- stored per cached question: {s['bytes_per_cached_question']:,} bytes "
            f"(database {s['database_bytes'] / 1e6:.1f} MB)",
        ]
    )


# -- calibration --------------------------------------------------------------------------


METHODS = ("one retriever", "before")  # the product's recall; the cache's own, kept


def probe(rt: Session, text: str, own: int | None = None) -> dict[str, dict[str, Any]]:
    """How each method would recall ``text`` (no threshold applied): how, score, and the
    share of the recalled statements and triples that come from the cache entry ``own``
    (the question that ``text`` rewords)."""
    sent = rt.sanitize(text).text
    q = rt.embedder.embed([sent])[0]
    p = rt.settings.pipeline
    out = {}
    for method, way in zip(METHODS, (recall.recall, recall_before), strict=True):
        found = way(
            rt.store.db,
            rt.store.index(rt.cache_space),
            sent,
            q,
            rt.embedder,
            n=p.n,
            k=p.k,
            near_duplicate=rt.settings.store.near_duplicate,
        )
        entries = [e.entry_id for e in found.evidence] + [t.entry_id for t in found.triples]
        share = sum(e == own for e in entries) / len(entries) if entries and own else None
        out[method] = {"how": found.how, "score": round(found.score, 4), "own_share": share}
    return out


def _entry_of(rt: Session, text: str) -> int | None:
    entry = cache.find(rt.store.db, cache.key_of(rt.cache_space, rt.sanitize(text).text))
    return entry.id if entry is not None else None


def calibrate(jsonl: Path, controls: int) -> dict[str, Any]:
    """Scores of the run's paraphrases vs unrelated questions, against its database, for
    the product's recall and the one it had before, side by side.

    Paraphrases should be covered, unrelated questions (ARC questions the run
    never asked) should not: the table shows both rates per coverage threshold.  Of a
    covered paraphrase, the statements recalled should be its original question's
    (``own_share``).
    """
    lines = jsonl.read_text("utf-8").splitlines()
    records = [r for r in (json.loads(ln) for ln in lines if ln.strip()) if "paraphrase" in r]
    questions = load_arc(bundled_arc())
    by_id = {q.id: q for q in questions}
    asked = {r["id"] for r in records}
    unrelated = [q for q in questions if q.id not in asked][-controls:]
    settings = config.load({"store.database": str(jsonl.with_suffix(".db"))})
    with Session(settings) as rt:
        para = []
        for r in records:
            original = by_id[r["id"]]
            reworded = dataclasses.replace(original, question=r["paraphrase"])
            para.append(probe(rt, reworded.text(), _entry_of(rt, original.text())))
        ctrl = [probe(rt, q.text()) for q in unrelated]
    out: dict[str, Any] = {"methods": list(METHODS), "paraphrases": para, "unrelated": ctrl}
    rows = []
    for t in (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8):
        row: dict[str, Any] = {"coverage": t}
        for m in METHODS:

            def covered(found: dict[str, Any], t: float = t) -> bool:
                return recall.Recalled(found["how"], found["score"]).covers(t)

            row[m] = {
                "paraphrases_covered": sum(covered(f[m]) for f in para) / max(1, len(para)),
                "unrelated_covered": sum(covered(f[m]) for f in ctrl) / max(1, len(ctrl)),
            }
        rows.append(row)
    out["thresholds"] = rows
    return out


def render_calibration(c: dict[str, Any]) -> str:
    methods = c["methods"]
    lines = [
        f"## Coverage threshold: {len(c['paraphrases'])} paraphrases of cached questions vs "
        f"{len(c['unrelated'])} unrelated questions",
        "",
        "| store.coverage | "
        + " | ".join(f"{m}: paraphrases answered offline | {m}: unrelated" for m in methods)
        + " |",
        "|---:|" + "---:|---:|" * len(methods),
    ]
    for r in c["thresholds"]:
        cells = [
            f"{r[m]['paraphrases_covered']:.0%} | {r[m]['unrelated_covered']:.0%}" for m in methods
        ]
        lines.append(f"| {r['coverage']:.2f} | " + " | ".join(cells) + " |")
    lines.append("")
    for m in methods:
        kinds: dict[str, int] = {}
        shares = []
        for p in c["paraphrases"]:
            kinds[p[m]["how"]] = kinds.get(p[m]["how"], 0) + 1
            if p[m]["how"] == "graph" and p[m]["own_share"] is not None:
                shares.append(p[m]["own_share"])
        mean = f"{statistics.fmean(shares):.0%}" if shares else "n/a"
        lines.append(
            f"- {m}: paraphrases recalled as {kinds}; of a graph recall, the share of "
            f"statements and triples from the reworded question's own entry: {mean} "
            f"(mean of {len(shares)})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = arguments("store", __doc__)
    parser.add_argument("--questions", type=int, default=20, help="ARC questions (0: skip)")
    parser.add_argument("--scale", default="", help="triple counts, e.g. 10000,100000,1000000")
    parser.add_argument("--student-max-tokens", type=int, default=48)
    parser.add_argument(
        "--calibrate",
        type=Path,
        metavar="JSONL",
        help="score an earlier run's paraphrases and --controls unrelated questions "
        "against its database, per coverage threshold (no teacher needed)",
    )
    parser.add_argument("--controls", type=int, default=40)
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    args = parser.parse_args(argv)
    try:
        sizes = [int(float(x)) for x in args.scale.split(",") if x.strip()]
    except ValueError:
        print(
            f"bench: error: --scale {args.scale!r}: give counts like 10000,100000", file=sys.stderr
        )
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    report: dict[str, Any] = {}
    questions = load_arc(bundled_arc())
    if args.calibrate:
        try:
            report["calibration"] = calibrate(args.calibrate, args.controls)
        except DragError as exc:
            print(f"bench: error: {exc}", file=sys.stderr)
            return exc.exit_code
        print(render_calibration(report["calibration"]))
    if sizes:
        report["scale"] = storescale.run_scale(sizes, args.out)
        report["ngram_embed_ms"] = storescale.ngram_embed_ms(questions)
        print(storescale.render_scale(report["scale"], report["ngram_embed_ms"]))
    if args.questions > 0:
        db_path = args.out / f"store-{stamp}.db"
        try:
            # Public benchmark questions: no review prompt (a false detection would stop it).
            settings = config.load(
                {
                    "student.max_tokens": args.student_max_tokens,
                    "store.database": str(db_path),
                    "privacy.review": "never",
                }
            )
            per_q = args.out / f"store-{stamp}.jsonl"
            records = []
            with Session(settings) as rt, per_q.open("w", encoding="utf-8") as fh:
                for i, q in enumerate(questions[: args.questions], start=1):
                    try:
                        record = run_question(rt, q)
                    except DragError as exc:  # e.g. the guard refused: counted, not fatal
                        print(f"[{i}/{args.questions}] {q.id}: {exc}", file=sys.stderr)
                        fh.write(json.dumps({"id": q.id, "error": str(exc)}) + "\n")
                        continue
                    records.append(record)
                    fh.write(json.dumps(record, ensure_ascii=False) + "\n")
                    fh.flush()
                    off = record["offline"]
                    print(
                        f"[{i}/{args.questions}] {q.id} online {record['online']['total_s']:.1f} s"
                        f" · offline "
                        + (f"{off['how']} {off['total_s']:.2f} s" if off["hit"] else "miss"),
                        file=sys.stderr,
                        flush=True,
                    )
                stats = cache.stats(rt.store.db)
                stats["database_bytes"] = db_path.stat().st_size
                names = (rt.student.path.name, rt.teacher_identity)
        except DragError as exc:
            print(f"bench: error: {exc}", file=sys.stderr)
            return exc.exit_code
        report["questions"] = summarise(records, stats)
        report["questions"].update({"student": names[0], "teacher": names[1]})
        print(
            render_questions(
                report["questions"],
                f"Offline answers on teacher paraphrases of {len(records)} ARC-Challenge "
                f"questions · student {names[0]} · teacher {names[1]}",
            )
        )
    (args.out / f"store-{stamp}.json").write_text(json.dumps(report, indent=2), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
