"""The upload ledger: what left the machine, byte for byte, in a hash chain.

Each row holds the exact request body sent, the teacher's raw reply and a
redaction summary (entity types and counts, never values).  A row's hash is
BLAKE2b over the canonical JSON of its fields, which include the hash of its
content and the previous row's hash, so :func:`verify` finds the first row
changed, inserted or removed behind the app's back.

Removing old payloads (``drag audit rm``, ``store.retention_days``) blanks the
request and reply but keeps the row and its content hash: a tombstone, and the
chain still verifies.

A hash chain alone has no secret: whoever can write the database can edit a
row and chain the rest again.  So each row also carries a keyed MAC (BLAKE2b
keyed with a key derived from the store's at-rest key) over every column,
the tombstone's ``deleted`` included, and the database keeps the chain's head
(newest id and hash) under the same MAC: an edited, re-chained, faked-removed
or backdated row, and the quiet removal of the newest rows, fail
:func:`verify` when it is given the key.  ``drag audit head`` prints the head
for the user to note elsewhere; ``drag audit verify --head ID:HASH`` checks
that the ledger still reaches it, which catches even a database rolled back
as a whole.  Rows written before MACs existed get theirs only when the user
says so (``drag audit verify --adopt``, :func:`adopt`), and only where nothing
signed says otherwise: removing MACs is also what a forger would do.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from assistant.base.safetext import escape_controls
from assistant.base.textform import normalise
from assistant.net.upload import Upload
from assistant.store.db import meta, transaction

GENESIS = "0" * 64
# The fields a row's hash covers, in order (not `hash` itself, nor `deleted`).
HASHED = (
    "id",
    "created",
    "endpoint",
    "model",
    "purpose",
    "prompt_version",
    "redaction",
    "status",
    "error",
    "prompt_tokens",
    "completion_tokens",
    "seconds",
    "attempts",
    "content_hash",
    "prev_hash",
)


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def began(seconds: float) -> str:
    """The time ``seconds`` ago (an upload's start, from its measured duration)."""
    ago = dt.timedelta(seconds=max(0.0, seconds)) if math.isfinite(seconds) else dt.timedelta()
    return (dt.datetime.fromisoformat(now()) - ago).isoformat(timespec="microseconds")


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=32).hexdigest()


def content_hash(request: bytes, reply: str | None) -> str:
    return _digest(request) + ":" + _digest((reply or "").encode("utf-8"))


def _noted(row: Mapping[str, Any]) -> dict[str, Any]:
    """The note's MAC of a row written in place of a note of an upload under way
    (assistant.store.journal), under the row's hash and MAC; nothing for a row without
    one (every row from before schema 10 hashes as it did)."""
    note = row.get("note")
    return {} if note is None else {"note": note}


