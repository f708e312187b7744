"""Whether a drag process that noted an upload still runs, as the files it shares show.

A note of the upload journal (:mod:`assistant.store.journal`) names its process by tag
(host, boot, pid namespace, pid and start time: assistant.net.listeners).  On this
machine and in this pid namespace that tells whether it runs.  A process of another
host name or container sharing the database cannot be seen that way: so each process
that notes an upload holds a lock file beside the database (``fcntl.flock``) for as
long as it runs, and the kernel lets go of it when the process ends, however it ends.
A note whose lock file is there and free is a stopped process's; one without a lock
file (an older drag, a file system without locks) is left to its own process, as
before.  Lock files are named by a hash of the tag: nothing personal in a name."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
from pathlib import Path

FOLDER = ".drag-processes"

_held: dict[Path, int] = {}  # this process's lock files, each open while it runs
_guard = threading.Lock()


def folder(database: Path) -> Path:
    return database.parent / FOLDER


def _path(where: Path, tag: str) -> Path:
    return where / f"{hashlib.sha256(tag.encode('utf-8')).hexdigest()[:32]}.lock"


def hold(where: Path, tag: str) -> bool:
    """Take this process's lock file, once, for the rest of its life (before its first
    note).  False where it cannot be had: the note is then left to its own process
    only, as a note of an older drag is."""
    path = _path(where, tag)
    with _guard:
        if path in _held:
            return True
        fd = -1
        try:
            where.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            if fd >= 0:
                os.close(fd)
            return False
        _held[path] = fd
        return True


def released(where: Path, tag: str) -> bool:
    """Whether the process ``tag`` names held its lock file and no longer does (it has
    stopped).  False when it holds it, never had one, or this cannot be told."""
    path = _path(where, tag)
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


def forget(where: Path, tag: str) -> None:
    """Remove a stopped process's lock file once its notes are recorded."""
    with contextlib.suppress(OSError):
        _path(where, tag).unlink()


def let_go(where: Path, tag: str) -> None:
    """This process's lock file, removed and let go (it has no note left)."""
    path = _path(where, tag)
    with _guard:
        fd = _held.pop(path, None)
        if fd is None:
            return
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)
