"""SIMULATED teachers, for the benchmark only (issues 32 and 49).

No teacher stronger than the 1.5B student installs on the machines this is measured
on.  To see what the confidence gate does with a teacher that is sure of itself, each
simulation adds to the real local teacher's statements one statement written from the
question's options (no option letter) at a seeded random rank among the top K (the
smallest K of the run, so every column holds it; a ``pipeline.context_tokens`` budget
could still cut it).  The rank depends on the seed and the question only, so the three
kinds put their statement at the same rank:

- ``helpful``: "The correct answer is: <the correct option's words>." (the answer key);
- ``misleading``: the same sentence with a wrong option's words (one wrong option per
  question, seeded; not one that names a letter, "both A and B", or holds the correct
  option's words), a teacher that is confidently wrong;
- ``subtle``: a sentence that argues for that same wrong option without saying it is
  the answer, from a fixed template ("Specialists generally favour <words> here."),
  never from the answer key.

None is a teacher: they never talk to a model, they cannot be configured in the
product (``assistant`` cannot import ``drag_bench``: the import-linter contracts), and
their rows are named ``SIMULATION`` in every table.
"""

from __future__ import annotations

import dataclasses
import random
import re

from assistant.core.results import AskResult, ScoredEvidence
from drag_bench.mc import MCQuestion

VERSION = "simulated-v2"  # in run.json: what the simulations add, and where
KINDS = ("helpful", "misleading", "subtle")
ROW_PREFIXES = {
    "helpful": "SIMULATION: answer key + ",
    "misleading": "SIMULATION: wrong key + ",
    "subtle": "SIMULATION: subtle wrong + ",
}


def name(teacher: str, kind: str = "helpful") -> str:
    """The row name of the simulation of ``kind`` built on ``teacher``'s statements."""
    return ROW_PREFIXES[kind] + teacher


def kind_of(row_teacher: str) -> str:
    """The simulation a row's teacher name says ("" for a real teacher)."""
    return next((k for k, p in ROW_PREFIXES.items() if row_teacher.startswith(p)), "")


def _words(q: MCQuestion, label: str) -> str:
    return dict(q.options)[label].strip().rstrip(".")


def _names_a_label(q: MCQuestion, words: str) -> bool:
    """Whether an option's words name options by their letters ("both A and B", "A,C",
    "C"): two letters standing alone, or one that is the whole option (one alone may be
    the article "A")."""
    named = {label for label in q.labels if re.search(rf"(?<![\w']){label}(?![\w'])", words)}
    return len(named) >= 2 or words.strip() in q.labels


def wrong_label(q: MCQuestion, seed: int) -> str:
    """The wrong option the misleading simulations argue for (seeded per question): one
    that names no option's letter and does not hold the correct option's words, where
    the question has one (else any wrong option)."""
    wrong = [label for label in q.labels if label != q.answer]
    key = _words(q, q.answer).casefold()
    clean = [
        label
        for label in wrong
        if not _names_a_label(q, _words(q, label)) and key not in _words(q, label).casefold()
    ]
    return random.Random(f"{seed}:{q.id}:wrong").choice(clean or wrong)


def statement(q: MCQuestion, kind: str = "helpful", seed: int = 0) -> str:
    """The statement the simulation of ``kind`` adds: an option in plain words, no letter."""
    if kind == "helpful":
        return f"The correct answer is: {_words(q, q.answer)}."
    words = _words(q, wrong_label(q, seed))
    if kind == "misleading":
        return f"The correct answer is: {words}."
    if kind == "subtle":
        return f"Specialists generally favour {words} here."
    raise ValueError(f"unknown simulation {kind!r} (one of {', '.join(KINDS)})")


def with_statement(result: AskResult, q: MCQuestion, k: int, seed: int, kind: str) -> AskResult:
    """``result`` with the statement of ``kind`` placed at a random rank
    1..min(K, statements + 1) (seeded by ``seed`` and the question, the same for every
    kind), the others moved down one."""
    at = random.Random(f"{seed}:{q.id}").randint(1, min(k, len(result.evidence) + 1))
    text = statement(q, kind, seed)
    key = ScoredEvidence(rank=at, text=text, teacher_rank=0, similarity=0.0, score=0.0, raw=text)
    items = [*result.evidence[: at - 1], key, *result.evidence[at - 1 :]]
    ranked = [dataclasses.replace(e, rank=i) for i, e in enumerate(items, start=1)]
    return dataclasses.replace(result, evidence=ranked, timings={})