def row_hash(row: Mapping[str, Any]) -> str:
    canonical = json.dumps(
        {**{name: row[name] for name in HASHED}, **_noted(row)},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return _digest(canonical.encode("utf-8"))


def mac(row: Mapping[str, Any], key: bytes) -> str:
    """The row's keyed MAC over every column (the payload through its content hash)."""
    fields = {**{name: row[name] for name in (*HASHED, "hash", "deleted")}, **_noted(row)}
    canonical = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(canonical.encode("utf-8"), key=key, digest_size=32).hexdigest()


def _head_mac(row_id: int, row_hash_: str, key: bytes) -> str:
    message = f"ledger head {row_id} {row_hash_}".encode()
    return hashlib.blake2b(message, key=key, digest_size=32).hexdigest()


def _set_head(db: sqlite_utils.Database, row_id: int, row_hash_: str, key: bytes) -> None:
    value = json.dumps({"id": row_id, "hash": row_hash_, "mac": _head_mac(row_id, row_hash_, key)})
    db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('ledger_head', ?)", [value])


def head(db: sqlite_utils.Database) -> dict[str, Any]:
    """The newest row's id and hash (0 and the genesis hash for an empty ledger)."""
    last = db.execute("SELECT id, hash FROM uploads ORDER BY id DESC LIMIT 1").fetchone()
    return {"id": last[0] if last else 0, "hash": last[1] if last else GENESIS}


def head_holds(db: sqlite_utils.Database, key: bytes) -> bool:
    """Whether the recorded head (under the MAC) names the newest row: nothing is added
    to a ledger whose newest rows may have been removed (:func:`verify` says so)."""
    last = head(db)
    if meta(db, "ledger_head") is None:
        return bool(last["id"] == 0)
    return _head(db, key) == (last["id"], last["hash"])


def append(
    db: sqlite_utils.Database,
    upload: Upload,
    key: bytes | None = None,
    *,
    begun: int | None = None,
    created: str | None = None,
) -> int:
    """Add a row at the head of the chain; returns its id.  ``key``: the ledger's MAC key
    (the app always gives it; without it the row has a chain hash only).  ``begun``: the
    upload's note (assistant.store.journal), removed with this write; its MAC is kept in
    the row, so that a copy of it put back is never recorded again.  ``created``: the
    row's time; by default when the request left, its ``seconds`` ago (the reply's time
    is ``created`` + ``seconds``), as this process measured them: nothing in the database
    sets it (a note's time could be written there without the key)."""
    with transaction(db):
        note = None
        if begun is not None:
            kept = db.execute("SELECT mac FROM upload_journal WHERE id = ?", [begun]).fetchone()
            note = kept[0] if kept else None
            db.execute("DELETE FROM upload_journal WHERE id = ?", [begun])
        last = head(db)
        # A head record that no longer names the newest row (rows removed) is left as it
        # is, so that verify goes on saying so; a ledger without one (empty, or written
        # before MACs) gets one.
        moves_head = key is not None and (
            meta(db, "ledger_head") is None or _head(db, key) == (last["id"], last["hash"])
        )
        row: dict[str, Any] = {
            "id": last["id"] + 1,
            "created": created or began(upload.seconds),
            "endpoint": upload.endpoint,
            "model": upload.model,
            "purpose": upload.purpose,
            "prompt_version": upload.prompt_version,
            "redaction": json.dumps(dict(sorted(upload.redaction.items()))),
            "status": upload.status,
            "error": upload.error,
            "prompt_tokens": int(upload.prompt_tokens),
            "completion_tokens": int(upload.completion_tokens),
            "seconds": round(float(upload.seconds), 4),
            "attempts": int(upload.attempts),
            "content_hash": content_hash(upload.request, upload.reply),
            "prev_hash": last["hash"],
        }
        if note is not None:
            row["note"] = note
        row["hash"] = row_hash(row)
        if key is not None:
            row["mac"] = mac({**row, "deleted": None}, key)
            if moves_head:
                _set_head(db, row["id"], row["hash"], key)
        row["request"] = upload.request
        row["reply"] = upload.reply
        names = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        db.execute(f"INSERT INTO uploads ({names}) VALUES ({marks})", list(row.values()))
    return int(row["id"])


@dataclass(frozen=True)
class Verdict:
    ok: bool
    rows: int
    tombstones: int
    bad_id: int | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "rows": self.rows,
            "tombstones": self.tombstones,
            "bad_id": self.bad_id,
            "reason": self.reason,
        }


def _rows(db: sqlite_utils.Database, where: str = "", params: Any = ()) -> Iterator[dict[str, Any]]:
    cursor = db.execute(f"SELECT * FROM uploads {where} ORDER BY id", params)
    names = [d[0] for d in cursor.description]
    for values in cursor:
        yield dict(zip(names, values, strict=True))


def _newest_named(db: sqlite_utils.Database) -> int:
    """The newest upload id the question history names (0 for none): a store whose
    questions went to the teacher once had those uploads, even with no head record."""
    if "questions" not in db.table_names():
        return 0
    row = db.execute(
        "SELECT max(CAST(value AS INTEGER)) FROM questions, json_each(questions.uploads) "
        "WHERE json_valid(questions.uploads)"
    ).fetchone()
    return int(row[0] or 0)


def _head(db: sqlite_utils.Database, key: bytes) -> tuple[int, str] | None:
    """The recorded head (id, hash) when its MAC holds, else None."""
    try:
        h = json.loads(meta(db, "ledger_head") or "")
        head_id, head_hash = int(h["id"]), str(h["hash"])
        good = h["mac"] == _head_mac(head_id, head_hash, key)
    except (ValueError, KeyError, TypeError):
        return None
    return (head_id, head_hash) if good else None


NO_MAC = (
    "it has no MAC: written by a drag from before the ledger had MACs (then "
    "`drag audit verify --adopt` signs it, if you know the database was not changed since), "
    "or its MAC was removed"
)


