"""Multiple-choice questions: loading, the prompt, and reading the answer back."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from assistant.base.errors import InputError


@dataclass(frozen=True)
class MCQuestion:
    id: str
    question: str
    options: tuple[tuple[str, str], ...]  # (label, text)
    answer: str  # the correct label
    subject: str = ""

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(label for label, _ in self.options)

    def text(self) -> str:
        """The question with its options: what the teacher and the student see."""
        lines = [self.question.strip(), *(f"{label}. {text}" for label, text in self.options)]
        return "\n".join(lines)

    def student_prompt(self, answer_format: str = "reason") -> str:
        """The question, its options, and how to answer: ``"reason"`` (the letter, then a
        sentence) or ``"letter"`` (the letter alone; the caller enforces it)."""
        labels = ", ".join(self.labels)
        if answer_format == "letter":
            return f"{self.text()}\nReply with the letter of the correct option ({labels}) only."
        return (
            f"{self.text()}\n"
            f"Reply with the letter of the correct option ({labels}) first, "
            "then one short sentence of reason."
        )


def bundled_arc() -> Path:
    return bundled("arc_challenge_first200.jsonl")


def bundled(name: str) -> Path:
    """A bundled set by file name (see data/PROVENANCE.md)."""
    return Path(str(resources.files("drag_bench") / "data" / name))


def load_arc(path: Path) -> list[MCQuestion]:
    """The bundled JSONL form: {id, question, options: [{label, text}], answer[, subject]}."""
    out = []
    try:
        lines = path.read_text("utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            options = tuple((str(o["label"]), str(o["text"])) for o in row["options"])
            out.append(
                MCQuestion(
                    str(row["id"]),
                    str(row["question"]),
                    options,
                    str(row["answer"]),
                    str(row.get("subject", "")),
                )
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{path}:{number}: not an ARC item ({exc})") from None
    return out


_PATTERNS = (
    r"(?i:answer|option|choice)\s*(?i:is|:)?\s*[:\-]?\s*\(?\s*([A-Z0-9])\b",
    r"^\W*\(?([A-Z0-9])(?:\)|[.:]|\s+-|\s*$)",
    r"\(([A-Z0-9])\)",
    r"\b([A-Z0-9])\s*[.)]\s",
)


def extract_choice(reply: str, q: MCQuestion) -> str | None:
    """The option label a reply chose, or None when it cannot be told.

    Copes with "C", "(C)", "C.", "The answer is C", "**C**" and the option's own text.
    """
    text = reply.strip().replace("*", "")
    if not text:
        return None
    labels = set(q.labels)
    for pattern in _PATTERNS:
        for match in re.finditer(pattern, text, re.MULTILINE):
            label = match.group(1)
            if label in labels:
                return label
    folded = text.casefold()
    hits = [label for label, option in q.options if option.casefold().strip(". ") in folded]
    return hits[0] if len(hits) == 1 else None
