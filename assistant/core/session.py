"""The loaded parts of the assistant, for a series of questions.

:class:`Session` owns the student, the embedder, the detector, the vault of
placeholders, the teacher (and the embedded teacher server) and the store,
loading each only when a stage of :mod:`assistant.core.pipeline` needs it.
"""

from __future__ import annotations

import contextlib
import contextvars
import sqlite3
import threading
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

from assistant.base import paths, secrets
from assistant.base.config import Settings
from assistant.base.errors import ConfigError, DragError, Interrupted, PrivacyError, StoreError
from assistant.core import drafts
from assistant.drag import answer, evidence, graph
from assistant.drag.graphsearch import GraphIndex
from assistant.drag.ranking import Embedder
from assistant.models import localserver, modelfiles
from assistant.models.embedder import load as load_embedder
from assistant.models.student import Student
from assistant.models.teacher import Teacher
from assistant.net.upload import Upload
from assistant.privacy.detector import Detector
from assistant.privacy.entities import EntityReader
from assistant.privacy.findings import Scanner
from assistant.privacy.generalise import Generaliser
from assistant.privacy.guard import EgressGuard
from assistant.privacy.placeholders import Vault
from assistant.privacy.policy import category_modes, load_policy
from assistant.privacy.reader import HEAD_MARK, Reading, SpanReader
from assistant.privacy.reader import head as reader_head
from assistant.privacy.sanitize import Sanitized, sanitize
from assistant.store import Store, cache, space
from assistant.store import files as stored_files
from assistant.store.index import DIM

Status = Callable[[str], None]  # a line saying what is being done now


def _quiet(_message: str) -> None:
    pass


T = TypeVar("T")


class _Part(Generic[T]):
    """A part of the :class:`Session` (the student, the embedder, the detector): loaded
    once, on first use or ahead of it (:meth:`Session.preload`).  A use while another
    thread loads it waits for that load instead of starting a second one."""

    def __init__(self, load: Callable[[Session], T]) -> None:
        self.load = load
        self.__doc__ = load.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, runtime: None, owner: type) -> _Part[T]: ...
    @overload
    def __get__(self, runtime: Session, owner: type) -> T: ...
    def __get__(self, runtime: Session | None, owner: type) -> _Part[T] | T:
        if runtime is None:
            return self
        with runtime._lock_for(self.name):
            if self.name not in runtime.__dict__:
                runtime.__dict__[self.name] = self.load(runtime)
        value: T = runtime.__dict__[self.name]
        return value


