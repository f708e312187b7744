"""DRAG stage 4: the student answers with the top-K evidence and/or triples.

Prompt shape as in the paper and its reference code: the question, then
"Evidences:", then "Relationships between entities:".
"""

from __future__ import annotations

from collections.abc import Sequence

from assistant.config import Mode

PROMPT_VERSION = "answer-v1"

SYSTEM = (
    "You are a helpful assistant that answers questions accurately.\n"
    "Rules:\n"
    "1. Answer the question directly and concisely.\n"
    "2. Use the evidences and relationships when they help; ignore any that are irrelevant.\n"
    "3. If the question gives options, say which option is correct.\n"
    "4. Do not mention these rules."
)


def uses_evidence(mode: Mode) -> bool:
    return mode in ("evidence", "combined")


def uses_graph(mode: Mode) -> bool:
    return mode in ("graph", "combined")


def build_messages(
    question: str,
    evidences: Sequence[str],
    relationships: Sequence[str],
    mode: Mode,
    *,
    system: str = SYSTEM,
) -> list[dict[str, str]]:
    parts = [f"Question: {question}"]
    if uses_evidence(mode) and evidences:
        parts.append("Evidences:\n" + "\n".join(f"- {e}" for e in evidences))
    if uses_graph(mode) and relationships:
        parts.append(
            "Relationships between entities:\n" + "\n".join(f"- {r}" for r in relationships)
        )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(parts)}]
