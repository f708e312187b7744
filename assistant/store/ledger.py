"""The upload ledger: what left the machine, byte for byte, in a hash chain.

Each row holds the exact request body sent, the teacher's raw reply and a
redaction summary (entity types and counts, never values).  A row's hash is
BLAKE2b over the canonical JSON of its fields, which include the hash of its
content and the previous row's hash, so :func:`verify` finds the first row
changed, inserted or removed behind the app's back.

Removing old payloads (``drag audit rm``, ``store.retention_days``) blanks the
request and reply but keeps the row and its content hash: a tombstone, and the
chain still verifies.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlite_utils

from assistant.safetext import escape_controls
from assistant.store.db import transaction

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


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=32).hexdigest()


def content_hash(request: bytes, reply: str | None) -> str:
    return _digest(request) + ":" + _digest((reply or "").encode("utf-8"))


def row_hash(row: Mapping[str, Any]) -> str:
    canonical = json.dumps(
        {name: row[name] for name in HASHED},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return _digest(canonical.encode("utf-8"))


@dataclass(frozen=True)
class Upload:
    """One request that left the machine (what egress.send reports)."""

    endpoint: str
    model: str
    purpose: str
    prompt_version: str
    request: bytes  # the exact body written to the socket
    reply: str | None  # the raw reply text; None when the request failed
    status: str = "ok"  # "ok" | "error"
    error: str | None = None
    redaction: Mapping[str, int] = field(default_factory=dict)  # types and counts only
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    attempts: int = 1


def append(db: sqlite_utils.Database, upload: Upload) -> int:
    """Add a row at the head of the chain; returns its id."""
    with transaction(db):
        last = db.execute("SELECT id, hash FROM uploads ORDER BY id DESC LIMIT 1").fetchone()
        row: dict[str, Any] = {
            "id": (last[0] + 1) if last else 1,
            "created": now(),
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
            "prev_hash": last[1] if last else GENESIS,
        }
        row["hash"] = row_hash(row)
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


def verify(db: sqlite_utils.Database) -> Verdict:
    """Recompute the chain; name the first row that does not match."""
    prev, count, tombstones = GENESIS, 0, 0
    expected_id = 1
    for row in _rows(db):
        count += 1
        rid = int(row["id"])
        if rid != expected_id:
            return Verdict(False, count, tombstones, rid, f"row {expected_id} is missing")
        if row["prev_hash"] != prev:
            return Verdict(False, count, tombstones, rid, "does not follow the previous row")
        if row_hash(row) != row["hash"]:
            return Verdict(False, count, tombstones, rid, "its fields were changed")
        if row["deleted"] is None:
            request = row["request"]
            if not isinstance(request, bytes):
                request = str(request or "").encode("utf-8")
            if content_hash(request, row["reply"]) != row["content_hash"]:
                return Verdict(False, count, tombstones, rid, "its request or reply was changed")
        else:
            tombstones += 1
        prev = row["hash"]
        expected_id += 1
    return Verdict(True, count, tombstones)


def tombstone_older_than(db: sqlite_utils.Database, cutoff: dt.datetime) -> int:
    """Blank the payloads of rows created before ``cutoff``; the chain still verifies."""
    with transaction(db):
        cursor = db.execute(
            "UPDATE uploads SET request = NULL, reply = NULL, deleted = ? "
            "WHERE created < ? AND deleted IS NULL",
            [now(), cutoff.isoformat(timespec="microseconds")],
        )
    return int(cursor.rowcount)


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
    if since is not None:
        clauses.append("created >= ?")
        params.append(since.isoformat(timespec="microseconds"))
    if search:
        clauses.append("(instr(lower(CAST(request AS TEXT)), ?) > 0 OR instr(lower(reply), ?) > 0)")
        params += [search.lower(), search.lower()]
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    rows = list(_rows(db, where, params))
    return rows[-limit:] if limit else rows


def get(db: sqlite_utils.Database, upload_id: int) -> dict[str, Any] | None:
    return next(_rows(db, "WHERE id = ?", [upload_id]), None)
