"""The privacy benchmark's utility run: the pipeline's accuracy on the questions with
personal data against the same questions without."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from assistant.base import config
from assistant.base.errors import GuardBlocked
from assistant.core.session import Session
from drag_bench.mc import MCQuestion, extract_choice
from drag_bench.privacy.datasets import bundled_path
from drag_bench.stats import paired


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
    from assistant.core import pipeline

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
        {
            "store.cache": False,
            "privacy.review": "never",
            "student.max_tokens": 48,
            "files.learn_names": False,  # the user's own files do not change the figures
        }
    )
    with Session(settings) as rt, per_item.open("a" if resume else "w") as fh:
        for i, record in enumerate(records, start=1):
            if record["id"] in done:
                continue
            row: dict[str, Any] = {"id": record["id"], "answer": record["answer"]}
            for version in ("clean", "pii"):
                q = _mc(record, with_pii=version == "pii")
                try:
                    with rt.own_placeholders():  # each item a conversation of its own
                        result = pipeline.gather(rt, q.text(), mode=mode)  # type: ignore[arg-type]
                        pipeline.respond(
                            rt, result, prompt=q.student_prompt(), gate_setting="always-evidence"
                        )
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
