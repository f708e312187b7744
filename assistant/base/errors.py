"""Errors a user can act on.  ``str(error)`` is always a single line."""

from __future__ import annotations

# The longest message a DragError carries.
LINE_LIMIT = 300


def one_line(text: str, limit: int = LINE_LIMIT) -> str:
    """Collapse whitespace so a message fits on one terminal line."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class DragError(Exception):
    """An error with a message that says what went wrong and what to do."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))

    @property
    def message(self) -> str:
        return str(self)


class InputError(DragError):
    """The user's input cannot be used as it is."""

    exit_code = 2


class ConfigError(DragError):
    """A setting is missing or invalid."""

    exit_code = 78  # EX_CONFIG


class FlagError(ConfigError):
    """A setting given as a command-line flag is invalid: what the user just typed, so
    bad input (exit 2), not the configuration."""

    exit_code = 2


class ModelError(DragError):
    """A model file is missing, corrupt or cannot be loaded."""

    exit_code = 4


class Interrupted(DragError):
    """The user pressed Ctrl+C while a question was being answered."""

    exit_code = 130


class PrivacyError(DragError):
    """The privacy layer could not do its work, so nothing is sent."""

    exit_code = 5


class Declined(PrivacyError):
    """The user said no at the review: nothing was sent."""


class GuardBlocked(PrivacyError):
    """The egress guard refused a request: nothing was sent."""


class TeacherError(DragError):
    """The teacher could not be reached or gave an unusable answer."""

    exit_code = 3

    def __init__(self, message: str, *, reply: str | None = None) -> None:
        super().__init__(message)
        self.reply = reply  # what the teacher sent, kept so nothing is lost


class TeacherTimeout(TeacherError):
    """The teacher did not answer within the timeout (connecting, or its reply)."""


class NotPassedOn(TeacherError):
    """The teacher's streamed reply could not be passed on (its reader failed: a client
    that went away): the teacher is not at fault, and no crash of it is looked for."""


class StoreError(DragError):
    """The local database or its key cannot be used."""

    exit_code = 6

    def __init__(self, message: str, *, reply: str | None = None) -> None:
        super().__init__(message)
        self.reply = reply  # a teacher reply that could not be stored, kept so nothing is lost


class NotCovered(DragError):
    """Offline, and the local cache does not cover the question."""

    exit_code = 7
