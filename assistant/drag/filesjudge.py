"""Whether the passages of the user's files answer the question: read before answering.

A small student told to reply "Your files do not say." when the passages do not answer
almost never does: on LiHuaWorld's questions whose answer is in no chat it answered
anyway, every time (docs/benchmarks.md, "Your own files").  So before it answers, the
student is asked, after the same passages and question, whether they answer it, and
reads "yes" or "no" (:meth:`assistant.models.student.Student.probe`; the answer that
follows reuses the prompt read for it, so the question costs a fraction of a second
more).  When "no" is likely enough, the reply is :data:`answer.NOT_IN_FILES` and the
student writes nothing else.

:data:`NO_AT_LEAST` was chosen on the tune half of LiHuaWorld's dev questions (the
half the retriever was tuned on); its figures are reported on the other half.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PROMPT_VERSION = "files-judge-v1"
ASK = "Do the excerpts answer this question? Reply yes or no."
YES = ("yes", "Yes")
NO = ("no", "No")
CHOICES = (*YES, *NO)
# The least log-probability of "no" (among yes and no) that makes the reply "Your files
# do not say.": ln 0.280.  On the tune half (105 questions, 1.5B student, K = 5) it
# leaves the most replies right: 63 against 54 without it (10 of the 14 unanswerable
# questions caught; 11 of the 91 answerable held back, 1 of them answered right).
# Command and readings: docs/results/local-docs-judge-tune.
NO_AT_LEAST = -1.274


def messages(answering: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    """The answer's own prompt with the question put to the student after it: the two
    share everything up to the question, which llama.cpp reads once."""
    *head, last = (dict(m) for m in answering)
    return [*head, {**last, "content": f"{last['content']}\n\n{ASK}"}]


def no_logprob(choice_logprobs: Mapping[str, float]) -> float | None:
    """The log-probability of "no" among yes and no, from the first step's reading of
    each spelling; None when the student's reading holds no choices."""
    if not all(c in choice_logprobs for c in CHOICES):
        return None
    no = _logsumexp([choice_logprobs[c] for c in NO])
    return no - _logsumexp([no, _logsumexp([choice_logprobs[c] for c in YES])])


def judge(choice_logprobs: Mapping[str, float]) -> Judgement:
    """The judgement of the student's reading; unread, with the reason, where it holds
    no choices or a value that is no log-probability (NaN, +inf): then the student
    answers as it would."""
    values = [choice_logprobs.get(c) for c in CHOICES]
    if any(v is not None and (math.isnan(v) or v == math.inf) for v in values):
        return Judgement(None, "the student's reading of yes and no held no log-probability")
    no = no_logprob(choice_logprobs)
    if no is None:
        return Judgement(None, "the student's first tokens do not tell yes from no")
    return Judgement(no)


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    if math.isinf(top):
        return top
    return top + math.log(math.fsum(math.exp(v - top) for v in values))


@dataclass(frozen=True)
class Judgement:
    """What the student read, and what came of it: ``AskResult.provenance["judged"]``."""

    no: float | None  # ln P(no); None: not read (``error`` says why)
    error: str = ""

    @property
    def not_in_files(self) -> bool:
        """ "Not in your files" when ln P(no) reaches :data:`NO_AT_LEAST`.  Unread (a model
        whose tokens cannot tell the choices apart), the student answers as it would."""
        return self.no is not None and self.no >= NO_AT_LEAST

    def to_dict(self) -> dict[str, Any]:
        return {
            "p_no": None if self.no is None else round(math.exp(self.no), 4),
            "p_no_at_least": round(math.exp(NO_AT_LEAST), 4),
            "not_in_files": self.not_in_files,
            **({"error": self.error} if self.error else {}),
        }
