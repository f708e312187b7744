"""DRAG end to end (arXiv 2506.01954, Algorithm 1).

question -> sanitize (detect, placeholders, student rewrite)
         -> recall from the local cache (assistant.recall): covered? -> skip the teacher
         -> review -> teacher evidence (1 call) -> rank (embeddings + RRF) -> top K
         -> teacher triples (1 call) -> merge per entity pair (<= 1 call) -> rank
         -> cache what the teacher said
         -> student answer with the top K evidence and/or triples, placeholders restored
         -> history (sealed).

Every teacher request passes the egress guard (assistant.privacy.guard) and
is written to the upload ledger (assistant.store.ledger).
:class:`Runtime` owns the loaded parts (student, embedder, detector, vault,
teacher and the embedded teacher server), loading each only when a stage
needs it.  The CLI and the TUI both call :func:`ask`.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np

from assistant import answer, drafts, evidence, graph, localserver, modelfiles, recall, secrets
from assistant.config import Mode, Settings
from assistant.embedder import SentenceEmbedder
from assistant.errors import (
    ConfigError,
    Declined,
    DragError,
    GuardBlocked,
    InputError,
    NotCovered,
    PrivacyError,
)
from assistant.privacy.detect import Detector, Scanner, category_modes, load_policy
from assistant.privacy.generalise import Generaliser
from assistant.privacy.guard import EgressGuard
from assistant.privacy.placeholders import Vault
from assistant.privacy.sanitize import Sanitized, sanitize
from assistant.ranking import Embedder, rank_texts
from assistant.store import Store, cache
from assistant.store.ledger import Upload
from assistant.student import Student
from assistant.teacher import Teacher

Status = Callable[[str], None]
# Shown original vs sanitized before an upload: True = send it, False = don't, or the
# version to send instead (``sanitized.keeping(values)``: values the user lets go as they are).
Review = Callable[[Sanitized], "bool | Sanitized"]


def _quiet(_message: str) -> None:
    pass


def validate_question(text: str, max_chars: int) -> str:
    """The question as it will be used, or an InputError saying why not."""
    question = text.strip()
    if not question:
        raise InputError("the question is empty: type a question, or pipe one on standard input")
    if "\x00" in question:
        raise InputError("the question contains a NUL byte: is this a binary file?")
    if len(question) > max_chars:
        raise InputError(
            f"the question is {len(question):,} characters long; the limit is {max_chars:,} "
            "(pipeline.max_question_chars)"
        )
    return question


class Runtime:
    """Lazily loaded parts for a series of questions; close() stops what it started."""

    def __init__(self, settings: Settings, *, status: Status = _quiet) -> None:
        self.settings = settings
        self.status = status
        self._stack = contextlib.ExitStack()
        # Held for local work (detection, vault, ranking, the store) but not while the
        # teacher is asked: several questions can wait on the teacher at once.
        self.local = threading.RLock()

    def _record_upload(self, upload: Upload) -> int:
        with self.local:
            return self.store.record_upload(upload)

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        student = self.__dict__.pop("student", None)
        if student is not None:
            student.close()
        store = self.__dict__.pop("store", None)
        if store is not None:
            store.close()
        self._stack.close()

    @cached_property
    def store(self) -> Store:
        """The local database: ledger, cache, history."""
        s = self.settings.store
        store = Store(Path(s.database).expanduser() if s.database else None, key=s.key)
        store.apply_retention(s.retention_days)
        drafts.purge(s.draft_days)
        return store

    @property
    def offline(self) -> bool:
        return self.settings.store.offline

    @cached_property
    def teacher_identity(self) -> str:
        """The teacher model as the cache knows it, found without starting or calling it."""
        if self.teacher_is_local:
            return f"local:{self.teacher_model_path.name}"
        return self.settings.teacher.model

    @property
    def cache_space(self) -> str:
        return cache.space_of(self.teacher_identity, _TEACHER_PROMPTS)

    @cached_property
    def student_path(self) -> Path:
        path, _spec = modelfiles.resolve(self.settings.student.model, self.status)
        return path

    @cached_property
    def student(self) -> Student:
        s = self.settings.student
        path = self.student_path
        self.status(f"loading the student model {path.name}…")
        return Student(path, n_ctx=s.n_ctx, gpu=s.gpu, threads=s.threads)

    @cached_property
    def embedder(self) -> Embedder:
        self.status("loading the embedding model…")
        return SentenceEmbedder(self.settings.embedder.model)

    @property
    def teacher_is_local(self) -> bool:
        return self.settings.teacher.endpoint.strip().lower() == "local"

    @cached_property
    def teacher_model_path(self) -> Path:
        t = self.settings.teacher
        path, _spec = modelfiles.resolve(t.model or self.settings.student.model, self.status)
        return path

    @cached_property
    def detector(self) -> Scanner:
        p = self.settings.privacy
        self.status("loading the personal-data detector…")
        return Detector(allow=p.allow, deny=p.deny, categories=category_modes(p.categories))

    @property
    def vault(self) -> Vault:
        """Placeholders for this conversation; never leaves the machine (sealed in the store).

        Inside :meth:`own_placeholders`, the ones of that piece of work instead."""
        own = _own_vault.get()
        if own is not None:
            return own
        vault: Vault | None = self.__dict__.get("_vault")
        if vault is None:
            vault = self.__dict__["_vault"] = Vault(tag_of=load_policy().tag)
        return vault

    @contextlib.contextmanager
    def own_placeholders(self) -> Iterator[Vault]:
        """Fresh placeholders for the work done inside, in this thread only: the benchmarks
        treat each question as a conversation of its own, so that a value detected in one
        question is neither protected nor replaced in another."""
        token = _own_vault.set(Vault(tag_of=load_policy().tag))
        try:
            yield self.vault
        finally:
            _own_vault.reset(token)

    conversation_id: int | None = None

    def switch_student(self, model: str) -> None:
        """Answer with another student from now on (the benchmarks' model sweeps)."""
        with self.local:
            student = self.__dict__.pop("student", None)
            if student is not None:
                student.close()
            self.__dict__.pop("student_path", None)
            self.settings = self.settings.with_flags({"student.model": model})

    def new_conversation(self) -> None:
        """Forget the current conversation's placeholders; the next question starts a new one."""
        self.__dict__["_vault"] = Vault(tag_of=load_policy().tag)
        self.conversation_id = None

    def resume(self, conversation_id: int) -> None:
        """Continue a stored conversation: its placeholders keep their meaning."""
        dumped = self.store.load_vault(conversation_id)
        vault = Vault(tag_of=load_policy().tag)
        if dumped:
            vault.load(dumped)
        self.__dict__["_vault"] = vault
        self.conversation_id = conversation_id

    @cached_property
    def guard(self) -> EgressGuard:
        return EgressGuard(self.detector, timeout=self.settings.privacy.guard_timeout)

    def rewrite(self, system: str, text: str) -> str:
        """The student's rewrite of a (placeholder) question."""
        reply = self.student.chat(
            [{"role": "system", "content": system}, {"role": "user", "content": text}],
            max_tokens=max(64, len(text) // 2),
            temperature=0.0,
        )
        return reply.text

    def sanitize(self, question: str) -> Sanitized:
        p = self.settings.privacy
        self.status("checking the question for personal data…")
        return sanitize(
            question,
            scanner=self.detector,
            vault=self.vault,
            guard=self.guard,
            rewriter=self.rewrite if p.rewrite != "never" else None,
            rewrite=p.rewrite,
            generaliser=self.generaliser,
        )

    @cached_property
    def generaliser(self) -> Generaliser:
        return Generaliser.from_policy(load_policy().generalise)

    @cached_property
    def teacher(self) -> Teacher:
        t = self.settings.teacher
        # The ledger MACs every upload with the store key: a key problem is found now,
        # before anything is sent, not after the teacher has answered.
        _ = self.store.sealer
        if self.teacher_is_local:
            path = self.teacher_model_path
            self.status(f"starting the local teacher ({path.name})…")
            base_url = self._stack.enter_context(localserver.serving(path, n_ctx=t.n_ctx))
            return Teacher.from_settings(
                t,
                base_url=base_url,
                model=localserver.ALIAS,
                api_key=None,
                local=True,
                guard=self.guard,
                protected=lambda: self.vault.values(),
                ledger=self._record_upload,
            )
        if not t.model:
            raise ConfigError(
                f"teacher.model is not set for the endpoint {t.endpoint}: "
                "set DRAG_TEACHER_MODEL or teacher.model in the config file"
            )
        return Teacher.from_settings(
            t,
            base_url=t.endpoint,
            model=t.model,
            api_key=secrets.api_key(),
            local=False,
            guard=self.guard,
            protected=lambda: self.vault.values(),
            ledger=self._record_upload,
        )


# The placeholders of the work under way in this thread (Runtime.own_placeholders).
_own_vault: contextvars.ContextVar[Vault | None] = contextvars.ContextVar(
    "drag_own_vault", default=None
)

_TEACHER_PROMPTS = {"evidence": evidence.PROMPT_VERSION, "graph": graph.PROMPT_VERSION}


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


Source = str  # "teacher" | "cache" | "none" (mode none: the student alone)


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

    @property
    def used_evidence(self) -> list[ScoredEvidence]:
        return self.evidence[: self.k] if answer.uses_evidence(self.mode) else []

    @property
    def used_triples(self) -> list[ScoredTriple]:
        return self.triples[: self.k] if answer.uses_graph(self.mode) else []

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["used"] = {"evidence": len(self.used_evidence), "triples": len(self.used_triples)}
        return data


@contextlib.contextmanager
def _timed(timings: dict[str, float], stage: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[stage] = round(time.perf_counter() - started, 4)


def _set_evidence(
    runtime: Runtime,
    result: AskResult,
    sent: str,
    items: list[tuple[str, int]],
    *,
    teacher_order: bool = True,
) -> None:
    """Rank (text, teacher_rank) items against the question as sent; restore placeholders."""
    with _timed(result.timings, "rank_evidence"):
        ranked = rank_texts(
            sent,
            [text for text, _ in items],
            runtime.embedder,
            [r for _, r in items] if teacher_order else None,
        )
    restore = runtime.vault.restore
    result.evidence = [
        ScoredEvidence(
            rank=pos,
            text=restore(items[r.index][0]),
            teacher_rank=items[r.index][1],
            similarity=r.similarity,
            score=r.score,
            raw=items[r.index][0],
        )
        for pos, r in enumerate(ranked, start=1)
    ]


def _set_triples(
    runtime: Runtime, result: AskResult, sent: str, triples: list[graph.Triple]
) -> None:
    with _timed(result.timings, "rank_triples"):
        ranked = rank_texts(sent, [tr.text for tr in triples], runtime.embedder)
    restore = runtime.vault.restore
    result.triples = []
    for pos, r in enumerate(ranked, start=1):
        tr = triples[r.index]
        result.triples.append(
            ScoredTriple(
                rank=pos,
                entity1=restore(tr.entity1),
                entity2=restore(tr.entity2),
                relation=restore(tr.relation),
                text=restore(tr.text),
                sources=tr.sources,
                similarity=r.similarity,
                score=r.score,
                raw=tr.text,
            )
        )


def _evidence_stage(
    runtime: Runtime, teacher: Teacher, result: AskResult, sent: str
) -> list[evidence.Evidence]:
    runtime.status("asking the teacher for evidence…")
    with _timed(result.timings, "evidence"):
        items = evidence.generate(teacher, sent, result.n)
    # Ranked against the question the teacher saw, in the same placeholder form.
    with runtime.local:
        _set_evidence(runtime, result, sent, [(e.text, e.teacher_rank) for e in items])
    return items


def _graph_stage(
    runtime: Runtime, teacher: Teacher, result: AskResult, sent: str
) -> list[graph.Triple]:
    kept = [e.raw for e in result.evidence[: result.k]]
    runtime.status("asking the teacher for the knowledge graph…")
    with _timed(result.timings, "graph"):
        triples = graph.merge(teacher, graph.extract(teacher, kept))
    with runtime.local:
        _set_triples(runtime, result, sent, triples)
    return triples


def _from_cache(runtime: Runtime, result: AskResult, sent: str, found: recall.Recalled) -> None:
    """Fill the result's context from what the cache recalled."""
    if found.entry is not None:  # exact or near-duplicate: the entry's own items
        items = sorted(((e.text, e.teacher_rank) for e in found.evidence), key=lambda x: x[1])
        _set_evidence(runtime, result, sent, items[: result.n])
    else:
        _set_evidence(
            runtime,
            result,
            sent,
            [(e.text, e.teacher_rank) for e in found.evidence],
            teacher_order=False,
        )
    triples = [graph.Triple(t.entity1, t.entity2, t.relation, t.sources) for t in found.triples]
    _set_triples(runtime, result, sent, triples)
    result.source = "cache"
    result.provenance = {
        "how": found.how,
        "score": round(found.score, 4),
        "uploads": list(found.uploads),
        "entry_id": found.entry.id if found.entry else None,
        "matched_question": found.matched_question or None,
        "entities": found.entities,
    }


def _remember(
    runtime: Runtime,
    result: AskResult,
    sent: str,
    items: list[tuple[str, int]],
    triples: list[graph.Triple] | None,
    uploads: dict[str, int | None],
) -> int | None:
    """Cache what the teacher said for this question (placeholder form only)."""
    embed = runtime.embedder.embed
    names = sorted({name for t in triples or [] for name in (t.entity1, t.entity2)})
    q_vec = embed([sent])[0]
    entry = cache.NewEntry(
        space=runtime.cache_space,
        question=sent,
        teacher_model=runtime.teacher_identity,
        prompt_versions=dict(_TEACHER_PROMPTS),
        n=result.n,
        embedding=q_vec,
        evidence=items,
        evidence_embeddings=embed([text for text, _ in items]) if items else None,
        evidence_upload=uploads.get("evidence"),
        triples=[
            cache.NewTriple(t.entity1, t.entity2, t.relation, t.text, t.sources)
            for t in triples or []
        ],
        triple_embeddings=embed([t.text for t in triples]) if triples else None,
        entity_embeddings=dict(zip(names, embed(names), strict=True)) if names else {},
        graph_upload=uploads.get("merge") or uploads.get("triples"),
        has_graph=triples is not None,
    )
    try:
        return runtime.store.put_cache(entry)
    except DragError as exc:
        result.warnings.append(f"not cached: {exc}")
        return None


def _recall(runtime: Runtime, result: AskResult, sent: str) -> recall.Recalled:
    if not runtime.settings.store.cache:
        return recall.Recalled("none", 0.0)
    runtime.status("looking in the local cache…")
    with _timed(result.timings, "recall"):
        q_vec = runtime.embedder.embed([sent])[0]
        found = recall.recall(
            runtime.store.db,
            runtime.store.index(runtime.cache_space),
            sent,
            np.asarray(q_vec, dtype=np.float32),
            runtime.embedder,
            n=result.n,
            k=result.k,
            near_duplicate=runtime.settings.store.near_duplicate,
        )
    return found


def _reviewed(shown: Sanitized, chosen: Sanitized) -> Sanitized:
    """The version the user approved: the same question, values released only from it."""
    detected = {r.value for r in (*shown.redacted.replacements, *shown.kept)}
    if chosen.original != shown.original or not set(chosen.released) <= detected:
        raise PrivacyError("not sent: the reviewed question does not match the one asked")
    return chosen


def needs_review(policy: str, sanitized: Sanitized) -> bool:
    return policy == "always" or (policy == "on-detection" and bool(sanitized.findings))


def gather(
    runtime: Runtime,
    question: str,
    *,
    mode: Mode | None = None,
    n: int | None = None,
    k: int | None = None,
    review: Review | None = None,
    review_policy: str | None = None,
    reuse: Literal["any", "exact"] = "any",
) -> AskResult:
    """The teacher's part: sanitize, then evidence, ranking and graph (<= 3 teacher calls).

    ``reuse="exact"`` takes from the cache only this very question's teacher work (the
    benchmarks: a related question's evidence would blur what is measured).

    ``review`` is asked before anything is sent when the review policy calls
    for it; without one, such a question is not sent (fail closed).
    """
    p = runtime.settings.pipeline
    question = validate_question(question, p.max_question_chars)
    result = AskResult(question=question, mode=mode or p.mode, n=n or p.n, k=k or p.k)
    result.prompt_versions = {
        "evidence": evidence.PROMPT_VERSION,
        "graph": graph.PROMPT_VERSION,
        "answer": answer.PROMPT_VERSION,
    }
    if result.mode == "none":
        return result
    with runtime.local:
        with _timed(result.timings, "sanitize"):
            sanitized = runtime.sanitize(question)
        result.privacy = {"sent_question": sanitized.text, **sanitized.summary()}
        found = _recall(runtime, result, sanitized.text)
        if reuse == "exact" and found.how != "exact":
            found = recall.Recalled("none", 0.0)
        if found.covers(runtime.settings.store.coverage):
            _from_cache(runtime, result, sanitized.text, found)
            if (
                answer.uses_graph(result.mode)
                and found.entry is not None
                and not found.entry.has_graph
            ):
                result.warnings.append(
                    "the cached answer has no knowledge graph (it was asked in evidence mode)"
                )
            return result
    if runtime.offline:
        why = (
            f"the nearest cached items score {found.score:.2f}, below store.coverage "
            f"{runtime.settings.store.coverage:.2f}"
            if found.how == "graph"
            else "the cache holds nothing related"
        )
        raise NotCovered(
            f"offline, and the local cache does not cover this question ({why}); "
            "ask again online to fetch evidence from the teacher"
        )
    policy = review_policy or runtime.settings.privacy.review
    if needs_review(policy, sanitized):
        if review is None:
            raise PrivacyError(
                f"this question needs your review before it is sent (privacy.review = {policy}), "
                'but there is no terminal to ask on: pass --yes, or set privacy.review = "never"'
            )
        verdict = review(sanitized)
        if verdict is False:
            raise Declined("not sent: you declined the upload")
        if isinstance(verdict, Sanitized):
            sanitized = _reviewed(sanitized, verdict)
            result.privacy = {"sent_question": sanitized.text, **sanitized.summary()}
    with runtime.local:
        teacher = runtime.teacher.for_question(
            dict(sanitized.counts), sanitized.released, tuple(sanitized.hints.values())
        )
    items = _evidence_stage(runtime, teacher, result, sanitized.text)
    triples: list[graph.Triple] | None = None
    if answer.uses_graph(result.mode):
        try:
            triples = _graph_stage(runtime, teacher, result, sanitized.text)
        except GuardBlocked as exc:  # the evidence alone still answers
            result.warnings.append(f"knowledge graph skipped: {exc}")
    calls = teacher.calls
    result.source = "teacher"
    result.teacher = {
        "endpoint": "local" if runtime.teacher_is_local else teacher.endpoint.base_url,
        "model": teacher.model,
        "structured": teacher.structured,
        "calls": [asdict(c) for c in calls],
        "prompt_tokens": sum(c.prompt_tokens for c in calls),
        "completion_tokens": sum(c.completion_tokens for c in calls),
    }
    uploads = {c.purpose: c.upload_id for c in calls}
    with runtime.local:
        entry_id = _remember(
            runtime,
            result,
            sanitized.text,
            [(e.text, e.teacher_rank) for e in items],
            triples,
            uploads,
        )
    result.provenance = {
        "uploads": [c.upload_id for c in calls if c.upload_id is not None],
        "entry_id": entry_id,
    }
    return result


def respond(
    runtime: Runtime,
    result: AskResult,
    *,
    prompt: str | None = None,
    on_text: Callable[[str], None] | None = None,
) -> AskResult:
    """The student's part: answer with the top K context of ``result.mode``.

    ``prompt`` replaces the question in the student's prompt (the benchmark
    adds answer-format instructions); the teacher never sees it.
    """
    student = runtime.student
    messages = answer.build_messages(
        prompt or result.question,
        [e.text for e in result.used_evidence],
        [tr.text for tr in result.used_triples],
        result.mode,
    )
    runtime.status("the student is answering…")
    s = runtime.settings.student
    with _timed(result.timings, "answer"):
        gen = student.chat(
            messages, max_tokens=s.max_tokens, temperature=s.temperature, on_text=on_text
        )
    result.answer = runtime.vault.restore(gen.text)
    result.student = {
        "model": student.path.name,
        "gpu_offload": student.on_gpu,
        "prompt_tokens": gen.prompt_tokens,
        "completion_tokens": gen.completion_tokens,
        "prompt_seconds": round(gen.prompt_seconds, 4),
        "decode_seconds": round(gen.decode_seconds, 4),
        "tokens_per_second": round(gen.tokens_per_second, 2),
    }
    result.timings.pop("total", None)
    result.timings["total"] = round(sum(result.timings.values()), 4)
    return result


def ask(
    runtime: Runtime,
    question: str,
    *,
    mode: Mode | None = None,
    n: int | None = None,
    k: int | None = None,
    on_text: Callable[[str], None] | None = None,
    review: Review | None = None,
    review_policy: str | None = None,
) -> AskResult:
    """Answer one question through the whole DRAG pipeline (at most 3 teacher calls)."""
    gathered = gather(
        runtime, question, mode=mode, n=n, k=k, review=review, review_policy=review_policy
    )
    return remember_answer(runtime, respond(runtime, gathered, on_text=on_text))


def remember_answer(runtime: Runtime, result: AskResult) -> AskResult:
    """Keep the question and answer in the history (sealed), and the conversation's vault."""
    try:
        store = runtime.store
        if runtime.conversation_id is None:
            runtime.conversation_id = store.new_conversation(title=result.question[:80])
        result.question_id = store.save_question(
            conversation_id=runtime.conversation_id,
            original=result.question,
            sanitized=result.privacy.get("sent_question"),
            answer=result.answer,
            mode=result.mode,
            source=result.source,
            entry_id=result.provenance.get("entry_id"),
            uploads=list(result.provenance.get("uploads") or []),
            record=result.to_dict(),
        )
        store.save_vault(runtime.conversation_id, runtime.vault.dump())
    except DragError as exc:  # the answer is shown all the same
        result.warnings.append(f"not saved to the history: {exc}")
    return result
