"""Uploads under way: a note made before a request's bytes reach the socket.

The ledger (:mod:`assistant.store.ledger`) records an upload once its reply, or its
failure, is known.  A drag killed in between (SIGKILL, a crash) would leave a request
that may have reached the teacher with no row.  So :func:`begin` notes it first (its
exact bytes, where it went, which process sends it), durably, and the row that
:func:`ledger.append` writes removes the note in the same transaction.  If the note
cannot be written, nothing is sent (assistant.net.egress).

:func:`settle` turns the notes of processes that are gone into ledger rows with no reply,
at the time they were noted.  Each note carries a keyed MAC (the ledger's key), so a note
written behind drag's back is never signed into the ledger; a note that became a row
leaves its MAC in that row, under the row's hash and MAC, so that a copy of it put back is
never recorded twice (removing that needs a row changed, which verify finds); and nothing
is settled onto a ledger whose head record does not hold (:func:`ledger.verify` names what
is wrong).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from collections.abc import Callable
from typing import Any

import sqlite_utils

from assistant.net.upload import Upload
from assistant.store import ledger
from assistant.store.db import transaction

STOPPED = (
    "no reply was recorded: the drag process that sent it (process {pid}) stopped before "
    "writing its row (killed, crashed, or its ledger could not be written); the request "
    "may have reached the teacher"
)
_COLUMNS = (
    "id",
    "created",
    "owner",
    "endpoint",
    "model",
    "purpose",
    "prompt_version",
    "redaction",
    "request",
)


def _mac(note: dict[str, Any], key: bytes) -> str:
    """The note's keyed MAC; "" for a note whose fields no note of drag's can hold."""
    request = note["request"]
    if not isinstance(request, bytes):
        request = str(request).encode("utf-8")
    fields = {name: note[name] for name in _COLUMNS if name != "request"}
    fields["request"] = hashlib.blake2b(request, digest_size=32).hexdigest()
    try:
        canonical = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):  # bytes where text belongs: not written by drag
        return ""
    message = b"upload note " + canonical.encode("utf-8")
    return hashlib.blake2b(message, key=key, digest_size=32).hexdigest()


def begin(db: sqlite_utils.Database, upload: Upload, owner: str, key: bytes) -> int:
    """Note an upload about to leave; returns the note's id (``owner``: the sending
    process's tag, assistant.net.listeners.process_tag).  Written with a full sync: the
    note must outlast a crash that the request's bytes outlast."""
    if db.conn.in_transaction:  # the note must be committed before the bytes leave
        raise RuntimeError("an upload is noted outside any other transaction")
    db.execute("PRAGMA synchronous = FULL")
    try:
        with transaction(db):
            note: dict[str, Any] = {
                "created": ledger.now(),
                "owner": owner,
                "endpoint": upload.endpoint,
                "model": upload.model,
                "purpose": upload.purpose,
                "prompt_version": upload.prompt_version,
                "redaction": json.dumps(dict(sorted(upload.redaction.items()))),
                "request": upload.request,
            }
            names = ", ".join(note)
            cursor = db.execute(
                f"INSERT INTO upload_journal ({names}) VALUES ({', '.join('?' * len(note))})",
                list(note.values()),
            )
            note["id"] = int(cursor.lastrowid or 0)
            db.execute(
                "UPDATE upload_journal SET mac = ? WHERE id = ?", [_mac(note, key), note["id"]]
            )
    finally:  # (inside a transaction left open by a failed commit it cannot change)
        with contextlib.suppress(sqlite3.Error):
            db.execute("PRAGMA synchronous = NORMAL")
    return int(note["id"])


def _notes(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    cursor = db.execute(f"SELECT {', '.join(_COLUMNS)}, mac FROM upload_journal ORDER BY id")
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, values, strict=True)) for values in cursor]


def owners(db: sqlite_utils.Database) -> set[str]:
    """The processes (tags) that notes are left by."""
    return {str(owner) for (owner,) in db.execute("SELECT owner FROM upload_journal")}


def _upload(note: dict[str, Any]) -> Upload:
    """The ledger row's upload for a note (ValueError, TypeError: not one drag wrote)."""
    redaction = json.loads(note["redaction"])
    if not isinstance(redaction, dict) or not isinstance(note["request"], bytes):
        raise ValueError("not a note drag writes")
    pid = str(note["owner"]).rpartition("|")[2].partition(":")[0]
    return Upload(
        endpoint=str(note["endpoint"]),
        model=str(note["model"]),
        purpose=str(note["purpose"]),
        prompt_version=str(note["prompt_version"]),
        request=note["request"],
        reply=None,
        status="error",
        error=STOPPED.format(pid=pid),
        redaction={str(k): int(v) for k, v in redaction.items()},
    )


def replayed(db: sqlite_utils.Database) -> list[int]:
    """The notes that are copies of notes already recorded as ledger rows (their MAC
    holds, as the original's did): never recorded twice.  A row keeps its note's MAC
    under its hash (schema 10); ``spent_notes`` holds those recorded before."""
    cursor = db.execute(
        "SELECT id FROM upload_journal WHERE mac IN (SELECT note FROM uploads) "
        "OR mac IN (SELECT mac FROM spent_notes) ORDER BY id"
    )
    return [int(row[0]) for row in cursor]


def forged(db: sqlite_utils.Database, key: bytes) -> list[int]:
    """The notes whose MAC does not hold: not written by drag with this store's key."""
    return [n["id"] for n in _notes(db) if not n["mac"] or n["mac"] != _mac(n, key)]


def settle(db: sqlite_utils.Database, key: bytes, running: Callable[[str], bool]) -> int:
    """Record as ledger rows the notes of processes that are gone: each as sent, with no
    reply, at the time it was noted.  A note whose MAC does not hold is left (for
    verify to name), and nothing is settled onto a ledger whose recorded head is not its
    newest row.  Returns how many rows were written."""
    with transaction(db):
        if not ledger.head_holds(db, key):
            return 0
        settled = 0
        copies = set(replayed(db))
        for note in _notes(db):
            if running(str(note["owner"])) or not note["mac"] or note["mac"] != _mac(note, key):
                continue
            if note["id"] in copies:  # left for verify to name
                continue
            try:
                upload = _upload(note)
            except (ValueError, TypeError):
                continue
            ledger.append(db, upload, key, begun=int(note["id"]), created=str(note["created"]))
            settled += 1
    return settled
