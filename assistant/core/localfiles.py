"""The user's own files: index them, list them, forget them, answer from them.

The CLI (``drag index``, ``drag ask --files``) and the app call these.  Nothing here
contacts the teacher: a question answered from the files is never sent, and the
ledger gets no entry.  What the index holds is sealed (:mod:`assistant.store.files`);
the names it learns make the detector stricter (:meth:`Session.personal_names`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

from assistant.base import paths
from assistant.base.config import FilesMethod
from assistant.base.errors import ConfigError, InputError
from assistant.core.keeping import remember_answer
from assistant.core.pipeline import validate_question
from assistant.core.results import AskResult, ScoredPassage, cut_short, student_record, timed
from assistant.core.session import Session
from assistant.drag import answer, filescut, filesindex, filessupport
from assistant.files import readers
from assistant.privacy.entities import (
    EntityReader,
    learnt_as_written,
    lower_words,
    name_parts,
    personal,
)
from assistant.privacy.guard import LinkHold, withhold_links
from assistant.store import Store
from assistant.store import files as stored

__all__ = ["ask_files", "forget", "index", "search", "sources"]

MAX_K = 20  # as files.k allows


def index(
    runtime: Session, paths: Iterable[Path], progress: filesindex.Progress | None = None
) -> filesindex.Report:
    """Add files and folders to the index (a changed file is indexed anew, an unchanged
    one is not read twice).  The work runs on a connection of its own to the store, so
    that a question asked meanwhile (the app) is answered: SQLite lets one write at a
    time, and each file is one short write."""
    runtime.check_files_embeddings()
    s = runtime.settings.store
    with Store.configured(s.database, s.key) as own:
        report = filesindex.index(
            own,
            runtime.embedder,
            runtime.entity_reader,
            paths,
            progress=progress,
            check=runtime.check_files_embeddings,
            guard=runtime.embeddings_unchanged(),
        )
        if report.added or report.replaced or report.removed:
            _relearn(own, runtime.entity_reader)
    return report


def _learnt_values(runtime: Session) -> list[tuple[str, str]]:
    """The names the files taught, as the guard's protected values (people as PERSON)."""
    learnt = runtime.learnt()
    people = set(learnt.people)
    return [("PERSON" if n in people else "NAME", n) for n in learnt.names]


def _relearn(store: Store, reader: EntityReader) -> None:
    """The names the detector learns from the files, worked out again and kept sealed
    (the next question's detector picks them up: :meth:`Session.refresh_learnt`);
    ``reader``'s word lists say which words no learnt name is made of alone, and which
    names count only as a name is written."""
    db, sealer = store.db, store.sealer
    words, stop = reader.everyday_words(), reader.stop_words()
    common = lower_words(stored.chunk_texts(db, sealer))
    found = stored.personal_names(db, sealer)
    names = personal([(name, sender) for name, sender, _person in found], common, words, stop)
    people = personal(
        [(name, sender) for name, sender, person in found if person], common, words, stop
    )
    # Each word of a person's name is a name too ("marta" for Marta Nowicka).
    parts, cased = name_parts(people, words, stop)
    people += [p for p in parts if p not in people]
    names += [p for p in parts if p not in names]
    written = learnt_as_written(names, words)
    written += [c for c in cased if c not in written]
    stored.save_learnt(db, sealer, stored.Learnt(tuple(names), tuple(people), tuple(written)))


def sources(runtime: Session) -> list[stored.Source]:
    with runtime.local:
        if not stored.count(runtime.store.db):
            return []
        return stored.sources(runtime.store.db, runtime.store.sealer)


def forget(runtime: Session, path: Path) -> list[str]:
    """Remove ``path`` (a file, or every file under a folder) from the index, and its
    passages from the answers in the history that read them."""
    target = readers.absolute(path)
    with runtime.local:
        store = runtime.store
        if not stored.count(store.db):
            return []
        listed = [s.path for s in stored.sources(store.db, store.sealer)]
        for where in (target, target.resolve()):
            indexed = [p for p in listed if stored.under(p, where)]
            if indexed:
                break
        else:
            return []
        # The history first: should it fail, the file is still indexed, and the next
        # --forget tries again.  Nothing of a forgotten file stays: the answers read
        # from it lose its passages too.
        store.forget_passages(indexed)
        gone = stored.forget(store.db, store.sealer, where)
        _relearn(store, runtime.entity_reader)
    return gone


def search(
    runtime: Session, question: str, *, k: int | None = None, method: FilesMethod | None = None
) -> list[ScoredPassage]:
    """The passages of the user's files that best answer ``question``, best first."""
    f = runtime.settings.files
    runtime.check_files_embeddings()  # before the index is read, and again after
    found = runtime.files_index()
    if found.empty:
        return []
    runtime.check_files_embeddings()
    embedder = runtime.embedder
    q_vec = embedder.embed([question])[0]
    how = method or f.method
    named = next(iter(runtime.entity_reader.read([question]))) if how == "minirag" else []
    hits, _on_paths = found.search(question, q_vec, embedder, k or f.k, method=how, named=named)
    return [
        ScoredPassage(
            i,
            h.text,
            h.path,
            h.time,
            h.page,
            round(h.score, 5),
            round(h.cosine, 4),
            round(h.graph, 4),
        )
        for i, h in enumerate(hits, start=1)
    ]


