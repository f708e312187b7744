"""DRAG end to end (arXiv 2506.01954, Algorithm 1), the stages in the order the data flows.

question -> sanitize (detect, placeholders, student rewrite)
         -> recall from the local cache (assistant.drag.recall): covered? -> skip the teacher
         -> review -> teacher evidence (1 call) -> rank (embeddings + RRF) -> top K
         -> teacher triples (1 call) -> merge per entity pair (<= 1 call) -> rank
         -> cache what the teacher said
         -> student answer with the top K evidence and/or triples, placeholders restored
         -> history (sealed).

Every teacher request passes the egress guard (assistant.privacy.guard) and
is written to the upload ledger (assistant.store.ledger).  The loaded parts
live in :class:`assistant.core.session.Session`; what a question produces is an
:class:`assistant.core.results.AskResult`.  The CLI and the TUI both call :func:`ask`;
the benchmarks call its two halves, :func:`gather` and :func:`respond`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from assistant.base.config import Gate, Mode
from assistant.base.errors import DragError, GuardBlocked, InputError, ModelError, NotCovered
from assistant.core.keeping import account, remember_answer
from assistant.core.results import AskResult, ScoredEvidence, ScoredTriple, timed
from assistant.core.session import Session
from assistant.drag import answer, evidence, gate, graph, recall
from assistant.drag.ranking import rank_texts
from assistant.models.teacher import Teacher
from assistant.privacy.guard import LinkHold, withhold_links
from assistant.privacy.review import Review, approved

# Shown original vs sanitized before an upload: True = send it, False = don't, or the
# version to send instead (``sanitized.keeping(values)``: values the user lets go as they are).
# Told as ask() goes: the stage reached ("context", "answered") and the result so far.
Progress = Callable[[Literal["context", "answered", "graph"], AskResult], None]


def _silent(_stage: str, _result: AskResult) -> None:
    pass


def validate_question(text: str, max_chars: int) -> str:
    """The question as it will be used, or an InputError saying why not."""
    question = text.strip()
    if not question:
        raise InputError("the question is empty")  # the CLI says how to give one
    if "\x00" in question:
        raise InputError("the question contains a NUL byte: is this a binary file?")
    if len(question) > max_chars:
        raise InputError(
            f"the question is {len(question):,} characters long; the limit is {max_chars:,} "
            "(pipeline.max_question_chars)"
        )
    return question


def _recall(runtime: Session, result: AskResult, sent: str) -> recall.Recalled:
    if not runtime.settings.store.cache:
        return recall.Recalled("none", 0.0)
    runtime.status("looking in the local cache…")
    with timed(result.timings, "recall"):
        off = runtime.cache_off(result.warnings)
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
            by_meaning=not off,
        )
    return found


def _answer_from_cache(
    runtime: Session, result: AskResult, sent: str, reuse: Literal["any", "exact"]
) -> recall.Recalled | None:
    """Answer from the cache when it covers ``sent`` (``reuse="exact"``: only this very
    question's work) and return None; otherwise what the cache held (``recall.Recalled``)."""
    found = _recall(runtime, result, sent)
    if reuse == "exact" and found.how != "exact":
        found = recall.Recalled("none", 0.0)
    if found.covers(runtime.settings.store.coverage):
        _from_cache(runtime, result, sent, found)
        return None
    return found


def _from_cache(runtime: Session, result: AskResult, sent: str, found: recall.Recalled) -> None:
    """Fill the result's context from what the cache recalled."""
    chosen = found.evidence
    if found.entry is not None:  # exact or near-duplicate: the entry's own items
        chosen = sorted(found.evidence, key=lambda e: e.teacher_rank)[: result.n]
    triples = [graph.Triple(t.entity1, t.entity2, t.relation, t.sources) for t in found.triples]
    # Ranked from the embeddings the cache keeps, when this embedder made them: only the
    # question is embedded (as recall has, unless an exact repeat was found by its text).
    asked = found.asked if found.asked is not None else runtime.embedder.embed([sent])[0]
    shown, embed = [t.text for t in triples], runtime.embedder.embed
    mine = not runtime.cache_off(result.warnings)
    kept = recall.stored_vectors(runtime.store.db, found, asked, chosen, shown, embed, mine)
    items, own = [(e.text, e.teacher_rank) for e in chosen], found.entry is not None
    _set_evidence(runtime, result, sent, items, teacher_order=own, vectors=kept[0])
    _set_triples(runtime, result, sent, triples, kept[1])
    if answer.uses_graph(result.mode) and found.entry is not None and not found.entry.has_graph:
        result.warnings.append(
            "the cached answer has no knowledge graph (it was asked in evidence mode)"
        )
    result.source = "cache"
    result.provenance = {
        "how": found.how,
        "score": round(found.score, 4),
        "uploads": list(found.uploads),
        "entry_id": found.entry.id if found.entry else None,
        "matched_question": found.matched_question or None,
        "entities": found.entities,
    }


def _evidence_stage(
    runtime: Session, teacher: Teacher, result: AskResult, sent: str
) -> list[evidence.Evidence]:
    runtime.status("asking the teacher for evidence…")
    with timed(result.timings, "evidence"):
        items = evidence.generate(teacher, sent, result.n)
    # Ranked against the question the teacher saw, in the same placeholder form.
    with runtime.local:
        _set_evidence(runtime, result, sent, [(e.text, e.teacher_rank) for e in items])
    return items


def _set_evidence(
    runtime: Session,
    result: AskResult,
    sent: str,
    items: list[tuple[str, int]],
    *,
    teacher_order: bool = True,
    vectors: NDArray[np.float32] | None = None,
) -> None:
    """Rank (text, teacher_rank) items against the question as sent (``vectors``: the
    question's and the items' embeddings, where known: rank_texts); restore placeholders."""
    with timed(result.timings, "rank_evidence"):
        ranked = rank_texts(
            sent,
            [text for text, _ in items],
            runtime.embedder,
            [r for _, r in items] if teacher_order else None,
            repeat_threshold=runtime.settings.pipeline.repeat_threshold,
            vectors=vectors,
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


def _graph_stage(
    runtime: Session, teacher: Teacher, result: AskResult, sent: str
) -> list[graph.Triple]:
    kept = [e.raw for e in result.evidence[: result.k]]
    runtime.status("asking the teacher for the knowledge graph…")
    with timed(result.timings, "graph"):
        triples = graph.merge(teacher, graph.extract(teacher, kept))
    with runtime.local:
        _set_triples(runtime, result, sent, triples)
    return triples


def _set_triples(
    runtime: Session,
    result: AskResult,
    sent: str,
    triples: list[graph.Triple],
    vectors: NDArray[np.float32] | None = None,
) -> None:
    with timed(result.timings, "rank_triples"):
        ranked = rank_texts(
            sent,
            [tr.text for tr in triples],
            runtime.embedder,
            repeat_threshold=runtime.settings.pipeline.repeat_threshold,
            vectors=vectors,
        )
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


@dataclass(frozen=True)
class GraphLater:
    """The graph of a question whose answer reads the evidence only: built after the
    answer with the same teacher, for the cache (``pipeline.graph_timing``)."""

    teacher: Teacher
    sent: str
    items: list[evidence.Evidence]


def graph_after_answer(runtime: Session, mode: Mode) -> bool:
    """Whether ``mode``'s graph is built after the answer: ``pipeline.graph_timing``, where
    "auto" means after with the embedded local teacher (it writes the graph slowly)."""
    timing = runtime.settings.pipeline.graph_timing
    if not answer.uses_graph(mode) or timing == "before-answer":
        return False
    return timing == "after-answer" or runtime.teacher_is_local


def gather(
    runtime: Session,
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
    result, _later = _gather(
        runtime,
        question,
        mode=mode,
        n=n,
        k=k,
        review=review,
        review_policy=review_policy,
        reuse=reuse,
        graph_may_wait=False,
    )
    return result


def _gather(
    runtime: Session,
    question: str,
    *,
    mode: Mode | None,
    n: int | None,
    k: int | None,
    review: Review | None,
    review_policy: str | None,
    reuse: Literal["any", "exact"],
    graph_may_wait: bool,
) -> tuple[AskResult, GraphLater | None]:
    """:func:`gather`; with ``graph_may_wait``, where :func:`graph_after_answer` says so,
    the graph is left for after the answer and the result's mode becomes "evidence"
    (what the answer reads)."""
    p = runtime.settings.pipeline
    question = validate_question(question, p.max_question_chars)
    result = AskResult(question=question, mode=mode or p.mode, n=n or p.n, k=k or p.k)
    result.prompt_versions = {
        "evidence": evidence.PROMPT_VERSION,
        "graph": graph.PROMPT_VERSION,
        "answer": answer.PROMPT_VERSION,
    }
    if result.mode == "none":
        return result, None
    with runtime.local:
        if runtime.offline and runtime.settings.store.cache:
            # Offline nothing leaves the machine, so a question need not be checked to be
            # answered: an exact repeat of a cached question that had nothing to replace
            # (its cache key is its own text) is answered without loading the detector.
            runtime.status("looking in the local cache…")
            with timed(result.timings, "recall"):
                repeat = recall.exact(runtime.store.db, runtime.cache_space, question, result.n)
            if repeat is not None:
                _from_cache(runtime, result, question, repeat)
                return result, None
        with timed(result.timings, "sanitize"):
            sanitized = runtime.sanitize(question)
        result.privacy = {"sent_question": sanitized.text, **sanitized.summary()}
        found = _answer_from_cache(runtime, result, sanitized.text, reuse)
        if found is None:
            return result, None
    if runtime.offline:
        why = runtime.cache_by_meaning_off() or (
            f"the nearest cached items score {found.score:.2f}, below store.coverage "
            f"{runtime.settings.store.coverage:.2f}"
            if found.how == "graph"
            else "the cache holds nothing related"
        )
        with runtime.local:  # the store's lock
            held = recall.statements_cached(runtime.store.db, runtime.cache_space, sanitized.text)
        if held is not None and held < result.n:  # this very question, with fewer
            why = (
                f"it was cached asking the teacher for {held} statements, and {result.n} are "
                f"asked now: asked for {held} (pipeline.n, --n), it is answered from the cache"
            )
        raise NotCovered(
            f"offline, and the local cache does not cover this question ({why}); "
            "ask again online to fetch evidence from the teacher"
        )
    # The question may now be uploaded: the local model reads it too (privacy.reader),
    # outside the local lock (seconds of llama.cpp); its values join the detector's.
    reading = None
    if runtime.settings.privacy.reader == "on":
        with timed(result.timings, "read"):
            reading = runtime.read(question)
    if reading is not None:
        with runtime.local:
            before, sanitized = sanitized.text, runtime.sanitize(question, reading)
            result.privacy = {"sent_question": sanitized.text, **sanitized.summary()}
            # The cache keeps questions as they were sent, after the reader: look again
            # in that form (a repeat of a question it changed is found now).
            changed = sanitized.text != before
            if changed and _answer_from_cache(runtime, result, sanitized.text, reuse) is None:
                return result, None
    chosen = approved(sanitized, review_policy or runtime.settings.privacy.review, review)
    if chosen is not sanitized:
        sanitized = chosen
        result.privacy = {"sent_question": sanitized.text, **sanitized.summary()}
    with runtime.local:
        teacher = runtime.teacher.for_question(
            dict(sanitized.counts), sanitized.released, tuple(sanitized.hints.values())
        )
    items = _evidence_stage(runtime, teacher, result, sanitized.text)
    triples: list[graph.Triple] | None = None
    later: GraphLater | None = None
    if graph_may_wait and graph_after_answer(runtime, result.mode):
        later = GraphLater(teacher, sanitized.text, items)
        result.mode = "evidence"
    elif answer.uses_graph(result.mode):
        try:
            triples = _graph_stage(runtime, teacher, result, sanitized.text)
        except GuardBlocked as exc:  # the evidence alone still answers
            result.warnings.append(f"knowledge graph skipped: {exc}")
    account(runtime, teacher, result, sanitized.text, items, triples)
    return result, later


def _graph_later(runtime: Session, result: AskResult, later: GraphLater) -> None:
    """The deferred graph: built, ranked and cached with the evidence (the entry is
    replaced).  The answer is already given, so a failure here is a warning."""
    try:
        triples = _graph_stage(runtime, later.teacher, result, later.sent)
    except DragError as exc:
        result.warnings.append(f"knowledge graph not built after the answer: {exc}")
        return
    spent = result.timings.pop("graph", 0.0) + result.timings.pop("rank_triples", 0.0)
    result.timings["graph_after_answer"] = round(spent, 4)  # not in "total": after it
    account(runtime, later.teacher, result, later.sent, later.items, triples)


def respond(
    runtime: Session,
    result: AskResult,
    *,
    prompt: str | None = None,
    on_text: Callable[[str], None] | None = None,
    choices: Sequence[str] = (),
    gate_setting: Gate | None = None,
) -> AskResult:
    """The student's part: answer with the top K context of ``result.mode`` (fewer where
    ``pipeline.context_tokens`` ends first), in the order ``pipeline.order`` says.

    ``prompt`` replaces the question in the student's prompt (the benchmark adds
    answer-format instructions; the teacher never sees it).  ``choices`` limits the reply
    to one of them (a multiple-choice benchmark's labels).  The gate (``pipeline.gate``,
    or ``gate_setting``) decides whether the context is read: ``result.gate`` says how."""
    student = runtime.student
    p = runtime.settings.pipeline
    result.fitted = None
    evidences = [e.text for e in result.used_evidence]
    relationships = [tr.text for tr in result.used_triples]
    if p.context_tokens:
        evidences, relationships = answer.within_budget(
            evidences, relationships, p.context_tokens, student.count_tokens
        )
        result.fitted = (len(evidences), len(relationships))
    messages = answer.build_messages(
        prompt or result.question, evidences, relationships, result.mode, order=p.order
    )
    s = runtime.settings.student
    result.gate, read, began = {}, None, None
    if evidences or relationships:
        alone = answer.build_messages(prompt or result.question, [], [], "none", order=p.order)
        setting, local = gate_setting or p.gate, runtime.teacher_is_local
        if gate.resolve(setting, local)[0] == "gate":  # it reads the student both ways
            runtime.status("the student weighs the context…")
        with timed(result.timings, "gate"):
            decision = gate.choose(
                student, setting, alone, messages, choices, embedded_teacher=local
            )
        result.gate = decision.to_dict()
        if decision.error:
            result.warnings.append(f"the gate did not run: {decision.error}")
        if decision.way == "alone":
            messages = alone
        if choices and decision.reading is not None:  # the choice as the gate read it
            read = student.as_generation(decision.reading, messages)
        elif decision.reading and s.temperature == 0 and s.max_tokens >= gate.PROBE_TOKENS:
            began = decision.reading  # a free reply the gate began, greedily: written on
    runtime.status("the student is answering…")

    # The student read the real values: a link it writes that carries one is withheld,
    # in the stream as in the answer (a click would send the value).
    def distinctive(word: str) -> bool:
        """As the guard asks (an organisation's word that identifies it); the detector
        is loaded only when a link in the answer makes this a question."""
        judge = getattr(runtime.detector, "distinctive", None)
        return bool(judge is not None and judge(word))

    held = LinkHold(on_text, runtime.vault.values, distinctive) if on_text else None
    with timed(result.timings, "answer"):
        if choices and read is None:  # a choice read the way the gate reads one, where
            with contextlib.suppress(ModelError):  # it can be (else under a grammar)
                read = student.read_choice(messages, choices)
        if read is not None and held is not None:
            held(read.text)
        if read is None and began is not None:
            with contextlib.suppress(ModelError):  # raised before a word is written
                read = student.answer_after(began, messages, max_tokens=s.max_tokens, on_text=held)
        gen = read or student.chat(
            messages,
            max_tokens=s.max_tokens,
            temperature=s.temperature,
            on_text=held,
            choices=choices,
        )
    if held is not None:
        held.flush()
    restored = runtime.vault.restore(gen.text)
    result.answer = withhold_links(restored, runtime.vault.values(), distinctive)
    result.record_student(student, gen, runtime.settings)
    result.timings.pop("total", None)
    result.timings["total"] = round(sum(result.timings.values()), 4)
    return result


def ask(
    runtime: Session,
    question: str,
    *,
    mode: Mode | None = None,
    n: int | None = None,
    k: int | None = None,
    on_text: Callable[[str], None] | None = None,
    review: Review | None = None,
    review_policy: str | None = None,
    progress: Progress | None = None,
) -> AskResult:
    """Answer one question through the whole DRAG pipeline (at most 3 teacher calls).

    ``on_text`` receives the answer as it is written; ``progress(stage, result)`` is told
    ``"context"`` when the context is ready (the result says where it came from, no
    answer yet), ``"answered"`` when the answer is complete, before it is saved, and
    ``"graph"`` when the graph is then built for the cache (``graph_after_answer``).
    """
    tell = progress or _silent
    # Every answer needs the student, and every context the embedder: on a cold start
    # they load while the detector does and the question is checked.
    runtime.preload(
        "student", *(() if (mode or runtime.settings.pipeline.mode) == "none" else ("embedder",))
    )
    gathered, later = _gather(
        runtime,
        question,
        mode=mode,
        n=n,
        k=k,
        review=review,
        review_policy=review_policy,
        reuse="any",
        graph_may_wait=True,
    )
    tell("context", gathered)
    answered = respond(runtime, gathered, on_text=on_text)
    tell("answered", answered)
    if later is not None:
        tell("graph", answered)
        runtime.status("building the knowledge graph for the cache…")
        _graph_later(runtime, answered, later)
    return remember_answer(runtime, answered)
