"""Who may use `drag serve`: named client tokens, and where a running server says it is.

The tokens are kept readable by the owner only (0600) in the data folder, as the local
teacher's key is; a client presents one as its API key (``Authorization: Bearer``), and
its name goes into the upload ledger with every request it sends on."""

from __future__ import annotations

import contextlib
import fcntl
import hmac
import json
import os
import re
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from assistant.base import paths
from assistant.base.errors import InputError, StoreError
from assistant.net import listeners

DEFAULT = "default"
# drag's own CLI (drag ask through the server): a key never printed, so that a program
# given a client key cannot use the CLI's route (which may skip the review: --yes).
CLI = "_cli"
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


def token_file() -> Path:
    return paths.data_dir() / "serve-tokens.json"


def state_file() -> Path:
    return paths.state_dir() / "serve.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise StoreError(f"{path} is not a JSON object; remove it to start afresh")
    return data


def _replace(path: Path, text: str) -> None:
    """Written whole (0600), then put in place: a reader meanwhile sees the old file or
    the new one, never half of one."""
    paths.private_dir(path.parent)
    fd, part = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        Path(part).replace(path)
    except BaseException:
        Path(part).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _changing() -> Iterator[None]:
    """One process at a time changes the token file (a token printed is never lost to
    another process's write)."""
    lock = token_file().with_name(token_file().name + ".lock")
    paths.private_dir(lock.parent)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _held() -> dict[str, str]:
    return {k: v for k, v in _read(token_file()).items() if isinstance(v, str) and v}


def tokens() -> dict[str, str]:
    """Every client's token by name; the default client's is made on first use."""
    held = _held()
    if DEFAULT in held:
        return held
    return {**held, DEFAULT: _token(DEFAULT)}


def token_for(name: str) -> str:
    """The token of client ``name``, made if it has none (`drag serve --token NAME`)."""
    if not NAME.fullmatch(name):
        raise InputError(
            "a client name is 1-32 lower-case letters, digits, '-' or '_', starting with "
            "a letter or digit"
        )
    return _token(name)


def cli_token() -> str:
    """The key of drag's own CLI (:data:`CLI`)."""
    return _token(CLI)


def _token(name: str) -> str:
    with _changing():
        held = _held()
        if name not in held:
            held[name] = secrets.token_urlsafe(32)
            _replace(token_file(), json.dumps(held, indent=1))
    return held[name]


def client_of(header: str | None, held: dict[str, str]) -> str | None:
    """The client an ``Authorization`` header names (``Bearer <token>``), or None."""
    scheme, _, value = (header or "").strip().partition(" ")
    presented = value.strip().encode()
    if scheme.lower() != "bearer" or not presented:
        return None
    found = None
    for name, token in held.items():  # every token compared, in constant time each
        if hmac.compare_digest(presented, token.encode()):
            found = name
    return found


def record_state(url: str, loaded: list[str], settings: str = "") -> None:
    """Where this server listens, which models it holds now (`drag serve --status`) and
    which settings it runs with (wire.settings_key: the app asks it only when its own
    are the same)."""
    state = {"pid": os.getpid(), "url": url, "loaded": loaded, "settings": settings}
    _replace(state_file(), json.dumps(state))


def forget_state() -> None:
    state = _read(state_file()) if state_file().exists() else {}
    if state.get("pid") == os.getpid():
        state_file().unlink(missing_ok=True)


def recorded() -> dict[str, Any] | None:
    """The running server's record ({"pid", "url", "loaded", "settings"}), or None; a record whose
    process is gone, or no longer holds its port, is None too."""
    try:
        state = _read(state_file())
    except StoreError:
        return None
    pid, url = state.get("pid"), state.get("url")
    if not isinstance(pid, int) or not isinstance(url, str) or not 0 < pid < 2**31:
        return None  # (0 and -1 would ask the process group, every process)
    try:
        os.kill(pid, 0)
        port = urlsplit(url).port  # a port past 65535, a broken address: no server
    except (ProcessLookupError, PermissionError, ValueError):  # gone; another user's
        return None
    # A port that another process holds now (the server died, its port was taken) is
    # never sent a key or a question.
    if port is None or not listeners.owns(pid, port):
        return None
    loaded = state.get("loaded")
    return {
        "pid": pid,
        "url": url,
        "loaded": loaded if isinstance(loaded, list) else [],
        "settings": str(state.get("settings") or ""),
    }
