"""The teacher API key: environment variable first, then the system keyring.

The key is never a setting, never written to the config file, logs or
database.  On a headless machine keyring has no backend (``NoKeyringError``);
then only the environment variable works, and ``store_api_key`` says so.
"""

from __future__ import annotations

import os

from assistant.base.errors import ConfigError, one_line

ENV_VAR = "DRAG_TEACHER_API_KEY"
SERVICE = "drag-assistant"
USERNAME = "teacher-api-key"


def api_key() -> str | None:
    """The key for a remote teacher, or None (local servers need none)."""
    value = os.environ.get(ENV_VAR, "").strip()
    if value:
        return value
    try:
        import keyring

        stored = keyring.get_password(SERVICE, USERNAME)
    except Exception as exc:
        if no_keyring_here(exc):  # a headless box: the environment variable is the way
            return None
        # A keyring that exists but fails now (locked, D-Bus error): say so, rather than
        # send no key and report later that the teacher refused it.
        raise ConfigError(
            f"the system keyring could not be read ({type(exc).__name__}: "
            f"{one_line(str(exc), 80)}); unlock it, or export {ENV_VAR}"
        ) from None
    return stored or None


def no_keyring_here(exc: Exception) -> bool:
    """Whether a keyring error means the machine has no keyring at all (a headless box),
    as opposed to one that is locked or failing now (which must not be taken for none)."""
    try:
        from keyring.errors import NoKeyringError
    except ImportError:  # pragma: no cover - keyring is a dependency: none at all
        return True
    return isinstance(exc, NoKeyringError)


def key_source() -> str:
    """Where the key would come from, for `drag doctor` (never the key itself)."""
    if os.environ.get(ENV_VAR, "").strip():
        return f"environment variable {ENV_VAR}"
    try:
        import keyring

        if keyring.get_password(SERVICE, USERNAME):
            return "system keyring"
    except Exception:
        return "none (no system keyring on this machine)"
    return "none"


def store_api_key(key: str) -> None:
    key = key.strip()
    if not key:
        raise ConfigError("the API key is empty; nothing was stored")
    try:
        import keyring
        import keyring.errors

        keyring.set_password(SERVICE, USERNAME, key)
    except Exception as exc:
        raise ConfigError(
            f"no usable system keyring here ({type(exc).__name__}); export {ENV_VAR} instead"
        ) from None
