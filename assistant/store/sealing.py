"""Encryption at rest for what must stay private: originals, answers, vaults.

AES-256-GCM with a random 96-bit nonce per value; the column's name is the
associated data, so a sealed value cannot be moved to another column.  The
key lives in the system keyring; where there is none (a headless box) it is a
0600 key file next to the data, and `drag doctor` says which.  The database
keeps a check value of the key and which source gave it, so a wrong or lost key
gives a clear error instead of garbage; a keyring that exists but is locked or
failing now is an error too, never a reason to make a second key (history
sealed with one would not open with the other).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from assistant.base import paths
from assistant.base.errors import StoreError
from assistant.base.secrets import no_keyring_here

SERVICE = "drag-assistant"
USERNAME = "store-key"
FORMAT = b"\x01"  # version byte of a sealed value
KeyStorage = Literal["auto", "keyring", "file"]


def key_file() -> Path:
    return paths.data_dir() / "store.key"


def check_value(key: bytes) -> str:
    """Identifies a key without revealing it."""
    return hashlib.blake2b(b"drag-assistant store key check", key=key, digest_size=16).hexdigest()


def _keyring_get() -> bytes | None:
    import keyring

    stored = keyring.get_password(SERVICE, USERNAME)
    return base64.b64decode(stored) if stored else None


def _keyring_set(key: bytes) -> None:
    import keyring

    keyring.set_password(SERVICE, USERNAME, base64.b64encode(key).decode("ascii"))


def _file_get(path: Path) -> bytes | None:
    try:
        with path.open("rb") as f:
            owner_and_mode = _owner_and_mode(os.fstat(f.fileno()))
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read the store key {path}: {exc.strerror}") from None
    _check_private(path, *owner_and_mode)
    try:
        key = base64.b64decode(data.strip(), validate=True)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise StoreError(f"the store key file {path} is damaged; restore it from a backup")
    return key


def _owner_and_mode(st: os.stat_result) -> tuple[int, int]:
    return st.st_uid, stat.S_IMODE(st.st_mode)


class KeyRefused(StoreError):
    """The key file is there and is not used: another user's, or others can read it.
    Its message is whole: the database's own words about its key are not added."""


def _check_private(path: Path, owner: int, mode: int) -> None:
    """A key file others could read or change is refused: anyone who read it can open
    the sealed history, and one planted by another user would seal it for them."""
    if hasattr(os, "getuid") and owner != os.getuid():
        raise KeyRefused(f"the store key file {path} belongs to another user; drag uses only yours")
    if mode & 0o077:  # what to do first: a long path must not push it past the line's end
        raise KeyRefused(
            f"the store key file {path} can be read or changed by other users (mode "
            f"{mode:04o}): make it yours alone with `chmod 600 {path}` and run drag again "
            "(anyone who read it can open your sealed history)"
        )


def key_file_mode(path: Path) -> str:
    """The key file's mode as `drag doctor` shows it (it was checked when read)."""
    return f"{stat.S_IMODE(path.stat().st_mode):04o}"


def _file_set(path: Path, key: bytes) -> None:
    paths.private_dir(path.parent)
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64encode(key) + b"\n")


@dataclass(frozen=True)
class KeyInfo:
    key: bytes
    where: str  # "system keyring" | "key file <path>"

    @property
    def source(self) -> str:
        """ "keyring" or "file": what the database records."""
        return "keyring" if self.where == "system keyring" else "file"


def load_key(storage: KeyStorage = "auto", *, create: bool = True) -> KeyInfo:
    """The at-rest key: from the keyring, else the key file; made on first use."""
    path = key_file()
    keyring_error: Exception | None = None
    if storage in ("auto", "keyring"):
        try:
            key = _keyring_get()
        except Exception as exc:  # no backend, locked, D-Bus missing
            if storage == "keyring":
                raise StoreError(
                    f"store.key = keyring, but there is no usable keyring ({type(exc).__name__}); "
                    'set store.key = "file" to use a 0600 key file'
                ) from None
            key, keyring_error = None, exc
        if key is not None:
            return KeyInfo(key, "system keyring")
    keyring_usable = storage != "file" and keyring_error is None
    existing = _file_get(path)
    if existing is not None:
        return KeyInfo(existing, f"key file {path}")
    if keyring_error is not None and not no_keyring_here(keyring_error):
        # A keyring that exists but fails now may hold the key: never make a second one.
        raise StoreError(
            f"the system keyring cannot be read now ({type(keyring_error).__name__}); "
            "unlock it and try again (drag makes no second key while the first may exist), "
            'or set store.key = "file" for a new 0600 key file'
        )
    if not create:
        raise StoreError("no store key exists yet")
    key = AESGCM.generate_key(bit_length=256)
    if keyring_usable:
        with contextlib.suppress(Exception):
            _keyring_set(key)
            if _keyring_get() == key:
                return KeyInfo(key, "system keyring")
    _file_set(path, key)
    return KeyInfo(key, f"key file {path}")


class Sealer:
    """Seals and opens values with one key."""

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)
        self.check = check_value(key)
        # The upload ledger's MAC key (assistant.store.ledger), derived: never the key itself.
        self.mac_key = hashlib.blake2b(b"drag-assistant ledger mac", key=key).digest()
        # Keyed hashes (assistant.store.files: a file's path and content, a name), derived.
        self._hash_key = hashlib.blake2b(b"drag-assistant keyed hash", key=key).digest()

    def seal(self, text: str, column: str) -> bytes:
        return self.seal_bytes(text.encode("utf-8"), column)

    def seal_bytes(self, data: bytes, column: str) -> bytes:
        nonce = secrets.token_bytes(12)
        return FORMAT + nonce + self._aead.encrypt(nonce, data, column.encode())

    def keyed(self, text: str | bytes, purpose: str) -> str:
        """A hash of ``text`` that only this key can make: equal values are found
        equal in the database, but a guessed value cannot be checked without the key."""
        return hashlib.blake2b(
            text.encode("utf-8") if isinstance(text, str) else text,
            key=self._hash_key,
            person=purpose.encode()[:16],
            digest_size=16,
        ).hexdigest()

    def open(self, blob: bytes | None, column: str) -> str | None:
        plain = self.open_bytes(blob, column)
        return None if plain is None else plain.decode("utf-8")

    def open_bytes(self, blob: bytes | None, column: str) -> bytes | None:
        if blob is None:
            return None
        if not blob.startswith(FORMAT) or len(blob) < 1 + 12 + 16:
            raise StoreError(f"a sealed {column} value is damaged")
        try:
            plain = self._aead.decrypt(blob[1:13], blob[13:], column.encode())
        except InvalidTag:
            raise StoreError(
                f"a sealed {column} value does not open with this key (wrong key or tampered)"
            ) from None
        return plain
