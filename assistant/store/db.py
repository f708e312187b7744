"""The one SQLite database: opening, permissions, WAL, ordered schema upgrades.

``PRAGMA user_version`` holds the schema version; :data:`MIGRATIONS` are the
upgrade steps in order (step ``i`` takes version ``i`` to ``i + 1``), each run
in its own transaction.  Registering a step::

    @migration
    def m003_history(db: sqlite_utils.Database) -> None: ...

The file is created 0600 and used in WAL mode with a busy timeout, so the TUI
and the CLI can use it at the same time.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import sqlite_utils

from assistant.base import paths
from assistant.base.errors import StoreError

Migration = Callable[[sqlite_utils.Database], None]
MIGRATIONS: list[Migration] = []
migration = MIGRATIONS.append

BUSY_TIMEOUT_MS = 10_000


def default_path() -> Path:
    return paths.data_dir() / "drag.db"


@migration
def m001_ledger(db: sqlite_utils.Database) -> None:
    """The upload ledger: one row per request that left the machine, hash-chained."""
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute(
        """CREATE TABLE uploads (
            id INTEGER PRIMARY KEY,
            created TEXT NOT NULL,
            endpoint TEXT NOT NULL,
            model TEXT NOT NULL,
            purpose TEXT NOT NULL,
            prompt_version TEXT NOT NULL,
            redaction TEXT NOT NULL,
            request BLOB,
            reply TEXT,
            status TEXT NOT NULL,
            error TEXT,
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            seconds REAL NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 1,
            content_hash TEXT NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL,
            deleted TEXT
        )"""
    )
    db.execute("CREATE INDEX uploads_created ON uploads (created)")


@migration
def m002_cache(db: sqlite_utils.Database) -> None:
    """The teacher's evidence and graph, with embeddings, per (model, prompt) space."""
    db.execute(
        """CREATE TABLE cache_entries (
            id INTEGER PRIMARY KEY,
            key TEXT NOT NULL UNIQUE,
            space TEXT NOT NULL,
            question TEXT NOT NULL,
            teacher_model TEXT NOT NULL,
            prompt_versions TEXT NOT NULL,
            n INTEGER NOT NULL,
            created TEXT NOT NULL,
            embedding BLOB NOT NULL,
            has_graph INTEGER NOT NULL DEFAULT 0
        )"""
    )
    db.execute("CREATE INDEX cache_entries_space ON cache_entries (space)")
    db.execute(
        """CREATE TABLE cache_evidence (
            id INTEGER PRIMARY KEY,
            entry_id INTEGER NOT NULL REFERENCES cache_entries(id) ON DELETE CASCADE,
            teacher_rank INTEGER NOT NULL,
            text TEXT NOT NULL,
            embedding BLOB NOT NULL,
            upload_id INTEGER
        )"""
    )
    db.execute("CREATE INDEX cache_evidence_entry ON cache_evidence (entry_id)")
    db.execute(
        """CREATE TABLE cache_entities (
            id INTEGER PRIMARY KEY,
            space TEXT NOT NULL,
            key TEXT NOT NULL,
            name TEXT NOT NULL,
            embedding BLOB NOT NULL,
            UNIQUE (space, key)
        )"""
    )
    db.execute(
        """CREATE TABLE cache_triples (
            id INTEGER PRIMARY KEY,
            entry_id INTEGER NOT NULL REFERENCES cache_entries(id) ON DELETE CASCADE,
            entity1_id INTEGER NOT NULL REFERENCES cache_entities(id),
            entity2_id INTEGER NOT NULL REFERENCES cache_entities(id),
            relation TEXT NOT NULL,
            text TEXT NOT NULL,
            sources TEXT NOT NULL,
            embedding BLOB NOT NULL,
            upload_id INTEGER
        )"""
    )
    db.execute("CREATE INDEX cache_triples_entry ON cache_triples (entry_id)")
    db.execute("CREATE INDEX cache_triples_e1 ON cache_triples (entity1_id)")
    db.execute("CREATE INDEX cache_triples_e2 ON cache_triples (entity2_id)")


