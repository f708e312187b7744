"""The local store: one SQLite database for the ledger, the cache and the history.

:class:`Store` is what the pipeline, the CLI and the TUI use; the modules
below it hold one concern each: ``db`` (file, WAL, schema upgrades),
``ledger`` (the hash-chained upload record), ``cache`` (the teacher's
evidence and graph), ``index`` (vector search over the cache) and
``sealing`` (encryption at rest).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import sqlite_utils

from assistant.base import paths
from assistant.base.errors import DragError, StoreError
from assistant.net import listeners
from assistant.net.upload import Upload
from assistant.store import cache, db, journal, ledger, lifelock
from assistant.store.index import SpaceIndex
from assistant.store.sealing import KeyRefused, KeyStorage, Sealer, load_key


class Store:
    def __init__(self, path: Path | None = None, *, key: KeyStorage = "auto") -> None:
        self.path = path or db.default_path()
        self.db = db.open_database(self.path)
        self._key_storage = key
        self._sealer: Sealer | None = None
        self.key_where = ""
        self.key_id = ""
        self._indexes: dict[str, SpaceIndex] = {}
        self._holds = False  # this process's lock file (lifelock), taken at its first note

    @classmethod
    def configured(cls, database: str, key: KeyStorage = "auto") -> Store:
        """The store the settings name (``store.database``: empty for the default file;
        ``store.key``): the one way the app, the CLI and the drafts open it, so that
        every part seals with the one key this database records."""
        return cls(paths.expand(database) if database else None, key=key)

    def close(self) -> None:
        if self._holds:  # no note of this process left: its lock file goes too
            tag = listeners.process_tag()
            with contextlib.suppress(sqlite3.Error):
                if tag not in journal.owners(self.db):
                    lifelock.let_go(self.path, tag)
                    self._holds = False
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- encryption at rest ---------------------------------------------------------------

    @property
    def sealer(self) -> Sealer:
        """The at-rest key, checked against the one this database was sealed with.

        The database records the key's id (a check value) and its source; once it has
        one, a key is only looked up, never made, so an unavailable keyring is an error
        rather than a second key."""
        if self._sealer is None:
            meta = dict(self.db.execute("SELECT key, value FROM meta").fetchall())
            sealed = meta.get("key_check")
            source = meta.get("key_source", "keyring or key file")
            try:
                info = load_key(self._key_storage, create=sealed is None)
            except KeyRefused:  # found, and not used: its message says what to do
                raise
            except StoreError as exc:
                if sealed is None:
                    raise
                raise StoreError(
                    f"this database was sealed with the store key from the {source} "
                    f"(key id {sealed[:8]}), which cannot be used now: {exc}"
                ) from None
            sealer = Sealer(info.key)
            with db.transaction(self.db):
                if sealed is None:
                    self.db.execute(
                        "INSERT INTO meta (key, value) VALUES ('key_check', ?), ('key_source', ?)",
                        [sealer.check, info.source],
                    )
                elif sealed != sealer.check:
                    raise StoreError(
                        f"the store key ({info.where}) is not the key this database was "
                        f"sealed with (key id {sealed[:8]}, from the {source}); restore the "
                        f"right key, or move {self.path} away to start a new database"
                    )
            self._sealer, self.key_where = sealer, info.where
            self.key_id = sealer.check[:8]
        return self._sealer

    # -- ledger ---------------------------------------------------------------------------

    def begin_upload(self, upload: Upload) -> int:
        """Note an upload before it leaves (:mod:`assistant.store.journal`); returns the
        note's id."""
        tag = listeners.process_tag()
        if not self._holds:
            self._holds = lifelock.hold(self.path, tag)
        return journal.begin(self.db, upload, tag, self.sealer.mac_key)

    def record_upload(self, upload: Upload, begun: int | None = None) -> int:
        """The upload's ledger row (replacing its note ``begun``, if one was made); then
        the notes a stopped drag left, as far as they can be recorded now."""
        row = ledger.append(self.db, upload, self.sealer.mac_key, begun=begun)
        with contextlib.suppress(DragError, sqlite3.Error):  # verify names what is left
            self.settle_uploads()
        return row

    def settle_uploads(self) -> int:
        """Record the uploads that a stopped drag process left noted, not recorded
        (:func:`journal.settle`); the key and a write lock are taken only when some
        note's process is gone."""
        # The lock files of processes killed with no note left go first.
        lifelock.sweep(self.path, lambda: journal.owners(self.db))
        gone = {tag for tag in journal.owners(self.db) if not self._running(tag)}
        if not gone:
            return 0
        # A process found gone stays gone; one that notes meanwhile runs.
        settled = journal.settle(self.db, self.sealer.mac_key, lambda tag: tag not in gone)
        for tag in gone - journal.owners(self.db):  # all its notes recorded
            lifelock.forget(self.path, tag)
        return settled

    def _running(self, tag: str) -> bool:
        """Whether the process that left a note may still run: as this system shows it
        (assistant.net.listeners), and by its lock file beside the database, which
        tells for a process of another host name or container too."""
        return listeners.running(tag) and not lifelock.released(self.path, tag)

    def adopt_ledger(self) -> tuple[int, str | None]:
        """Sign the uploads written before the ledger had MACs (only on the user's word:
        rows without a MAC may also be a forgery whose MACs were removed); returns how
        many were signed and, when none was, why (:func:`ledger.adopt`)."""
        return ledger.adopt(self.db, self.sealer.mac_key)

    def verify_ledger(self, noted: str | None = None) -> ledger.Verdict:
        """The chain, each row's MAC and the recorded head (see assistant.store.ledger),
        then the notes of uploads under way (assistant.store.journal): those a stopped
        drag left are recorded, only onto a ledger that verifies."""
        key = self.sealer.mac_key
        verdict = ledger.verify(self.db, key, noted=noted)
        if not verdict.ok:
            return verdict
        if self.settle_uploads():
            verdict = ledger.verify(self.db, key, noted=noted)
        wrong = (
            (journal.replayed, "is a copy of one already recorded in the ledger: it was "
             "not recorded again"),
            (lambda db: journal.forged(db, key), "was not written by drag: its MAC does not "
             "match the store key"),
        )  # fmt: skip
        for notes, why in wrong:
            found = notes(self.db)
            if verdict.ok and found:
                reason = f"the note of an upload under way (#{found[0]}) {why}"
                return ledger.Verdict(False, verdict.rows, verdict.tombstones, None, reason)
        return verdict

    def remove_payloads(self, cutoff: dt.datetime) -> int:
        """Blank ledger payloads older than ``cutoff``, each tombstone MAC'd anew; returns
        rows blanked."""
        return ledger.tombstone_older_than(self.db, cutoff, self.sealer.mac_key)

    def apply_retention(self, days: int) -> int:
        """Blank ledger payloads older than ``days`` (0 = keep all); returns rows blanked."""
        if days <= 0:
            return 0
        return self.remove_payloads(dt.datetime.now(dt.UTC) - dt.timedelta(days=days))

    # -- cache ----------------------------------------------------------------------------

    def index(self, space: str) -> SpaceIndex:
        if space not in self._indexes:
            self._indexes[space] = SpaceIndex(space)
        return self._indexes[space]

    def forget_indexes(self) -> None:
        """Drop what is held in memory of the cache: its embeddings were made again."""
        self._indexes.clear()

    def put_cache(
        self, entry: cache.NewEntry, guard: Callable[[sqlite_utils.Database], None] | None = None
    ) -> int:
        """``guard`` runs inside the write's transaction and stops it by raising."""
        return cache.put(self.db, entry, guard)

    # -- history (sealed) -----------------------------------------------------------------

    def new_conversation(self, title: str = "") -> int:
        stamp = ledger.now()
        sealed = self.sealer.seal(title, "conversations.title")
        with db.transaction(self.db):
            cursor = self.db.execute(
                "INSERT INTO conversations (created, updated, title) VALUES (?, ?, ?)",
                [stamp, stamp, sealed],
            )
        return int(cursor.lastrowid or 0)

    def save_vault(self, conversation_id: int, vault: dict[str, Any]) -> None:
        self.update_vault(conversation_id, lambda _stored: vault)

    def update_vault(
        self,
        conversation_id: int,
        merge: Callable[[dict[str, Any] | None], dict[str, Any]],
    ) -> None:
        """Write ``merge(the stored vault)`` in one write transaction: a conversation
        another process (a second window, ``drag serve``) wrote to meanwhile keeps its
        placeholders, never only the last writer's."""
        with db.transaction(self.db):
            stored = self.load_vault(conversation_id)
            text = json.dumps(merge(stored), ensure_ascii=False)
            self.db.execute(
                "UPDATE conversations SET vault = ?, updated = ? WHERE id = ?",
                [self.sealer.seal(text, "conversations.vault"), ledger.now(), conversation_id],
            )

    def load_vault(self, conversation_id: int) -> dict[str, Any] | None:
        row = self.db.execute(
            "SELECT vault FROM conversations WHERE id = ?", [conversation_id]
        ).fetchone()
        if row is None or row[0] is None:
            return None
        text = self.sealer.open(row[0], "conversations.vault")
        return json.loads(text) if text else None

    def save_question(
        self,
        *,
        conversation_id: int | None,
        original: str,
        sanitized: str | None,
        answer: str | None,
        mode: str,
        source: str,
        entry_id: int | None,
        uploads: list[int],
        record: dict[str, Any] | None,
    ) -> int:
        seal = self.sealer.seal
        with db.transaction(self.db):
            cursor = self.db.execute(
                "INSERT INTO questions (conversation_id, created, original, sanitized, answer, "
                "mode, source, entry_id, uploads, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    conversation_id,
                    ledger.now(),
                    seal(original, "questions.original"),
                    sanitized,
                    seal(answer, "questions.answer") if answer is not None else None,
                    mode,
                    source,
                    entry_id,
                    json.dumps(uploads),
                    seal(json.dumps(record, ensure_ascii=False), "questions.record")
                    if record is not None
                    else None,
                ],
            )
            if conversation_id is not None:
                self.db.execute(
                    "UPDATE conversations SET updated = ? WHERE id = ?",
                    [ledger.now(), conversation_id],
                )
        return int(cursor.lastrowid or 0)

    def conversations(self, search: str = "") -> list[dict[str, Any]]:
        """Newest first, titles opened; ``search`` matches titles and questions (in memory,
        since both are sealed)."""
        rows = self.db.execute(
            "SELECT c.id, c.created, c.updated, c.title, count(q.id) FROM conversations c "
            "LEFT JOIN questions q ON q.conversation_id = c.id GROUP BY c.id "
            "ORDER BY c.updated DESC, c.id DESC"
        ).fetchall()
        out = [
            {
                "id": r[0],
                "created": r[1],
                "updated": r[2],
                "title": self.sealer.open(r[3], "conversations.title") or "",
                "questions": r[4],
            }
            for r in rows
        ]
        if not search:
            return out
        needle = search.casefold()
        hits = {
            q["conversation_id"]
            for q in self.questions()
            if needle in (q["question"] or "").casefold()
            or needle in (q["answer"] or "").casefold()
        }
        return [c for c in out if c["id"] in hits or needle in c["title"].casefold()]

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        sealed = self.sealer.seal(title, "conversations.title")
        with db.transaction(self.db):
            self.db.execute(
                "UPDATE conversations SET title = ? WHERE id = ?", [sealed, conversation_id]
            )

    def delete_conversation(self, conversation_id: int) -> None:
        """The conversation, its questions and its vault (the ledger keeps its uploads)."""
        with db.transaction(self.db):
            self.db.execute("DELETE FROM conversations WHERE id = ?", [conversation_id])

    def forget_passages(self, paths: Sequence[str]) -> int:
        """After files are forgotten: every answer from the files that read a passage of
        one of ``paths`` loses those passages, their paths and the answer made from them
        (the question stays); returns how many records changed."""
        gone = set(paths)
        if not gone:
            return 0
        removed = "(removed: this answer was read from a file you forgot)"
        changed = 0
        with db.transaction(self.db):
            rows = self.db.execute(
                "SELECT id, record FROM questions WHERE source = 'files' AND record IS NOT NULL"
            ).fetchall()
            for qid, sealed in rows:
                record = json.loads(self.sealer.open(sealed, "questions.record") or "{}")
                passages = record.get("passages") or []
                kept = [p for p in passages if p.get("path") not in gone]
                if len(kept) == len(passages):
                    continue
                record.update(passages=kept, answer=removed)
                provenance = record.get("provenance")
                if isinstance(provenance, dict):  # the check of that answer, its words too
                    provenance.pop("support", None)
                self.db.execute(
                    "UPDATE questions SET record = ?, answer = ? WHERE id = ?",
                    [
                        self.sealer.seal(
                            json.dumps(record, ensure_ascii=False), "questions.record"
                        ),
                        self.sealer.seal(removed, "questions.answer"),
                        qid,
                    ],
                )
                changed += 1
        return changed

    def questions(self, conversation_id: int | None = None) -> list[dict[str, Any]]:
        where, params = (
            ("WHERE conversation_id = ?", [conversation_id])
            if conversation_id
            else (
                "",
                [],
            )
        )
        rows = self.db.execute(
            "SELECT id, conversation_id, created, original, sanitized, answer, mode, source, "
            f"entry_id, uploads FROM questions {where} ORDER BY id",
            params,
        ).fetchall()
        opened = self.sealer.open
        return [
            {
                "id": r[0],
                "conversation_id": r[1],
                "created": r[2],
                "question": opened(r[3], "questions.original"),
                "sanitized": r[4],
                "answer": opened(r[5], "questions.answer"),
                "mode": r[6],
                "source": r[7],
                "entry_id": r[8],
                "uploads": json.loads(r[9]),
            }
            for r in rows
        ]


__all__ = ["Store", "StoreError", "cache", "db", "ledger"]