def verify(
    db: sqlite_utils.Database, key: bytes | None = None, *, noted: str | None = None
) -> Verdict:
    """Recompute the chain; name the first row that does not match.  With ``key``, each
    row's MAC and the recorded head are checked too; ``noted`` ("ID:HASH", from
    ``drag audit head``) must still be a row of the chain."""
    prev, count, tombstones = GENESIS, 0, 0
    expected_id = 1
    recorded = _head(db, key) if key is not None else None
    hash_at_head: str | None = None
    noted_id, _, noted_hash = (noted or "").partition(":")
    if noted is not None and not (noted_id.isdigit() and noted_hash):
        return Verdict(False, 0, 0, None, f"--head {noted!r} is not ID:HASH")
    for row in _rows(db):
        count += 1
        rid = int(row["id"])
        if rid != expected_id:
            return Verdict(False, count, tombstones, rid, f"row {expected_id} is missing")
        if row["prev_hash"] != prev:
            return Verdict(False, count, tombstones, rid, "does not follow the previous row")
        if row_hash(row) != row["hash"]:
            return Verdict(False, count, tombstones, rid, "its fields were changed")
        if recorded is not None and rid == recorded[0]:
            hash_at_head = row["hash"]
        if key is not None and row["mac"] is None:
            return Verdict(False, count, tombstones, rid, NO_MAC)
        if key is not None and row["mac"] != mac(row, key):
            return Verdict(False, count, tombstones, rid, "its MAC does not match the store key")
        if noted is not None and rid == int(noted_id) and row["hash"] != noted_hash:
            return Verdict(False, count, tombstones, rid, "it is not the row you noted")
        if row["deleted"] is None:
            request = row["request"]
            if not isinstance(request, bytes):
                request = str(request or "").encode("utf-8")
            if content_hash(request, row["reply"]) != row["content_hash"]:
                return Verdict(False, count, tombstones, rid, "its request or reply was changed")
        elif row["request"] is not None or row["reply"] is not None:
            # A removed payload is gone: bytes written into a blanked row are a forgery
            # that would be shown as sent (its content hash cannot tell, it is kept).
            return Verdict(
                False, count, tombstones, rid, "its payload was removed, yet it holds one"
            )
        else:
            tombstones += 1
        prev = row["hash"]
        expected_id += 1
    last_id = expected_id - 1
    if noted is not None and int(noted_id) > last_id:
        return Verdict(False, count, tombstones, None, f"the row you noted (#{noted_id}) is gone")
    named = _newest_named(db)
    if named > last_id:
        return Verdict(
            False,
            count,
            tombstones,
            None,
            f"your history names upload #{named}, and the ledger ends at #{last_id}: "
            "its newest rows were removed",
        )
    if key is not None and (last_id or meta(db, "ledger_head") is not None):
        # Whenever a head is recorded it is checked, an empty ledger's too: removing every
        # row leaves the head naming the newest one.
        if recorded is None:
            return Verdict(False, count, tombstones, None, "the ledger's head record was changed")
        head_id, head_hash = recorded
        if head_id > last_id:
            return Verdict(
                False,
                count,
                tombstones,
                None,
                f"the newest rows were removed: the ledger reached #{head_id}, now "
                + (f"#{last_id}" if last_id else "it is empty"),
            )
        if hash_at_head != head_hash:
            return Verdict(
                False,
                count,
                tombstones,
                head_id,
                "it is not the row the head record names (the rows were chained again)",
            )
    return Verdict(True, count, tombstones)


class _Refused(Exception):
    """Adoption refused: its transaction is rolled back."""


def adopt(db: sqlite_utils.Database, key: bytes) -> tuple[int, str | None]:
    """Sign the rows written before MACs existed, and record the head; returns how many
    were signed and, when none was, why.  Only rows that can be those: the first rows of
    a chain that verifies, each without a MAC, followed only by rows whose MACs hold and
    whose head record holds (a drag that wrote a signed row recorded the head).  Never
    automatic: removing MACs is also what a forger without the key would do.  After
    signing, the whole ledger must verify with the key, or nothing is kept."""
    try:
        with transaction(db):
            chain = verify(db)
            if not chain.ok:
                raise _Refused(f"upload #{chain.bad_id}: {chain.reason}")
            listed = db.execute("SELECT id, mac FROM uploads ORDER BY id")
            rows = [(int(r[0]), r[1]) for r in listed]
            unsigned = [rid for rid, m in rows if m is None]
            if not unsigned:
                return 0, None
            if unsigned != [rid for rid, _m in rows[: len(unsigned)]]:
                raise _Refused(
                    "rows without a MAC follow signed rows: they were not written before "
                    "the ledger had MACs"
                )
            signed_after = len(unsigned) < len(rows)
            if signed_after and _head(db, key) is None:
                raise _Refused("the ledger's head record is missing or was changed")
            if not signed_after and meta(db, "ledger_head") is not None:
                # A head is recorded only with signed rows: these had MACs once.
                raise _Refused("the ledger's head record shows these rows were signed once")
            for row in list(_rows(db, "WHERE mac IS NULL")):
                db.execute("UPDATE uploads SET mac = ? WHERE id = ?", [mac(row, key), row["id"]])
            if not signed_after:
                last = head(db)
                _set_head(db, last["id"], last["hash"], key)
            after = verify(db, key)
            if not after.ok:
                where = f"upload #{after.bad_id}: " if after.bad_id else ""
                raise _Refused(where + after.reason)
    except _Refused as exc:
        return 0, str(exc)
    return len(unsigned), None