@migration
def m003_history(db: sqlite_utils.Database) -> None:
    """Conversations, questions and answers, and each conversation's placeholder vault.

    Originals, answers, titles and vaults are sealed (assistant.store.sealing);
    the sanitized question is stored as sent.
    """
    db.execute(
        """CREATE TABLE conversations (
            id INTEGER PRIMARY KEY,
            created TEXT NOT NULL,
            updated TEXT NOT NULL,
            title BLOB,
            vault BLOB
        )"""
    )
    db.execute(
        """CREATE TABLE questions (
            id INTEGER PRIMARY KEY,
            conversation_id INTEGER REFERENCES conversations(id) ON DELETE CASCADE,
            created TEXT NOT NULL,
            original BLOB NOT NULL,
            sanitized TEXT,
            answer BLOB,
            mode TEXT NOT NULL,
            source TEXT NOT NULL,
            entry_id INTEGER,
            uploads TEXT NOT NULL DEFAULT '[]',
            record BLOB
        )"""
    )
    db.execute("CREATE INDEX questions_conversation ON questions (conversation_id)")


@migration
def m004_ledger_mac(db: sqlite_utils.Database) -> None:
    """A keyed MAC per ledger row (assistant.store.ledger); old rows get theirs when the
    store first opens its key."""
    db.execute("ALTER TABLE uploads ADD COLUMN mac TEXT")


@migration
def m005_triple_extraction_upload(db: sqlite_utils.Database) -> None:
    """A merged triple came from two uploads: the merge (``upload_id``) and the
    extraction it merged (``extract_upload_id``); a cached answer's provenance lists both."""
    db.execute("ALTER TABLE cache_triples ADD COLUMN extract_upload_id INTEGER")


@migration
def m006_files(db: sqlite_utils.Database) -> None:
    """The user's own files (assistant.store.files): sources, chunks, entities and which
    chunk names which entity.  Paths, texts, names and embeddings are sealed; a path, a
    file's content and a name are found again by keyed hash.  Entity-entity edges are
    the co-occurrences within a chunk (a view, so that forgetting a file updates them)."""
    db.execute(
        """CREATE TABLE file_sources (
            id INTEGER PRIMARY KEY,
            path_key TEXT NOT NULL UNIQUE,
            path BLOB NOT NULL,
            content_key TEXT NOT NULL,
            kind TEXT NOT NULL,
            size INTEGER NOT NULL,
            mtime REAL NOT NULL,
            indexed TEXT NOT NULL,
            chunks INTEGER NOT NULL
        )"""
    )
    db.execute(
        """CREATE TABLE file_chunks (
            id INTEGER PRIMARY KEY,
            source_id INTEGER NOT NULL REFERENCES file_sources(id) ON DELETE CASCADE,
            ord INTEGER NOT NULL,
            body BLOB NOT NULL,
            embedding BLOB NOT NULL
        )"""
    )
    db.execute("CREATE INDEX file_chunks_source ON file_chunks (source_id)")
    db.execute(
        """CREATE TABLE file_entities (
            id INTEGER PRIMARY KEY,
            key TEXT NOT NULL UNIQUE,
            type TEXT NOT NULL,
            body BLOB NOT NULL,
            embedding BLOB NOT NULL
        )"""
    )
    db.execute(
        """CREATE TABLE file_mentions (
            chunk_id INTEGER NOT NULL REFERENCES file_chunks(id) ON DELETE CASCADE,
            entity_id INTEGER NOT NULL REFERENCES file_entities(id),
            PRIMARY KEY (chunk_id, entity_id)
        ) WITHOUT ROWID"""
    )
    db.execute("CREATE INDEX file_mentions_entity ON file_mentions (entity_id)")
    db.execute(
        """CREATE VIEW file_edges AS
            SELECT a.entity_id AS entity1, b.entity_id AS entity2, count(*) AS weight
            FROM file_mentions a JOIN file_mentions b
              ON a.chunk_id = b.chunk_id AND a.entity_id < b.entity_id
            GROUP BY a.entity_id, b.entity_id"""
    )


@migration
def m007_upload_journal(db: sqlite_utils.Database) -> None:
    """An upload about to leave, noted before its bytes reach the socket
    (assistant.store.journal); its ledger row replaces it in one transaction, and a
    process killed in between leaves it for :func:`assistant.store.journal.settle`."""
    db.execute(
        """CREATE TABLE upload_journal (
            id INTEGER PRIMARY KEY,
            created TEXT NOT NULL,
            owner TEXT NOT NULL,
            endpoint TEXT NOT NULL,
            model TEXT NOT NULL,
            purpose TEXT NOT NULL,
            prompt_version TEXT NOT NULL,
            redaction TEXT NOT NULL,
            request BLOB NOT NULL
        )"""
    )