class Session:
    """Lazily loaded parts for a series of questions; close() stops what it started."""

    def __init__(self, settings: Settings, *, status: Status = _quiet) -> None:
        self.settings = settings
        self.status = status
        self._stack = contextlib.ExitStack()
        # Held for local work (detection, vault, ranking, the store) but not while the
        # teacher is asked: several questions can wait on the teacher at once.
        self.local = threading.RLock()
        self._part_locks: dict[str, Any] = {}
        self._part_locks_lock = threading.Lock()
        self._loaders: list[threading.Thread] = []
        # Asked just before an upload leaves (drag serve: whether its client is still
        # there); False: nothing is sent.
        self.wanted: Callable[[], bool] | None = None

    def _lock_for(self, part: str) -> Any:
        with self._part_locks_lock:
            return self._part_locks.setdefault(part, threading.RLock())

    def preload(self, *parts: str) -> None:
        """Start loading ``parts`` ("student", "embedder", "detector") in threads of their
        own, so that a cold start loads them side by side: llama.cpp reads the student
        while Presidio and spaCy load.  A stage that needs one waits for it.  A failure
        there is not reported: the stage's own use loads the part again and fails as
        usual, with its message."""
        for part in parts:
            if part in self.__dict__ or not isinstance(getattr(type(self), part), _Part):
                continue
            loader = threading.Thread(
                target=self._load_quietly, args=(part,), name=f"drag-load-{part}", daemon=True
            )
            self._loaders.append(loader)
            loader.start()

    def _load_quietly(self, part: str) -> None:
        with contextlib.suppress(Exception):
            getattr(self, part)

    def _record_upload(self, upload: Upload, begun: int | None = None) -> int:
        with self.local:
            return self.store.record_upload(upload, begun)

    def _note_upload(self, upload: Upload) -> int:
        if self.wanted is not None and not self.wanted():
            raise Interrupted("the client went away before anything was sent")
        with self.local:
            return self.store.begin_upload(upload)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for loader in self._loaders:  # a part still loading is closed with the others
            loader.join()
        student = self.__dict__.pop("student", None)
        if student is not None:
            student.close()
        store = self.__dict__.pop("store", None)
        if store is not None:
            store.close()
        self._stack.close()

    @cached_property
    def store(self) -> Store:
        """The local database: ledger, cache, history.  Opening it changes nothing."""
        s = self.settings.store
        return Store.configured(s.database, s.key)

    def tidy(self) -> None:
        """Apply the keeping settings, once, where a user's session starts (the app,
        ``drag ask``, ``drag chat``): the ledger's payloads older than
        ``store.retention_days`` are blanked, drafts older than ``store.draft_days`` are
        removed.  Nothing else (``drag doctor``, the benchmarks, opening the store) does."""
        s = self.settings.store
        try:
            with self.local:
                self.store.apply_retention(s.retention_days)
        except sqlite3.Error as exc:  # locked by another drag process past its timeout
            raise StoreError(f"old ledger payloads could not be blanked: {exc}") from None
        try:
            drafts.purge(s.draft_days)
        except (OSError, ValueError) as exc:  # a draft that cannot be read
            raise StoreError(f"old drafts could not be removed: {exc}") from None

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
        return cache.space_of(self.teacher_identity, TEACHER_PROMPTS)

    @cached_property
    def student_path(self) -> Path:
        path, _spec = modelfiles.resolve(self.settings.student.model, self.status)
        return path

    @_Part
    def student(self) -> Student:
        s = self.settings.student
        path = self.student_path
        self.status(f"loading the student model {path.name}…")
        return Student(path, n_ctx=s.n_ctx, gpu=s.gpu, threads=s.threads, status=self.status)

    def prime_student(self) -> None:
        """Have the student read ahead the head of every answer's prompt (the app does,
        while the user types).  Not on a cold start: on two cores it only competes with
        the other parts loading (measured: no sooner first token)."""
        self.student.prime(answer.SYSTEM)

    @_Part
    def embedder(self) -> Embedder:
        self.status("loading the embedding model…")
        e = self.settings.embedder
        loaded = load_embedder(e.model, backend=e.backend, device=e.device)
        here = space.Space.of(e.model, loaded.embed)
        if here.probes.shape[1] != DIM:
            raise ConfigError(
                f"embedder.model {e.model!r} makes embeddings of {here.probes.shape[1]} "
                f"numbers; drag's store keeps {DIM}: choose a model of that size"
            )
        self.__dict__["_embedder_space"] = here
        return loaded

    def embeddings_writer(self, *, keep: bool = True) -> str | None:
        """None when this embedder made the embeddings the store keeps (or the store keeps
        none yet); else the embedder that did (:mod:`assistant.store.space`): a question
        embedded now means nothing beside them until ``drag reembed``.  What this process
        holds in memory of the cache is read again after a ``drag reembed`` elsewhere
        (the files' index is, by its own generation).  ``keep`` False: a store that
        records no embedder is not given this one's record (``drag doctor`` changes
        nothing)."""
        embed, here = self.embedder.embed, self._space_here()
        with self.local:
            store = self.store
            held = self.__dict__.get("_space_verdict")
            if held is not None and held[0] == (key := self._space_key(keep)):
                writer: str | None = held[1]
            else:  # a verdict is kept until the store changes (sampling an older one costs)
                writer = space.writer(
                    store.db, here, embed, lambda: space.samples(store.db, store.sealer), keep=keep
                )
                key = self._space_key(keep)
                self.__dict__["_space_verdict"] = (key, writer)
            if writer is None:
                self.__dict__["_space_checked"] = key[0]
            if key[1] != self.__dict__.setdefault("_space_seen", key[1]):
                store.forget_indexes()
                self.__dict__["_space_seen"] = key[1]
        return writer

    def _space_here(self) -> space.Space:
        """This embedder as the store knows it (made as it loads; here for one given to
        the session, not loaded by it)."""
        here: space.Space | None = self.__dict__.get("_embedder_space")
        if here is None:
            here = space.Space.of(self.settings.embedder.model, self.embedder.embed)
            self.__dict__["_embedder_space"] = here
        return here

    def _space_key(self, keep: bool) -> tuple[object, ...]:
        """What a verdict of :meth:`embeddings_writer` holds for: the store's record and
        its generation first, then what an older store's sample would read."""
        db = self.store.db
        newest = db.execute("SELECT max(id) FROM cache_entries").fetchone()[0]
        return (space.raw(db), space.generation(db), stored_files.generation(db), newest, keep)

    def embeddings_unchanged(self) -> Callable[[Any], None]:
        """For a write's own transaction: a StoreError unless the store still records what
        it did when this embedder was last found to have made its embeddings."""
        return lambda db: space.unchanged(self.__dict__.get("_space_checked", False), db)

    def check_files_embeddings(self) -> None:
        """A ConfigError when another embedder made the store's embeddings: the files'
        index is neither searched nor added to (a search would rank nonsense, an
        addition would mix two embedders)."""
        writer = self.embeddings_writer()
        if writer is not None:
            raise ConfigError(space.advice(writer, self.settings.embedder.model, files=True))

    def reembed(self, progress: space.Progress | None = None) -> int:
        """Every embedding the store keeps made again with this embedder (after
        embedder.model changed), and it recorded as the store's; returns how many."""
        embed, here = self.embedder.embed, self._space_here()
        with self.local:
            store = self.store
            try:
                with space.alone(store.path):
                    done = space.reembed(store.db, store.sealer, here, embed, progress)
            except sqlite3.Error as exc:
                raise StoreError(
                    f"the store's embeddings were not all made again ({exc}): run drag "
                    "reembed again"
                ) from None
            store.forget_indexes()
            self.__dict__["_space_seen"] = space.generation(store.db)
        return done

    def cache_off(self, warnings: list[str]) -> bool:
        """Whether another embedder made the cache's embeddings: the cache then recalls
        only a question asked again word for word, ranks what it holds from fresh
        embeddings and keeps nothing new (``drag reembed``); said once in ``warnings``."""
        said = self.cache_by_meaning_off()
        if said is not None and said not in warnings:
            warnings.append(said)
        return said is not None

    def cache_by_meaning_off(self) -> str | None:
        """Why the cache recalls only a question asked again word for word (another
        embedder made its embeddings), or None when it recalls by meaning too."""
        writer = self.embeddings_writer()
        return None if writer is None else space.advice(writer, self.settings.embedder.model)

    @property
    def teacher_is_local(self) -> bool:
        return self.settings.teacher.endpoint.strip().lower() == "local"

    @cached_property
    def teacher_model_path(self) -> Path:
        t = self.settings.teacher
        path, _spec = modelfiles.resolve(t.model or self.settings.student.model, self.status)
        return path

    @_Part
    def detector(self) -> Scanner:
        """Presidio and the policy; with ``files.learn_names``, the names of the people,
        organisations and places the user's indexed files name are personal too (opened
        from the sealed store into memory only; :meth:`refresh_learnt` follows changes)."""
        p = self.settings.privacy
        self.status("loading the personal-data detector…")
        detector = Detector(allow=p.allow, deny=p.deny, categories=category_modes(p.categories))
        generation, learnt = self._learnt()
        detector.learn(learnt.names, people=learnt.people, written=learnt.written)
        self.__dict__["_learnt_generation"] = generation
        return detector

    def _learnt(self) -> tuple[int, stored_files.Learnt]:
        """(the files index's generation, the names it taught); a connection of its own,
        since the detector may load in a thread of its own while another thread holds
        the session's store for local work."""
        s = self.settings.store
        try:
            with Store.configured(s.database, s.key) as own:
                generation = stored_files.generation(own.db)
                if not self.settings.files.learn_names or not stored_files.count(own.db):
                    return generation, stored_files.Learnt()
                return generation, stored_files.learnt(own.db, own.sealer)
        except sqlite3.Error as exc:
            raise StoreError(f"the names learnt from your files cannot be read: {exc}") from None

    def personal_names(self) -> list[str]:
        """The names the user's own files taught (each as written and, for a CamelCase
        name, spaced); none when no file is indexed or ``files.learn_names`` is off."""
        return list(self._learnt()[1].names)

    def learnt(self) -> stored_files.Learnt:
        """The names the user's own files taught, and which of them are people's."""
        return self._learnt()[1]

    def refresh_learnt(self) -> None:
        """Teach the detector (and so the egress guard) what the files index learnt since
        it loaded: another drag process, or this one, may have indexed files meanwhile."""
        detector = self.detector
        learn = getattr(detector, "learn", None)
        if learn is None:
            return
        if stored_files.generation(self.store.db) == self.__dict__.get("_learnt_generation"):
            return
        generation, learnt = self._learnt()
        learn(learnt.names, people=learnt.people, written=learnt.written)
        self.__dict__["_learnt_generation"] = generation

    @_Part
    def entity_reader(self) -> EntityReader:
        self.status("loading the entity reader…")
        return EntityReader()

    def files_index(self) -> GraphIndex:
        """The user's files' index in memory, loaded again when the store changed it."""
        with self.local:
            db = self.store.db
            now = stored_files.generation(db)
            held: tuple[int, GraphIndex] | None = self.__dict__.get("_files_index")
            if held is None or held[0] != now:
                loaded = stored_files.load(db, self.store.sealer, DIM)
                held = self.__dict__["_files_index"] = (now, GraphIndex(loaded))
            return held[1]

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
        """Continue a stored conversation: its placeholders keep their meaning.  One that
        is gone from the history (deleted meanwhile, from another window) goes on as a
        new conversation."""
        dumped = self.store.load_vault(conversation_id)
        if dumped is None:
            self.new_conversation()
            return
        vault = Vault(tag_of=load_policy().tag)
        vault.load(dumped)
        self.__dict__["_vault"] = vault
        self.conversation_id = conversation_id

    def catch_up(self) -> None:
        """Take in the placeholders another writer of this conversation stored since it
        was read (another window, ``drag serve``): a value it protects keeps its
        placeholder here, and a new one gets a number no one has used.  Work with
        placeholders of its own (:meth:`own_placeholders`: the server's requests) is
        given its conversation's by its caller, or none: never caught up here."""
        if self.conversation_id is not None and _own_vault.get() is None:
            with self.local:
                self.vault.merge(self.store.load_vault(self.conversation_id))

    def keep_vault(self) -> None:
        """Store this conversation's placeholders, merged with what was stored meanwhile."""
        conversation, vault = self.conversation_id, self.vault
        if conversation is None:
            return

        def merged(stored: dict[str, Any] | None) -> dict[str, Any]:
            vault.merge(stored)
            return vault.dump()

        with self.local:
            self.store.update_vault(conversation, merged)

    @_Part
    def reader(self) -> SpanReader:
        """The local model as a second reader (privacy.reader): its own llama.cpp context
        of the reader's model (the student's file by default: the weights are mapped
        once, shared), so that answering does not evict the reader's prompt."""
        p = self.settings.privacy
        s = self.settings.student
        if p.reader_model:
            path, _spec = modelfiles.resolve(p.reader_model, self.status)
        else:
            path = self.student_path
        self.status(f"loading the privacy reader {path.name}…")
        model = Student(
            path, n_ctx=2048, gpu=s.gpu, threads=s.threads, status=self.status, lookup=True
        )
        self._stack.callback(model.close)
        # Its rules and examples read once, their state kept in the cache folder: a new
        # process loads them instead of reading them again.
        model.keep_head(reader_head(), HEAD_MARK, paths.prefix_states())
        common = getattr(self.detector, "common", None) or (lambda _word: False)
        return SpanReader(model, common=common, timeout=p.reader_timeout)

    def read(self, question: str) -> Reading | None:
        """The reader's findings in ``question``, where privacy.reader is on and the
        question may be uploaded (never offline).  Fails closed (PrivacyError)."""
        if self.settings.privacy.reader != "on" or self.offline:
            return None
        try:
            reader = self.reader
        except DragError as exc:
            raise PrivacyError(
                "nothing was sent: the local privacy reader could not start "
                "(privacy.reader = off uses the detector alone): "
                f"{exc}"
            ) from None
        self.status("the local model reads the question for personal data…")
        return reader.read(question)

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

    def sanitize(
        self, question: str, read: Reading | None = None, *, rewrite: bool = True
    ) -> Sanitized:
        """``question`` as it may be sent; with ``read`` (:meth:`read`), the reader's
        values replaced too.  ``rewrite=False``: never rewritten by the student (another
        program's messages, which the proxy passes on: their words are theirs)."""
        p = self.settings.privacy
        how = p.rewrite if rewrite else "never"
        self.status("checking the question for personal data…")
        self.refresh_learnt()
        self.catch_up()
        return sanitize(
            question,
            scanner=self.detector,
            vault=self.vault,
            guard=self.guard,
            rewriter=self.rewrite if how != "never" else None,
            rewrite=how,
            generaliser=self.generaliser,
            read=read,
        )

    @cached_property
    def generaliser(self) -> Generaliser:
        return Generaliser.from_policy(load_policy().generalise)

    def _crashed(self, base_url: str) -> str | None:
        """How the local teacher's server died, if it did; then the next question starts
        a new one (its lease on the dead one is let go with the others at close)."""
        report = localserver.crash_report(base_url, "; the next question starts it again")
        if report is not None:
            self.__dict__.pop("teacher", None)
        return report

    @cached_property
    def teacher(self) -> Teacher:
        t = self.settings.teacher
        # The ledger MACs every upload with the store key: a key problem is found now,
        # before anything is sent, not after the teacher has answered.
        _ = self.store.sealer
        if self.teacher_is_local:
            path = self.teacher_model_path
            server = self._stack.enter_context(
                localserver.serving(
                    path,
                    n_ctx=t.n_ctx,
                    keep_alive=t.keep_alive,
                    starting=lambda: self.status(f"starting the local teacher ({path.name})…"),
                )
            )
            return Teacher.from_settings(
                t,
                base_url=server.base_url,
                model=localserver.ALIAS,
                api_key=server.api_key,
                local=True,
                guard=self.guard,
                protected=lambda: self.vault.values(),
                ledger=self._record_upload,
                journal=self._note_upload,
                diagnose=lambda: self._crashed(server.base_url),
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
            journal=self._note_upload,
        )


# The placeholders of the work under way in this thread (Session.own_placeholders).
_own_vault: contextvars.ContextVar[Vault | None] = contextvars.ContextVar(
    "drag_own_vault", default=None
)

TEACHER_PROMPTS = {"evidence": evidence.PROMPT_VERSION, "graph": graph.PROMPT_VERSION}
