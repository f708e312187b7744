"""The accuracy benchmark's datasets and its grid: modes, K, answer formats, stages."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from assistant.base.config import MODES
from assistant.base.errors import InputError
from drag_bench.mc import MCQuestion, bundled, load_arc

DATASETS = {
    "arc-c": "arc_challenge_first200.jsonl",
    # ARC-Challenge test items 201-400: where student-side choices are tried, never reported.
    "arc-c-dev": "arc_challenge_dev200.jsonl",
    "mmlu": "mmlu_sample.jsonl",
    # MMLU's dev split (5 items per subject, none in its test split): tried on, never reported.
    "mmlu-dev": "mmlu_dev285.jsonl",
    "medmcqa": "medmcqa_sample.jsonl",
    "medmcqa-dev": "medmcqa_sample.jsonl",
    "medmcqa-test": "medmcqa_sample.jsonl",
    # MMLU test items no gate choice has seen (issue 49): the n=100 seed-0 runs used the others.
    "mmlu-rest": "mmlu_sample.jsonl",
}
# The parts of a set split by its published test sample (n, seed): "in" the test part,
# or the development part it left "out".
PARTS = {
    "medmcqa-dev": (200, 0, "out"),
    "medmcqa-test": (200, 0, "in"),
    "mmlu-rest": (100, 0, "out"),
}
DATASET_NAMES = {
    "arc-c": "ARC-Challenge",
    "arc-c-dev": "ARC-Challenge dev (items 201-400)",
    "mmlu": "MMLU",
    "mmlu-dev": "MMLU dev (the 285 few-shot items of its dev split)",
    "medmcqa": "MedMCQA",
    "medmcqa-dev": "MedMCQA dev (the 100 items the n=200 seed-0 test sample leaves out)",
    "medmcqa-test": "MedMCQA test (the n=200 seed-0 sample of the published table)",
    "mmlu-rest": "MMLU test (the 242 items the n=100 seed-0 sample leaves out)",
}
Z95 = 1.959964
ANSWER_FORMATS = ("reason", "letter")
# A context mode with the confidence gate on ("evidence+gate"): the student answers with
# the context or alone, whichever way it is surer (assistant.drag.gate).  The plain modes
# always use the context, as the paper does.
GATED = "+gate"
BENCH_MODES: tuple[str, ...] = (*MODES, *(m + GATED for m in MODES if m != "none"))
# The teacher's stages as AskResult.timings names them, in the order they run.
STAGES = ("sanitize", "recall", "evidence", "rank_evidence", "graph", "rank_triples")


# -- questions -------------------------------------------------------------------------------


def load_questions(
    dataset: str, path: Path | None, n: int, seed: int, subjects: Sequence[str] = ()
) -> list[MCQuestion]:
    """A seeded sample of ``n`` questions, in the file's order."""
    items = load_arc(path or bundled(DATASETS[dataset]))
    if path is None and dataset in PARTS:
        size, seed_of_test, side = PARTS[dataset]
        test = set(random.Random(seed_of_test).sample(range(len(items)), size))
        items = [q for i, q in enumerate(items) if (i in test) == (side == "in")]
    if subjects:
        known = sorted({q.subject for q in items if q.subject})
        unknown = [s for s in subjects if s not in known]
        if unknown:
            hint = f"subjects here: {', '.join(known[:8])}…" if known else "this set has none"
            raise InputError(f"unknown subject {unknown[0]!r} ({hint})")
        items = [q for q in items if q.subject in subjects]
    if n > len(items):
        raise InputError(f"--n {n}: the set has only {len(items)} questions")
    chosen = sorted(random.Random(seed).sample(range(len(items)), n))
    return [items[i] for i in chosen]


# -- figures ---------------------------------------------------------------------------------