@migration
def m008_upload_journal_mac(db: sqlite_utils.Database) -> None:
    """Each note of an upload under way carries a keyed MAC (assistant.store.journal):
    one written behind drag's back is never signed into the ledger."""
    db.execute("ALTER TABLE upload_journal ADD COLUMN mac TEXT")


@migration
def m009_spent_notes(db: sqlite_utils.Database) -> None:
    """The MAC of each note of an upload under way that became a ledger row: a copy of
    one put back into the journal is never recorded twice (assistant.store.journal)."""
    db.execute("CREATE TABLE spent_notes (mac TEXT PRIMARY KEY) WITHOUT ROWID")


@migration
def m010_upload_note(db: sqlite_utils.Database) -> None:
    """A ledger row written in place of a note of an upload under way keeps that note's
    MAC, under the row's hash and MAC (assistant.store.ledger): a copy of the note put
    back is known by the chain itself, not by a table anyone could empty."""
    db.execute("ALTER TABLE uploads ADD COLUMN note TEXT")
    db.execute("CREATE INDEX uploads_note ON uploads (note) WHERE note IS NOT NULL")


SCHEMA_VERSION = len(MIGRATIONS)


def _create_private(path: Path) -> None:
    """Create the file 0600 before SQLite opens it (SQLite would use the umask)."""
    paths.private_dir(path.parent)
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
    if not stat.S_ISREG(path.stat().st_mode):  # a folder or a device named: left as it is
        raise StoreError(f"cannot open the database {path}: it is not a file")
    path.chmod(0o600)


def connect(path: Path) -> sqlite_utils.Database:
    """A connection in autocommit mode (transactions are explicit: :func:`transaction`)."""
    try:
        _create_private(path)
        conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        # What is deleted (a forgotten file, a purged cache, a removed payload) is
        # overwritten with zeros, not left readable in freed pages until a VACUUM.
        conn.execute("PRAGMA secure_delete = ON")
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"cannot open the database {path}: {exc}") from None
    for side in ("-wal", "-shm"):  # created by SQLite with the umask
        with contextlib.suppress(FileNotFoundError):
            path.with_name(path.name + side).chmod(0o600)
    return sqlite_utils.Database(conn)


@contextlib.contextmanager
def transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """BEGIN IMMEDIATE … COMMIT: one writer at a time, all or nothing.

    Inside a transaction already, it joins that one.
    """
    if db.conn.in_transaction:
        yield db
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@contextlib.contextmanager
def reading(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """BEGIN … COMMIT: a read transaction (a snapshot under WAL), no write lock taken.

    Inside a transaction already, it joins that one.
    """
    if db.conn.in_transaction:
        yield db
        return
    db.execute("BEGIN")
    try:
        yield db
    finally:
        db.execute("COMMIT")


def meta(db: sqlite_utils.Database, key: str) -> str | None:
    """The value ``meta`` keeps under ``key`` (None: none)."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
    return None if row is None else str(row[0])


def counter(db: sqlite_utils.Database, key: str) -> int:
    """A count ``meta`` keeps under ``key`` (:func:`count_up`); 0 before the first."""
    return int(meta(db, key) or 0)


def count_up(db: sqlite_utils.Database, key: str) -> None:
    db.execute(
        "INSERT INTO meta (key, value) VALUES (?, '1') "
        "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
        [key],
    )


def version(db: sqlite_utils.Database) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def upgrade(db: sqlite_utils.Database, target: int = SCHEMA_VERSION) -> int:
    """Run the steps from the file's version up to ``target``; returns the new version."""
    current = version(db)
    if current > SCHEMA_VERSION:
        raise StoreError(
            f"the database is schema version {current}, newer than this drag "
            f"({SCHEMA_VERSION}): upgrade drag-assistant"
        )
    for number in range(current, target):
        with transaction(db):
            if version(db) != number:  # another process upgraded meanwhile
                continue
            MIGRATIONS[number](db)
            db.execute(f"PRAGMA user_version = {number + 1}")
    return version(db)


def open_database(path: Path | None = None) -> sqlite_utils.Database:
    db = connect(path or default_path())
    try:
        upgrade(db)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"the database {path or default_path()} is unusable: {exc}") from None
    return db
