"""`drag ask` through a running `drag serve`: the models are loaded there already, so
the answer starts at once.  Where no server answers, where the question needs a review
(it is asked in this terminal) or where this process's settings differ from the
server's, the caller works in-process instead (None).

Once the server has taken the question (its first event, ``accepted``), nothing falls
back: a failure after that is this question's error (it is kept as a draft), so that no
question is ever worked twice."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assistant.base import errors
from assistant.base.config import Settings
from assistant.core.results import AskResult
from assistant.net import loopback
from assistant.serve import tokens, wire


def _error(told: dict[str, Any]) -> errors.DragError:
    """The server's error as this process would have raised it (its exit code too)."""
    kind = getattr(errors, str(told.get("kind")), None)
    message = str(told.get("message") or "drag serve failed")
    if not (isinstance(kind, type) and issubclass(kind, errors.DragError)):
        return errors.DragError(message)
    if issubclass(kind, errors.TeacherError | errors.StoreError):
        return kind(message, reply=told.get("reply"))
    return kind(message)


def _server() -> tuple[str, str] | None:
    """(base URL, key) of a running server of this user's that owns its port, or None
    (tokens.recorded)."""
    record = tokens.recorded()
    if record is None:
        return None
    try:
        return str(record["url"]).removesuffix("/v1"), tokens.cli_token()
    except errors.DragError:  # the key file cannot be read: work in-process
        return None


def _travelling(flags: dict[str, Any]) -> dict[str, Any] | None:
    """The options given (not None), when each can travel with a question to the
    server (wire.FLAGS); None: the question is worked in-process."""
    given = {k: v for k, v in flags.items() if v is not None}
    return None if set(given) - wire.FLAGS else given


def serving(settings: Settings, flags: dict[str, Any]) -> dict[str, Any] | None:
    """The running server's record (tokens.recorded) when it runs with ``settings``
    (wire.settings_key) and ``flags`` can travel, or None: the app then loads no model
    of its own until a question has to be worked in-process.  Read from the state
    file, nothing asked; the server checks the settings again with each question."""
    if _travelling(flags) is None:
        return None
    record = tokens.recorded()
    if record is None or record["settings"] != wire.settings_key(settings):
        return None
    return record


def ask(
    settings: Settings,
    question: str,
    flags: dict[str, Any],
    *,
    yes: bool,
    on_text: Callable[[str], None] | None,
    conversation: int | None = None,
    review: Callable[[wire.Shown], bool] | None = None,
    always: bool = False,
) -> AskResult | None:
    """The answer from the running server, or None (work in-process).  ``conversation``:
    `drag chat`'s so far (the answer's ``conversation_id`` says which it is in).
    ``review``: the terminal's review (None: no terminal; a question that needs one is
    worked in-process); ``always``: reviewed even when nothing was found (--review)."""
    sent = _travelling(flags)
    if sent is None:
        return None
    server = _server()
    if server is None:
        return None
    body = {
        "question": question,
        "flags": sent,
        "yes": yes,
        "settings": wire.settings_key(settings),
        "conversation": conversation,
        "can_review": review is not None,
        "always": always,
    }
    for turn in range(3):  # a review, then the question as the user approved it
        told = _asked(server, body, max(600.0, 4 * settings.teacher.timeout), on_text)
        if not isinstance(told, wire.Shown):
            return told
        if review is None:  # a server that asks anyway: never sent unseen
            return None
        if turn == 2:
            break
        if not review(told):
            raise errors.Declined("not sent: you declined the upload")
        body["approved"] = told.digest()
    raise errors.PrivacyError("not sent: the question changed at each review; ask it again")


def _asked(
    server: tuple[str, str],
    body: dict[str, Any],
    timeout: float,
    on_text: Callable[[str], None] | None,
) -> AskResult | wire.Shown | None:
    """One request: the answer, what to review, or None (work in-process)."""
    accepted = False
    told: dict[str, Any] | None = None
    # Closed however this ends (Ctrl+C, the app closed): the server then stops the student.
    stream = loopback.events(server[0], wire.PATH, server[1], body, timeout)
    try:
        for event in stream:
            if "accepted" in event:
                accepted = True
            elif "text" in event and on_text is not None:
                on_text(str(event["text"]))
            elif "result" in event:
                return AskResult.from_dict(event["result"])
            elif "review" in event:  # nothing was sent
                return wire.Shown.parse(event["review"])
            elif "error" in event and isinstance(event["error"], dict):
                told = event["error"]
                break
    except loopback.Unreachable:
        return None
    except loopback.Cut as exc:
        if not accepted:
            return None
        raise errors.ModelError(f"{exc}; the server may still finish it") from None
    except (TypeError, ValueError, KeyError) as exc:  # a record this process cannot read
        raise errors.ModelError(f"drag serve's answer could not be read ({exc})") from None
    finally:
        stream.close()
    if told is None:
        if not accepted:
            return None
        raise errors.ModelError("drag serve stopped before the answer was complete")
    if told.get("kind") in ("review", "settings"):  # decided before anything was sent
        return None
    raise _error(told)
