"""Which process listens on a loopback port, as far as this system shows (Linux's
/proc): drag sends a question only to a server it started or recorded, never to another
local user's process that took the port first."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether process ``pid`` is still there."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _listening_inodes(port: int) -> set[str] | None:
    """The socket inodes listening on 127.0.0.1:``port`` (Linux's /proc/net/tcp), or None
    where this system has no such table."""
    try:
        lines = Path("/proc/net/tcp").read_text("ascii").splitlines()[1:]
    except OSError:
        return None
    want = f"0100007F:{port:04X}"
    inodes = set()
    for line in lines:
        fields = line.split()
        if len(fields) > 9 and fields[1] == want and fields[3] == "0A":  # 0A: LISTEN
            inodes.add(fields[9])
    return inodes


def listens(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` is the one listening on 127.0.0.1:``port``: another local
    user's process that took the port first (issue 30) is not.  None where this cannot
    be seen (no /proc: not Linux); False where it can and it is not."""
    inodes = _listening_inodes(port)
    if inodes is None:
        return None
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


def owns(pid: int, port: int) -> bool:
    """A server at ``port`` that is process ``pid``'s, as far as this system shows."""
    return listens(pid, port) is not False
