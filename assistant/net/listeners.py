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


def _stat(pid: int) -> list[str] | None:
    """Process ``pid``'s /proc stat fields from the state on (field 3), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def cpu_ticks(pid: int) -> int | None:
    """The CPU time process ``pid`` has used, all its threads, user and system, in clock
    ticks; None where /proc does not say."""
    fields = _stat(pid)
    try:
        return int(fields[11]) + int(fields[12]) if fields is not None else None
    except (IndexError, ValueError):
        return None


def gone_or_zombie(pid: int) -> bool:
    """Process ``pid`` has ended (its parent may not have collected it yet)."""
    if not alive(pid):
        return True
    fields = _stat(pid)
    return fields is not None and fields[0] in ("Z", "X")


def _machine() -> str:
    """``HOST|BOOT|PIDNS``: the machine, its boot and the pid namespace this process sees
    pids in (empty where /proc does not show them)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    try:
        pidns = str(Path("/proc/self/ns/pid").readlink())
    except OSError:
        pidns = ""
    return f"{os.uname().nodename}|{boot}|{pidns}"


def process_tag(pid: int | None = None) -> str:
    """``HOST|BOOT|PIDNS|PID:START``: a process, told apart from a later one given the
    same pid (its start time in clock ticks after boot, where /proc shows it), and from
    one of another machine, boot or container sharing the same files."""
    pid = os.getpid() if pid is None else pid
    fields = _stat(pid)
    return f"{_machine()}|{pid}:{fields[19] if fields and len(fields) > 19 else ''}"


def running(tag: str) -> bool:
    """Whether the process :func:`process_tag` named may still be there: one of another
    host or pid namespace may be (it cannot be seen from here); one of an earlier boot,
    a zombie, or a later process with its pid is not."""
    where, _, proc = tag.rpartition("|")
    host, _, rest = where.partition("|")
    boot, _, pidns = rest.partition("|")
    here_host, here_boot, here_ns = _machine().split("|")
    if host != here_host:
        return True
    if boot != here_boot:
        return False
    if pidns != here_ns:
        return True
    pid_text, _, started = proc.partition(":")
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    if pid <= 0 or not alive(pid):
        return False
    fields = _stat(pid)
    if fields is None:  # no /proc: as far as this system shows, it runs
        return True
    if fields[0] in ("Z", "X"):
        return False
    return not started or (len(fields) > 19 and fields[19] == started)


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
