"""DRAG stage 1: the teacher writes N evidence statements for the question.

Prompt after the paper's App. F and the reference implementation: factual
statements that help solve the question, ordered from most to least relevant,
without giving the answer away.  Output is requested as JSON (schema-enforced
where the server supports it) and parsed robustly either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from assistant.base.errors import TeacherError
from assistant.drag.parsing import parse_list
from assistant.models.teacher import Teacher
from assistant.net import egress

PROMPT_VERSION = "evidence-v1"

SYSTEM = (
    "You are an assistant in charge of generating factual evidence statements that aid in "
    "solving the provided question. Provide only the evidence statements with no additional "
    "remarks. Do not give the answer away directly in the evidence."
)

USER = (
    "Generate {n} evidence statements that pertain to answering the following question.\n"
    "Question: {question}\n"
    "Each statement is one self-contained factual sentence. Order them from most relevant "
    "to least relevant to answering the question.\n"
    'Reply with JSON only: {{"evidence": ["statement 1", "statement 2", ...]}}'
)


@dataclass(frozen=True)
class Evidence:
    text: str
    teacher_rank: int  # 1 = the teacher's most relevant


def schema(n: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "evidence": {
                "type": "array",
                "items": {"type": "string", "minLength": 3},
                "minItems": 1,
                "maxItems": n,
            }
        },
        "required": ["evidence"],
    }


def parse(text: str, n: int, deadline: float | None = None) -> list[Evidence]:
    keys = ("evidence", "evidences", "statements")
    items = parse_list(text, keys=keys, limit=n, deadline=deadline)
    return [Evidence(text=item, teacher_rank=i) for i, item in enumerate(items, start=1)]


def request(teacher: Teacher, question: str, n: int) -> egress.ChatRequest:
    """The evidence request for ``question`` (already sanitized), as ``teacher`` sends
    it.  The prompt's own words are public; the question is judged in full."""
    return teacher.request(
        "evidence",
        SYSTEM,
        USER.format(n=n, question=question),
        schema(n),
        templates=(USER,),
        prompt_version=PROMPT_VERSION,
    )


def generate(teacher: Teacher, question: str, n: int) -> list[Evidence]:
    """One teacher call; at most ``n`` statements in the teacher's order."""
    reply = teacher.complete(request(teacher, question, n))
    items = parse(reply.text, n, reply.deadline)
    if not items:
        cut = (
            " (the reply was cut off at teacher.max_tokens)"
            if reply.finish_reason == "length"
            else ""
        )
        raise TeacherError(
            f"the teacher's reply held no usable evidence{cut}; "
            "try again, or use a stronger teacher model",
            reply=reply.text,
        )
    return items
