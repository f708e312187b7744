"""A SIMULATED strong teacher, for the benchmark only (issue 32).

No teacher stronger than the 1.5B student installs on the machines this is measured
on.  To check that the confidence gate keeps evidence that helps, this simulation adds
to the real local teacher's statements one statement written from the answer key
("The correct answer is: <the option's words>.", no option letter) at a seeded random
rank among the top K (the smallest K of the run, so every column holds it; a
``pipeline.context_tokens`` budget could still cut it).  It is not a teacher: it never
talks to a model, it cannot be configured in the product (``assistant`` cannot import
``drag_bench``: the import-linter contracts), and its rows are named ``SIMULATION`` in every table.
"""

from __future__ import annotations

import dataclasses
import random

from assistant.core.results import AskResult, ScoredEvidence
from drag_bench.mc import MCQuestion

PREFIX = "SIMULATION: answer key + "
VERSION = "key-statement-v1"  # in run.json: what the simulation added, and where


def name(teacher: str) -> str:
    """The row name of the simulation built on ``teacher``'s statements."""
    return PREFIX + teacher


def key_statement(q: MCQuestion) -> str:
    """The answer key in plain words: the correct option's text, no letter."""
    words = dict(q.options)[q.answer].strip().rstrip(".")
    return f"The correct answer is: {words}."


def with_key(result: AskResult, q: MCQuestion, k: int, seed: int) -> AskResult:
    """``result`` with the key statement placed at a random rank 1..min(K, statements + 1)
    (seeded by ``seed`` and the question), the others moved down one."""
    at = random.Random(f"{seed}:{q.id}").randint(1, min(k, len(result.evidence) + 1))
    text = key_statement(q)
    key = ScoredEvidence(rank=at, text=text, teacher_rank=0, similarity=0.0, score=0.0, raw=text)
    items = [*result.evidence[: at - 1], key, *result.evidence[at - 1 :]]
    ranked = [dataclasses.replace(e, rank=i) for i, e in enumerate(items, start=1)]
    return dataclasses.replace(result, evidence=ranked, timings={})
