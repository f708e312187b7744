"""What a question produces: the ranked context, the answer, and the record of how.

The types flow out of :mod:`assistant.core.pipeline` to every caller (CLI, TUI,
benchmarks) and into the history as ``AskResult.to_dict()``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from assistant.base import safetext
from assistant.base.config import Mode
from assistant.drag import answer

if TYPE_CHECKING:
    from assistant.base.config import Settings
    from assistant.models.reading import Generation
    from assistant.models.student import Student


@contextlib.contextmanager
def timed(timings: dict[str, float], stage: str) -> Iterator[None]:
    """``timings[stage]``: the seconds the block took."""
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[stage] = round(time.perf_counter() - started, 4)


@dataclass(frozen=True)
class ScoredEvidence:
    rank: int
    text: str  # placeholders restored: what the student and the user see
    teacher_rank: int
    similarity: float
    score: float
    raw: str = ""  # as the teacher wrote it (placeholders in place): what goes back to it


@dataclass(frozen=True)
class ScoredTriple:
    rank: int
    entity1: str
    entity2: str
    relation: str
    text: str
    sources: tuple[int, ...]
    similarity: float
    score: float
    raw: str = ""  # as the teacher wrote it (placeholders in place)


@dataclass(frozen=True)
class ScoredPassage:
    """A chunk of the user's own files (assistant.drag.graphsearch), with its source."""

    rank: int
    text: str
    path: str
    time: str  # the chat's or e-mail's time, "" where there is none
    page: int  # a PDF's page, 0 where there is none
    score: float
    cosine: float
    graph: float  # the graph path's score; 0 when vector search alone found it

    @property
    def label(self) -> str:
        """The passage's file (its name on one line: escapes for line breaks, as in the
        files list) and where in it, for the sources list and the student's prompt."""
        return safetext.name_line(f"{self.path}{self._where}")

    @property
    def heading(self) -> str:
        """The passage's source as the student may read it: the file's name, without its
        folders (the user's own layout, tens of tokens before every passage), and where
        in it; the sources list keeps the whole path (:attr:`label`)."""
        return safetext.name_line(f"{PurePath(self.path).name or self.path}{self._where}")

    @property
    def _where(self) -> str:
        """Where in its file the passage stands: its time, or its page, or nothing."""
        return f", {self.time}" if self.time else f", page {self.page}" if self.page else ""


Source = str  # "teacher" | "cache" | "files" | "none" (mode none: the student alone)


