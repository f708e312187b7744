"""What a question leaves behind: the teacher's work in the cache (placeholder form
only), with the uploads it came from, and the question and its answer in the history
(sealed).  :mod:`assistant.core.pipeline` and :mod:`assistant.core.localfiles` call it
once a question is answered."""

from __future__ import annotations

from dataclasses import asdict

from assistant.base.errors import DragError
from assistant.core.results import AskResult
from assistant.core.session import TEACHER_PROMPTS, Session
from assistant.drag import evidence, graph
from assistant.models.teacher import Teacher
from assistant.store import cache


def account(
    runtime: Session,
    teacher: Teacher,
    result: AskResult,
    sent: str,
    items: list[evidence.Evidence],
    triples: list[graph.Triple] | None,
) -> None:
    """The teacher's calls into the result, and its work into the cache."""
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
            runtime, result, sent, [(e.text, e.teacher_rank) for e in items], triples, uploads
        )
    result.provenance = {
        "uploads": [c.upload_id for c in calls if c.upload_id is not None],
        "entry_id": entry_id,
    }


def _remember(
    runtime: Session,
    result: AskResult,
    sent: str,
    items: list[tuple[str, int]],
    triples: list[graph.Triple] | None,
    uploads: dict[str, int | None],
) -> int | None:
    """Cache what the teacher said for this question (placeholder form only)."""
    if runtime.cache_off(result.warnings):  # another embedder's store: not mixed
        return None
    embed = runtime.embedder.embed
    names = sorted({name for t in triples or [] for name in (t.entity1, t.entity2)})
    entry = cache.NewEntry(
        space=runtime.cache_space,
        question=sent,
        teacher_model=runtime.teacher_identity,
        prompt_versions=dict(TEACHER_PROMPTS),
        n=result.n,
        embedding=embed([sent])[0],
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
        extract_upload=uploads.get("triples") if uploads.get("merge") else None,
        has_graph=triples is not None,
    )
    try:
        return runtime.store.put_cache(entry, runtime.embeddings_unchanged())
    except DragError as exc:
        result.warnings.append(f"not cached: {exc}")
        return None


def remember_answer(runtime: Session, result: AskResult) -> AskResult:
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
        runtime.keep_vault()
        result.conversation_id = runtime.conversation_id
    except DragError as exc:  # the answer is shown all the same
        result.warnings.append(f"not saved to the history: {exc}")
    return result