def tombstone_older_than(
    db: sqlite_utils.Database, cutoff: dt.datetime, key: bytes | None = None
) -> int:
    """Blank the payloads of rows created before ``cutoff``; the chain still verifies.
    With ``key`` (the app always gives it), only rows whose MAC holds are blanked, each
    then MAC'd anew: a row edited or backdated without the key keeps its payload and
    its broken MAC for :func:`verify` to name, and is never signed here."""
    with transaction(db):
        stamp = now()
        rows = list(
            _rows(
                db,
                "WHERE created < ? AND deleted IS NULL",
                [cutoff.isoformat(timespec="microseconds")],
            )
        )
        if key is not None:
            rows = [r for r in rows if r["mac"] == mac(r, key)]
        for row in rows:
            row["deleted"] = stamp
            db.execute(
                "UPDATE uploads SET request = NULL, reply = NULL, deleted = ?, mac = ? "
                "WHERE id = ?",
                [stamp, mac(row, key) if key is not None else row["mac"], row["id"]],
            )
    return len(rows)


def summary(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row without its payload, for lists."""
    request = row.get("request")
    return {
        "id": row["id"],
        "created": row["created"],
        "endpoint": row["endpoint"],
        "model": row["model"],
        "purpose": row["purpose"],
        "prompt_version": row["prompt_version"],
        "status": row["status"],
        "bytes": len(request) if request is not None else None,
        "redaction": json.loads(row["redaction"]),
        "prompt_tokens": row["prompt_tokens"],
        "completion_tokens": row["completion_tokens"],
        "seconds": row["seconds"],
        "deleted": row["deleted"],
    }


def detail(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row with its payload decoded for display (the bytes are UTF-8 JSON)."""
    request = row.get("request")
    return {
        **summary(row),
        "error": row["error"],
        "attempts": row["attempts"],
        "request": request.decode("utf-8", "replace") if isinstance(request, bytes) else None,
        "reply": row["reply"],
        "content_hash": row["content_hash"],
        "prev_hash": row["prev_hash"],
        "hash": row["hash"],
        **_noted(row),  # under the hash too: an exported row can be hashed again
    }


def jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    """Rows (:func:`detail`) as JSON lines, controls escaped (the export format)."""
    return "".join(escape_controls(json.dumps(r, ensure_ascii=False)) + "\n" for r in rows)


def select(
    db: sqlite_utils.Database,
    *,
    since: dt.datetime | None = None,
    search: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    clauses, params = [], []
    if since is not None:  # compared as text, as stored: in UTC (not "+05:00")
        clauses.append("created >= ?")
        params.append(since.astimezone(dt.UTC).isoformat(timespec="microseconds"))
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    rows = list(_rows(db, where, params))
    if search:  # in Python: SQLite's lower() folds ASCII only ("Ádám" would never match)
        needle = normalise(search)
        rows = [r for r in rows if needle in normalise(_searchable(r))]
    return rows[-limit:] if limit else rows


def _searchable(row: Mapping[str, Any]) -> str:
    request = row.get("request")
    if isinstance(request, bytes):
        request = request.decode("utf-8", "replace")
    text = f"{request or ''}\n{row.get('reply') or ''}"
    if "\\u" in text:  # the body is JSON: non-ASCII may be written as \u escapes
        with contextlib.suppress(ValueError):
            text += "\n" + json.dumps(json.loads(request or "null"), ensure_ascii=False)
    return text


def get(db: sqlite_utils.Database, upload_id: int) -> dict[str, Any] | None:
    return next(_rows(db, "WHERE id = ?", [upload_id]), None)