@dataclass
class AskResult:
    question: str
    mode: Mode
    n: int
    k: int
    answer: str = ""
    evidence: list[ScoredEvidence] = field(default_factory=list)  # all, best first
    triples: list[ScoredTriple] = field(default_factory=list)  # all, best first
    teacher: dict[str, Any] = field(default_factory=dict)
    student: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    prompt_versions: dict[str, str] = field(default_factory=dict)
    privacy: dict[str, Any] = field(default_factory=dict)  # what was sent; types and counts only
    warnings: list[str] = field(default_factory=list)
    source: Source = "none"  # where the context came from
    # From the cache: how it was found, its score, and the uploads it came from.
    provenance: dict[str, Any] = field(default_factory=dict)
    question_id: int | None = None  # its row in the history
    conversation_id: int | None = None  # the conversation it was asked in (the history's)
    # (evidence, triples) of the top K that fitted pipeline.context_tokens; None: no budget.
    fitted: tuple[int, int] | None = None
    # The confidence gate (assistant.drag.gate): which way it went; {} with no context.
    gate: dict[str, Any] = field(default_factory=dict)
    # From the user's own files (source "files"): the passages the answer read, best first.
    passages: list[ScoredPassage] = field(default_factory=list)

    def record_student(self, student: Student, gen: Generation, settings: Settings) -> None:
        """What the student did (:func:`student_record`), and a warning when it stopped
        before the answer's end (:func:`cut_short`)."""
        self.student = student_record(student, gen)
        if (cut := cut_short(gen, settings)) is not None:
            self.warnings.append(cut)

    @property
    def context_used(self) -> bool:
        """Whether the student's answer read the context (the gate may have left it out)."""
        return bool(self.gate.get("went", "evidence") == "evidence")

    @property
    def held_back(self) -> bool:
        """Whether the passages of the user's files did not bear the student's answer out
        (:mod:`assistant.drag.filessupport`; in a record of before issue 51, the student
        judged they did not answer): the reply is then "Your files do not say."."""
        p = self.provenance
        return bool((p.get("support") or p.get("judged") or {}).get("not_in_files"))

    @property
    def used_evidence(self) -> list[ScoredEvidence]:
        """The evidence offered to the student: the top K, or fewer where the token budget
        ended (``context_used`` says whether the gate let the answer read it)."""
        if not answer.uses_evidence(self.mode):
            return []
        return self.evidence[: self.k if self.fitted is None else min(self.k, self.fitted[0])]

    @property
    def used_triples(self) -> list[ScoredTriple]:
        if not answer.uses_graph(self.mode):
            return []
        return self.triples[: self.k if self.fitted is None else min(self.k, self.fitted[1])]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["used"] = {"evidence": len(self.used_evidence), "triples": len(self.used_triples)}
        data["context_used"] = self.context_used
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AskResult:
        """The record :meth:`to_dict` wrote (a `drag serve` answer, read by the CLI)."""
        known = {f.name for f in fields(cls)}
        kept = {k: v for k, v in data.items() if k in known}
        kept["evidence"] = [ScoredEvidence(**e) for e in data.get("evidence") or []]
        kept["triples"] = [
            ScoredTriple(**{**t, "sources": tuple(t.get("sources") or ())})
            for t in data.get("triples") or []
        ]
        kept["passages"] = [ScoredPassage(**p) for p in data.get("passages") or []]
        if kept.get("fitted") is not None:
            kept["fitted"] = tuple(kept["fitted"])
        return cls(**kept)


def cut_short(gen: Generation, settings: Settings) -> str | None:
    """The warning for an answer the student stopped writing before its end (it ends
    mid-sentence: said, so that nobody takes it for the whole answer), with what lets it
    write more; None when it ended on its own.  The student writes at most
    ``student.max_tokens``, fewer where the context window (``student.n_ctx``) ends
    first.  Where the environment sets max_tokens, the advice is the variable: `drag
    config set` would change nothing."""
    if gen.finished:
        return None
    max_tokens, n_ctx = settings.student.max_tokens, settings.student.n_ctx
    if gen.completion_tokens < max_tokens:
        return (
            f"the answer was cut off where the student's context window ends (student.n_ctx, "
            f"{n_ctx} tokens, holds the question, its context and the answer): a larger "
            "student.n_ctx lets it write more"
        )
    more = 2 * max_tokens
    if more > n_ctx // 2:  # the files' passages and the question need the rest
        return (
            f"the answer was cut off at student.max_tokens ({max_tokens} tokens): a larger "
            f"one needs a larger student.n_ctx ({n_ctx} tokens) too"
        )
    if settings.sources.get("student.max_tokens") == "env":
        how = (
            f"DRAG_STUDENT_MAX_TOKENS={more} (the environment drag runs in sets it, over "
            "the config file)"
        )
    else:
        how = f"drag config set student.max_tokens {more}"
    said = f"the answer was cut off at student.max_tokens ({max_tokens} tokens)"
    return f"{said}: {how} lets it write more"


def student_record(student: Student, gen: Generation) -> dict[str, Any]:
    """What ``AskResult.student`` says of an answer: the model, where it ran, its tokens
    and times."""
    return {
        "model": student.path.name,
        "gpu_offload": student.on_gpu,
        "prompt_tokens": gen.prompt_tokens,
        "completion_tokens": gen.completion_tokens,
        "prompt_seconds": round(gen.prompt_seconds, 4),
        "decode_seconds": round(gen.decode_seconds, 4),
        "tokens_per_second": round(gen.tokens_per_second, 2),
        "finished": gen.finished,  # False: cut off before its end (cut_short)
    }
