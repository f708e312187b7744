"""Whether a drag process that noted an upload still runs, as the files it shares show.

A note of the upload journal (:mod:`assistant.store.journal`) names its process by tag
(host, boot, pid namespace, pid and start time: assistant.net.listeners).  On this
machine and in this pid namespace that tells whether it runs.  A process of another
host name or container sharing the database cannot be seen that way: so each process
that notes an upload holds a lock file beside the database (``fcntl.flock``) for as
long as it runs, and the kernel lets go of it when the process ends, however it ends.
A note whose lock file is there and free is a stopped process's; one without a lock
file (an older drag, a file system without locks) is left to its own process, as
before.  Lock files are named by a hash of the database's name and the tag, and hold a
hash of the database's name: nothing personal in either.  A process killed after its
last note was recorded leaves its lock file behind: the next settling removes it
(:func:`sweep`)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

FOLDER = ".drag-processes"

# This process's lock files, each open while it runs: [fd, how many stores hold it].
_held: dict[Path, list[int]] = {}
_guard = threading.Lock()


def folder(database: Path) -> Path:
    return database.parent / FOLDER


def _owner(database: Path) -> bytes:
    """What a lock file of ``database`` holds (several databases may share a folder)."""
    return hashlib.sha256(f"drag-lock|{database.name}".encode()).hexdigest()[:32].encode()


def _path(database: Path, tag: str) -> Path:
    name = hashlib.sha256(f"{database.name}|{tag}".encode()).hexdigest()[:32]
    return folder(database) / f"{name}.lock"


def hold(database: Path, tag: str) -> bool:
    """Take this process's lock file for ``database``, for as long as a store of it
    holds it (before its first note); the file appears already locked (made under
    another name, locked, then moved into place).  False where it cannot be had: the
    note is then left to its own process only, as a note of an older drag is."""
    path = _path(database, tag)
    with _guard:
        if path in _held:
            _held[path][1] += 1
            return True
        part = path.with_name(f".{secrets.token_hex(8)}.part")
        fd = -1
        try:
            path.parent.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(fd, _owner(database))
            part.replace(path)
        except OSError:
            with contextlib.suppress(OSError):
                part.unlink()
            if fd >= 0:
                os.close(fd)
            return False
        _held[path] = [fd, 1]
        return True


def released(database: Path, tag: str) -> bool:
    """Whether the process ``tag`` names held its lock file and no longer does (it has
    stopped).  False when it holds it, never had one, or this cannot be told."""
    path = _path(database, tag)
    if path in _held:
        return False
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: the process runs
            return False
        try:  # still the file the process held, not one removed meanwhile
            return os.fstat(fd).st_ino == path.stat().st_ino
        except OSError:
            return False
    finally:
        os.close(fd)


def forget(database: Path, tag: str) -> None:
    """Remove a stopped process's lock file once its notes are recorded."""
    with contextlib.suppress(OSError):
        _path(database, tag).unlink()


def let_go(database: Path, tag: str) -> None:
    """One store of this process no longer holds the lock file; the last one removes
    it and lets go."""
    path = _path(database, tag)
    with _guard:
        held = _held.get(path)
        if held is None:
            return
        held[1] -= 1
        if held[1] > 0:
            return
        del _held[path]
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(held[0])


def sweep(database: Path, noted: Callable[[], Iterable[str]]) -> int:
    """Remove the lock files of ``database`` that no process holds and whose process
    left no note (``noted()``: the tags with notes, read again once a file is locked: a
    process may note and die meanwhile): those of processes killed after their last
    note was recorded, and a piece of one killed before it was put in place.  A held
    file (its process runs), a stopped process's with notes (still to be settled) and a
    file of another database or of an older drag are kept; a file is read before it is
    locked, so that one being made (not yet locked, nothing in it) is never locked here.
    Returns how many went."""
    try:
        found = [p for p in folder(database).iterdir() if p.suffix in (".lock", ".part")]
    except OSError:
        return 0
    with _guard:
        ours = {path.name for path in _held}
    gone = 0
    for path in found:
        if path.name in ours:
            continue
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if os.read(fd, 64) != _owner(database):
                continue  # another database's, an older drag's, or one being made
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if path.name in {_path(database, tag).name for tag in noted()}:
                continue  # its notes are still to be settled (by its lock: released)
            if os.fstat(fd).st_ino != path.stat().st_ino:
                continue  # removed and made again meanwhile
            path.unlink()
            gone += 1
        except OSError:  # held (its process runs), or gone meanwhile
            continue
        finally:
            os.close(fd)
    return gone
