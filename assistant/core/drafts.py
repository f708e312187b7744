"""Nothing the user typed is lost: questions that could not be answered are kept, sealed.

A blocked, declined or failed question is exactly the kind that holds personal
data, so it is kept the way the history is: sealed with the store's at-rest key
(AES-256-GCM, :mod:`assistant.store.sealing`), one file per question in
``<data dir>/unsent/`` (folder 0700, files 0600), and removed after
``store.draft_days`` days.  ``drag drafts`` lists, shows and removes them.
Plain-text drafts written by earlier versions are sealed the next time drafts
are purged.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from assistant.base import paths
from assistant.base.errors import (
    LINE_LIMIT,
    DragError,
    InputError,
    Interrupted,
    StoreError,
    one_line,
)
from assistant.store.sealing import Sealer

SUFFIX = ".sealed"
_COLUMN = "drafts"  # the sealed value's associated data


def unsent_dir() -> Path:
    return paths.private_dir(paths.data_dir() / "unsent")


def _sealer() -> Sealer:
    """The store's own key, as the store checks it: a database sealed with a key is
    never given a second one here (a keyring that fails now is an error, not a new
    key file: issue 30)."""
    from assistant.base import config
    from assistant.store import Store

    s = config.load().store
    with Store.configured(s.database, s.key) as store:
        return store.sealer


def _new_file() -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    base = unsent_dir() / f"{stamp}-{os.getpid()}"
    path = base.with_suffix(SUFFIX)
    n = 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}").with_suffix(SUFFIX)
    return path


def _write_sealed(record: dict[str, Any], sealer: Sealer) -> Path:
    path = _new_file()
    blob = sealer.seal(json.dumps(record, ensure_ascii=False), _COLUMN)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(blob)
    return path


def keep(
    question: str | bytes,
    error: str,
    teacher_reply: str | None = None,
    *,
    release_key: str | None = None,
    would_send: str | None = None,
) -> Path:
    """Save a question that was not answered, sealed; returns where it went.  Raises
    StoreError when the store key cannot be had (nothing is written in the clear).

    ``release_key``: a request of another program (`drag serve`) that `drag drafts
    release` can let through once, when that program sends it again (one draft for
    each such request: a program that asks again is not kept twice); ``would_send``:
    what would leave, placeholders in place."""
    if release_key is not None:
        for path, kept in _each(_sealer()):
            if kept.get("release_key") == release_key and not kept.get("released"):
                return path
    record: dict[str, Any] = {
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "error": error,
        "teacher_reply": teacher_reply,
    }
    if release_key is not None:
        record["release_key"] = release_key
    if would_send is not None:
        record["would_send"] = would_send
    if isinstance(question, bytes):  # not valid text: keep the exact bytes
        record["question_base64"] = base64.b64encode(question).decode("ascii")
    else:
        record["question"] = question
    return _write_sealed(record, _sealer())


def kept_error(question: str, exc: BaseException) -> DragError:
    """The error to show for a question that failed, after keeping the question."""
    error = exc if isinstance(exc, DragError) else Interrupted("interrupted")
    if not question.strip():
        return error
    try:
        kept = keep(question, str(error), getattr(error, "reply", None))
    except (StoreError, OSError) as why:
        return type(error)(f"{error} (your question could not be kept: {why})")
    # The message is cut to fit one line, never the name the question is kept under.
    where = f" (your question is kept in drag drafts as {kept.stem})"
    return type(error)(one_line(str(error), LINE_LIMIT - len(where)) + where)


def _path(name: str) -> Path:
    path = unsent_dir() / (Path(name).stem + SUFFIX)
    try:
        there = Path(name).name == name and path.is_file()
    except OSError:  # a name too long for the file system (Python 3.11 raises it)
        there = False
    if not there:
        raise InputError(f"no kept question {name!r}: `drag drafts list` shows them")
    return path


def read(name: str, sealer: Sealer | None = None) -> dict[str, Any]:
    """One kept question, opened."""
    blob = _path(name).read_bytes()
    record = json.loads((sealer or _sealer()).open(blob, _COLUMN) or "{}")
    record["name"] = Path(name).stem
    if "question_base64" in record:  # the exact bytes stay in the record too
        record["question"] = base64.b64decode(record["question_base64"]).decode("utf-8", "replace")
    return dict(record)


def listing() -> list[dict[str, Any]]:
    """Every kept question, oldest first, opened; one that cannot be (damaged) is listed
    by its name and why, so that it can be removed, and the others still are."""
    sealer = _sealer()
    rows: list[dict[str, Any]] = []
    for path in sorted(unsent_dir().glob("*" + SUFFIX)):
        try:
            rows.append(read(path.stem, sealer))
        except InputError:  # removed meanwhile
            continue
        except (DragError, OSError, ValueError) as exc:
            why = f"cannot be opened ({one_line(str(exc), 100)}): drag drafts rm removes it"
            rows.append({"name": path.stem, "damaged": True, "error": why})
    return rows


def remove(name: str) -> None:
    _path(name).unlink()


def remove_all(names: Iterable[str]) -> int:
    """Remove these kept questions, or none: each is found before any goes.  How many
    were removed (two names of one, "a" and its file's "a.sealed", count once)."""
    paths = list(dict.fromkeys(_path(name) for name in names))
    for path in paths:
        path.unlink(missing_ok=True)
    return len(paths)


def release(name: str) -> None:
    """Let the request kept as ``name`` through once: the next time its program sends
    the same messages, they go as its review would send them (placeholders in place)."""
    sealer = _sealer()
    record = read(name, sealer)
    if "release_key" not in record:
        raise InputError(
            f"{name} is a question of yours, not a request of another program: ask it "
            "again with drag ask --review"
        )
    record["released"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    path = _path(name)
    part = path.with_name(path.name + ".part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(sealer.seal(json.dumps(record, ensure_ascii=False), _COLUMN))
    part.replace(path)


def _each(sealer: Sealer) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every draft that can be opened now (one removed meanwhile, or damaged, is not)."""
    folder = paths.data_dir() / "unsent"
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*" + SUFFIX)):
        try:
            yield path, read(path.stem, sealer)
        except (DragError, OSError, ValueError):
            continue


def take_release(key: str) -> bool:
    """Whether a released draft holds the request ``key``; it is removed (a release
    lets the request through once, however many ask at the same moment)."""
    for path, record in _each(_sealer()):
        if record.get("release_key") == key and record.get("released"):
            try:
                path.unlink()
            except FileNotFoundError:  # another request took it first
                continue
            return True
    return False


def purge(days: int) -> int:
    """Seal plain drafts left by earlier versions; remove drafts older than ``days``
    (0 = keep all).  Returns how many were removed."""
    folder = paths.data_dir() / "unsent"
    if not folder.is_dir():
        return 0
    legacy = [p for p in folder.iterdir() if p.suffix in (".json", ".bin")]
    if legacy:
        sealer = _sealer()
        for path in legacy:
            data = path.read_bytes()
            if path.suffix == ".json":
                record = json.loads(data.decode("utf-8", "replace") or "{}")
            else:
                record = {"question_base64": base64.b64encode(data).decode(), "error": ""}
            sealed = _write_sealed(record, sealer)
            stamp = path.stat().st_mtime
            os.utime(sealed, (stamp, stamp))
            path.unlink()
    if days <= 0:
        return 0
    cutoff = time.time() - days * 86400
    removed = 0
    for path in folder.glob("*" + SUFFIX):
        try:  # another drag process may be tidying the same folder
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed
