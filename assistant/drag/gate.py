"""The confidence gate: per question, the student answers with the teacher's context
or alone, whichever way it is surer of its answer.

The DRAG paper assumes a teacher far stronger than the student.  The product cannot:
the embedded teacher is the student's own size, and its evidence can lower the
student's accuracy (docs/benchmarks.md).  So before answering, the student reads the
opening of its reply both ways (:meth:`assistant.models.student.Student.probe`, which
reuses the shared prompt prefix) and :func:`decide` keeps the surer one.

How sure is measured (:func:`confidence`):
- a reply limited to choices (a multiple-choice letter): the log-probability of the
  choice it picked, among the choices;
- a free reply: the mean log-probability of the first ``PROBE_TOKENS`` tokens.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from assistant.base.config import Gate as GateSetting
from assistant.base.errors import ModelError

Way = Literal["evidence", "alone"]

# Tokens of a free reply read both ways before the answer is written.
PROBE_TOKENS = 8
# How much surer (in natural log-probability) the student must be with the context
# than without it to use it.  A free answer: 0, the rule as designed (its confidence
# is a mean over tokens, and no split measured another margin for it).
MARGIN = 0.0
# An answer limited to choices (a letter): the context is used unless the student
# alone is surer of its choice by more than 0.2.  Chosen on the three dev splits'
# readings (ARC-Challenge, MedMCQA, MMLU; docs/benchmarks.md, "The confidence gate"):
# at 0 the gate turned a strong teacher's key statement away where the student alone
# was sure of a wrong letter (lift kept 79-89 % in three of six rows); at -0.2 both
# targets held in all twelve rows.
MARGIN_CHOICES = -0.2


def confidence(
    text: str, token_logprobs: Sequence[float], choice_logprobs: Mapping[str, float]
) -> float:
    """How sure the student was of ``text`` (a log-probability: 0 is certain).

    With choices, the picked choice's log-probability among them; otherwise the mean
    log-probability of its tokens.  Nothing written is the least sure there is."""
    if choice_logprobs:
        picked = choice_logprobs.get(text.strip())
        return picked if picked is not None else max(choice_logprobs.values())
    if not token_logprobs:
        return -math.inf
    return math.fsum(token_logprobs) / len(token_logprobs)


def not_a_logprob(reading: _Reading) -> str:
    """The first value of ``reading`` that no log-probability can be (NaN, or +inf), as
    text; "" when there is none (-inf is one: a probability of 0)."""
    for value in (*reading.token_logprobs, *reading.choice_logprobs.values()):
        if math.isnan(value) or value == math.inf:
            return str(value)
    return ""


def decide(alone: float, with_context: float, margin: float = MARGIN) -> Way:
    """The way to answer: with the context only when the student is surer with it by
    more than ``margin`` (a negative margin: unless it is surer alone by more than
    its size); at margin 0 a tie keeps the student alone."""
    return "evidence" if with_context > alone + margin else "alone"


@dataclass(frozen=True)
class Decision:
    """Which way the gate went, and why: what ``AskResult.gate`` records."""

    setting: GateSetting
    way: Way
    alone: float | None = None  # the confidences compared (auto only)
    with_context: float | None = None
    alone_reply: str = ""  # the choices the student read (auto, with choices only)
    context_reply: str = ""
    seconds: float = 0.0
    reading: Any = None  # the chosen way's reading (auto only)
    error: str = ""  # why the gate could not read the student (then the context is used)
    margin: float | None = None  # the margin the confidences were compared with (auto)

    def to_dict(self) -> dict[str, Any]:
        def rounded(value: float | None) -> float | None:
            return None if value is None or not math.isfinite(value) else round(value, 4)

        return {
            "setting": self.setting,
            "went": self.way,
            "confidence_alone": rounded(self.alone),
            "confidence_with_context": rounded(self.with_context),
            "margin": self.margin if self.setting == "auto" else None,
            "reply_alone": self.alone_reply,
            "reply_with_context": self.context_reply,
            "seconds": round(self.seconds, 4),
            **({"error": self.error} if self.error else {}),
        }


class _Reading(Protocol):
    @property
    def text(self) -> str: ...
    @property
    def token_logprobs(self) -> tuple[float, ...]: ...
    @property
    def choice_logprobs(self) -> dict[str, float]: ...


class Prober(Protocol):
    """What the gate needs of the student (``Student.probe``)."""

    def probe(
        self, messages: Sequence[dict[str, str]], *, max_tokens: int, choices: Sequence[str] = ()
    ) -> _Reading: ...


def choose(
    student: Prober,
    setting: GateSetting,
    alone: Sequence[dict[str, str]],
    with_context: Sequence[dict[str, str]],
    choices: Sequence[str] = (),
) -> Decision:
    """Which of the two prompts the student answers: ``setting`` "auto" reads the
    opening of both replies (alone first, so the context's prompt is the one llama.cpp
    holds when it wins) and keeps the surer."""
    if setting != "auto":
        return Decision(setting, "evidence" if setting == "always-evidence" else "alone")
    started = time.perf_counter()
    tokens = 2 if choices else PROBE_TOKENS
    try:
        a = student.probe(alone, max_tokens=tokens, choices=choices)
        c = student.probe(with_context, max_tokens=tokens, choices=choices)
    except ModelError as exc:  # not a privacy path: the answer goes on as without a gate
        return Decision(setting, "evidence", error=str(exc))
    odd = not_a_logprob(a) or not_a_logprob(c)
    if odd:  # a broken reading (NaN, +inf): the answer goes on as without a gate, and says so
        why = f"its reading held {odd}, which is no log-probability"
        return Decision(setting, "evidence", seconds=time.perf_counter() - started, error=why)
    sure_alone = confidence(a.text, a.token_logprobs, a.choice_logprobs)
    sure_context = confidence(c.text, c.token_logprobs, c.choice_logprobs)
    margin = MARGIN_CHOICES if choices else MARGIN
    way = decide(sure_alone, sure_context, margin)
    # A free reply's opening is not kept: it may hold what the student read (values of
    # the question) and is not checked the way the answer is.
    return Decision(
        setting,
        way,
        sure_alone,
        sure_context,
        a.text if choices else "",
        c.text if choices else "",
        time.perf_counter() - started,
        reading=c if way == "evidence" else a,
        margin=margin,
    )


def describe(gate: Mapping[str, Any]) -> str:
    """The gate's way in a few words (empty when no context was offered)."""
    if not gate:
        return ""
    if gate.get("setting") == "never":
        return "context not used (pipeline.gate = never)"
    if gate.get("setting") == "always-evidence":
        return "context used (pipeline.gate = always-evidence)"
    if gate.get("error"):
        return f"context used: the gate could not read the student ({gate['error']})"
    if gate.get("went") == "evidence":
        return "context used: the student was not clearly surer alone"
    return "context not used: the student was surer alone"