def ask_files(
    runtime: Session,
    question: str,
    *,
    k: int | None = None,
    method: FilesMethod | None = None,
    read_tokens: int | None = None,
    on_text: Callable[[str], None] | None = None,
    remember: bool = True,
    headings: Literal["path", "name"] = "name",
    draft: bool = False,
) -> AskResult:
    """Answer ``question`` from the user's indexed files alone; nothing is sent.
    ``k``, ``method`` and ``read_tokens`` stand for the settings' ``files.*`` keys.
    ``headings``: each passage headed in the student's prompt by its file's name and
    time or page (the product's), or by its whole path, as before (issue 51, to measure
    them side by side: ``drag bench local-docs --headings name,path``).  ``draft``: the
    answer, greedy, is decoded by drafting from the passages it copies, or a token at a
    time (the product's: drafting saved nothing, ``drag bench local-docs --decoding``)."""
    question = validate_question(question, runtime.settings.pipeline.max_question_chars)
    if k is not None and not 1 <= k <= MAX_K:
        raise InputError(f"K for your files must be 1 to {MAX_K}, not {k}")
    if read_tokens is not None and read_tokens < 0:
        raise InputError(f"the tokens of your files to read must be 0 or more, not {read_tokens}")
    with runtime.local:
        if not stored.count(runtime.store.db):
            raise ConfigError("no files are indexed yet: add some with drag index PATH")
    runtime.preload("student", "embedder")
    f = runtime.settings.files
    result = AskResult(question=question, mode="evidence", n=0, k=k or f.k, source="files")
    result.prompt_versions = {
        "answer": answer.FILES_PROMPT_VERSION
        if headings == "name"
        else answer.FILES_PROMPT_VERSION_PATHS
    }
    runtime.status("looking in your files…")
    with timed(result.timings, "files_search"):
        result.passages = search(runtime, question, k=result.k, method=method)
    result.provenance = {"uploads": [], "method": method or f.method}
    runtime.status("the student is answering…")
    s = runtime.settings.student
    read = f.read_tokens if read_tokens is None else read_tokens
    weight = runtime.files_index().weight  # how much a word of the files weighs
    if read:
        # The messages that carry the question's words, within the budget: the student
        # reads less, and the part that answers (:mod:`filescut`).
        with timed(result.timings, "cut"):
            cuts = filescut.cut(
                question,
                [p.text for p in result.passages],
                weight,
                runtime.student.count_tokens,
                read,
            )
        result.passages = [
            replace(result.passages[c.index], rank=n, text=c.text)
            for n, c in enumerate(cuts, start=1)
        ]
        result.prompt_versions["cut"] = filescut.CUT_VERSION
    # The passages that fit the student's window with its reply, best first.
    budget = s.n_ctx - s.max_tokens - 64
    while True:
        messages = answer.build_files_messages(
            question,
            [(p.label if headings == "path" else p.heading, p.text) for p in result.passages],
        )
        used = runtime.student.count_tokens("\n".join(m["content"] for m in messages))
        if used <= budget or not result.passages:
            break
        result.passages.pop()
    if not result.passages:
        raise ConfigError(
            f"not one passage of your files fits the student's window (student.n_ctx "
            f"{s.n_ctx}, of which student.max_tokens {s.max_tokens} for the reply): "
            "raise student.n_ctx or lower student.max_tokens"
        )
    # The student read the files: a link it writes that carries a name they taught is
    # withheld, in the stream as in the answer (an indexed e-mail could ask for one, and
    # a click would send the name).  With the check on, the answer is shown once it is
    # borne out by the passages (or "Your files do not say." in its place), not streamed.
    # While it is written, ``on_text`` then gets empty pieces: a caller that stops on its
    # own (the app closed, Ctrl+C) stops the student there, as when it streams.
    protected = _learnt_values(runtime)
    streamed = on_text if not f.abstain else None
    held = LinkHold(streamed, lambda: protected, source="your files") if streamed else None
    pieces: Callable[[str], None] | None = held
    if on_text is not None and f.abstain:
        pieces = lambda _piece: on_text("")  # noqa: E731
    with timed(result.timings, "head"):
        head = keep_head(runtime)
    with timed(result.timings, "answer"):
        gen = runtime.student.chat(
            messages,
            max_tokens=s.max_tokens,
            temperature=s.temperature,
            on_text=pieces,
            logprobs=f.abstain,
            draft=draft,
        )
    if held is not None:
        held.flush()
    result.answer = withhold_links(gen.text.strip(), protected, source="your files")
    result.student = {**student_record(runtime.student, gen), "head": head}
    if f.abstain:
        _check(result, weight, gen.token_logprobs)
        if on_text is not None:
            on_text(result.answer)
    cut = cut_short(gen, runtime.settings)
    if cut is not None and result.answer != answer.NOT_IN_FILES:
        result.warnings.append(cut)
    result.timings["total"] = round(sum(result.timings.values()), 4)
    return remember_answer(runtime, result) if remember else result


def keep_head(runtime: Session) -> str:
    """Have the student hold read the files answer's fixed head (its rules): read once
    on this machine, its state kept in the cache folder; a new process (``drag ask
    --files``), or one whose student read another prompt since, loads it instead of
    reading it before the question's own tokens.  Only a speed-up: where it fails, the
    head is read with the question, as before."""
    return runtime.student.keep_head(
        answer.files_head(), answer.FILES_HEAD_MARK, paths.prefix_states(), "files"
    )


def _check(result: AskResult, weight: Callable[[str], float], logprobs: Sequence[float]) -> None:
    """Whether the passages read bear the answer out (:mod:`filessupport`); where they do
    not, the reply is "Your files do not say." and the student's answer is kept in the
    record, with what the check found."""
    result.prompt_versions["support"] = filessupport.CHECK_VERSION
    with timed(result.timings, "support"):
        support = filessupport.check(
            result.question,
            result.answer,
            [(p.text, p.time) for p in result.passages],
            weight,
            logprobs,
        )
    result.provenance["support"] = support.to_dict()
    if support.not_in_files and result.answer != answer.NOT_IN_FILES:
        result.provenance["support"]["unsupported"] = result.answer
        result.answer = answer.NOT_IN_FILES
