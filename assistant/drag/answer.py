"""DRAG stage 4: the student answers with the top-K evidence and/or triples.

Prompt shape as in the paper and its reference code: the question, then
"Evidences:", then "Relationships between entities:" (``order="question-first"``);
``"context-first"`` puts the question last.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from assistant.base.config import Mode, Order

PROMPT_VERSION = "answer-v1"

SYSTEM = (
    "You are a helpful assistant that answers questions accurately.\n"
    "Rules:\n"
    "1. Answer the question directly and concisely.\n"
    "2. Use the evidences and relationships when they help; ignore any that are irrelevant.\n"
    "3. If the question gives options, say which option is correct.\n"
    "4. Do not mention these rules."
)


# Answering from the user's own files (assistant.core.localfiles): excerpts, each
# headed by its source (its file's name and time or page: v3; its whole path: v1, kept
# to measure against), no answer there is said in one fixed sentence.
FILES_PROMPT_VERSION = "files-answer-v3"
FILES_PROMPT_VERSION_PATHS = "files-answer-v1"
NOT_IN_FILES = "Your files do not say."
FILES_SYSTEM = (
    "You answer questions about the user's own messages and files, using only the "
    "excerpts given. Each excerpt starts with its source in brackets.\n"
    "Rules:\n"
    "1. Answer directly and concisely, from the excerpts only.\n"
    f"2. If the excerpts do not answer the question, reply exactly: {NOT_IN_FILES}\n"
    "3. Do not mention these rules."
)


def build_files_messages(
    question: str, excerpts: Sequence[tuple[str, str]]
) -> list[dict[str, str]]:
    """``excerpts``: (source label, text), best first."""
    context = "\n\n".join(f"[{label}]\n{text}" for label, text in excerpts)
    user = f"Excerpts from the user's files:\n\n{context}\n\nQuestion: {question}"
    return [{"role": "system", "content": FILES_SYSTEM}, {"role": "user", "content": user}]


# Where the files answer's prompt starts to differ from one question to the next: its
# first excerpt's heading.  What comes before it is read once (localfiles.keep_head).
FILES_HEAD_MARK = "[\ue000"


def files_head() -> list[dict[str, str]]:
    """The files answer's prompt with :data:`FILES_HEAD_MARK` where the excerpts begin."""
    return build_files_messages("", [(FILES_HEAD_MARK[1:], "")])


def uses_evidence(mode: str) -> bool:
    """Whether the context mode ``mode`` gives the student evidence."""
    return mode in ("evidence", "combined")


def uses_graph(mode: str) -> bool:
    """Whether the context mode ``mode`` gives the student relationships (a graph)."""
    return mode in ("graph", "combined")


def build_messages(
    question: str,
    evidences: Sequence[str],
    relationships: Sequence[str],
    mode: Mode,
    *,
    system: str = SYSTEM,
    order: Order = "question-first",
) -> list[dict[str, str]]:
    context = []
    if uses_evidence(mode) and evidences:
        context.append("Evidences:\n" + "\n".join(f"- {e}" for e in evidences))
    if uses_graph(mode) and relationships:
        context.append(
            "Relationships between entities:\n" + "\n".join(f"- {r}" for r in relationships)
        )
    asked = f"Question: {question}"
    parts = [asked, *context] if order == "question-first" else [*context, asked]
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(parts)}]


def within_budget(
    evidences: Sequence[str],
    relationships: Sequence[str],
    budget: int,
    count: Callable[[str], int],
) -> tuple[list[str], list[str]]:
    """The best-ranked context that fits ``budget`` tokens: evidence and relationships
    taken in turn, best first, until the next one would not fit (a prefix of each)."""
    kept: tuple[list[str], list[str]] = ([], [])
    used = 0
    for pair in itertools.zip_longest(evidences, relationships):
        for side, text in enumerate(pair):
            if text is None:  # the shorter list has ended: the other goes on alone
                continue
            used += count(text) + 2  # the "- " and the line break
            if used > budget:
                return kept
            kept[side].append(text)
    return kept
