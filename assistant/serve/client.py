"""`drag ask` through a running `drag serve`: the models are loaded there already, so
the answer starts at once.  Where no server answers, where the question needs a review
(it is asked in this terminal) or where this process's settings differ from the
server's, the caller works in-process instead (None)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assistant.base import errors
from assistant.base.config import Settings
from assistant.core.results import AskResult
from assistant.net import loopback
from assistant.serve import native, tokens


def _error(told: dict[str, Any]) -> errors.DragError:
    """The server's error as this process would have raised it (its exit code too)."""
    kind = getattr(errors, str(told.get("kind")), None)
    message = str(told.get("message") or "drag serve failed")
    if not (isinstance(kind, type) and issubclass(kind, errors.DragError)):
        return errors.DragError(message)
    if issubclass(kind, errors.TeacherError | errors.StoreError):
        return kind(message, reply=told.get("reply"))
    return kind(message)


def ask(
    settings: Settings,
    question: str,
    flags: dict[str, Any],
    *,
    yes: bool,
    on_text: Callable[[str], None] | None,
) -> AskResult | None:
    """The answer from the running server, or None (work in-process)."""
    flags = {k: v for k, v in flags.items() if v is not None}  # the options not given
    if set(flags) - native.FLAGS:
        return None
    record = tokens.recorded()
    if record is None:
        return None
    body = {
        "question": question,
        "flags": flags,
        "yes": yes,
        "settings": native.settings_key(settings),
    }
    timeout = max(600.0, 4 * settings.teacher.timeout)
    written = False
    try:
        key = tokens.tokens()[tokens.DEFAULT]
        for event in loopback.events(
            record["url"].removesuffix("/v1"), native.PATH, key, body, timeout
        ):
            if "text" in event and on_text is not None:
                written = True
                on_text(str(event["text"]))
            elif "result" in event:
                return AskResult.from_dict(event["result"])
            elif "error" in event:
                told = event["error"]
                if told.get("kind") in ("review", "settings"):
                    return None
                raise _error(told)
    except (loopback.Unreachable, errors.StoreError, OSError, ValueError, TypeError) as exc:
        if not written:  # nothing shown yet: this process answers instead
            return None
        raise errors.ModelError(f"drag serve's answer was cut ({exc})") from None
    raise errors.ModelError("drag serve stopped before the answer was complete")
