"""drag's own route on `drag serve`: `drag ask` as a thin client (``POST /drag/ask``).

The question comes as typed; the server's session (its models already loaded) answers
it with the pipeline, the events streamed back: ``{"text": piece}`` as the answer is
written, then ``{"result": record}`` (:meth:`AskResult.to_dict`), or ``{"error": ...}``.
First ``{"accepted": true}`` once the server has taken it (it will not fall back after
that).  A question that needs the user's review is not decided here: ``{"error":
{"kind": "review"}}`` (before anything is sent) tells the client to ask it in-process,
where the review is in the user's terminal.  Only drag's own CLI key reaches this route
(tokens.CLI), and only flags that a loaded session can follow travel with the question."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from assistant.base.errors import DragError, InputError, PrivacyError
from assistant.core import pipeline
from assistant.core.session import Session
from assistant.privacy.sanitize import Sanitized
from assistant.serve.wire import FLAGS


class NeedsTerminal(PrivacyError):
    """A review is needed, and only the client's terminal can hold it."""


@dataclass(frozen=True)
class AskCall:
    question: str
    flags: dict[str, Any] = field(default_factory=dict)
    yes: bool = False  # `drag ask --yes`: sent without the review step
    settings: str = ""  # the client's settings_key
    # `drag chat`'s conversation so far (the history's id): its placeholders keep their
    # meaning; None: a conversation of its own.
    conversation: int | None = None


def parse(body: object) -> AskCall:
    if not isinstance(body, dict) or not isinstance(body.get("question"), str):
        raise InputError("a /drag/ask request is {question, flags, yes}")
    flags = body.get("flags") or {}
    if not isinstance(flags, dict) or not set(flags) <= FLAGS:
        raise InputError(f"only these flags travel to drag serve: {', '.join(sorted(FLAGS))}")
    conversation = body.get("conversation")
    if conversation is not None and (
        not isinstance(conversation, int) or isinstance(conversation, bool) or conversation < 1
    ):
        raise InputError("a /drag/ask conversation is the history's id of one")
    return AskCall(
        body["question"],
        dict(flags),
        bool(body.get("yes")),
        str(body.get("settings") or ""),
        conversation,
    )


def answer(
    runtime: Session, call: AskCall, emit: Callable[[dict[str, Any]], None]
) -> DragError | None:
    """Answer ``call`` in ``runtime`` (the server's session), telling ``emit`` each event;
    the session's own settings are put back after.  Returns the error it told."""

    def review(_sanitized: Sanitized) -> bool:
        raise NeedsTerminal("this question needs your review")

    base = runtime.settings
    runtime.settings = base.with_flags(call.flags) if call.flags else base
    try:
        with runtime.own_placeholders() as vault:
            # The conversation's placeholders, as the history keeps them; one that was
            # deleted meanwhile goes on as a new conversation.
            asked_in = call.conversation
            dumped = None if asked_in is None else runtime.store.load_vault(asked_in)
            if dumped is not None:
                vault.load(dumped)
            runtime.conversation_id = asked_in if dumped is not None else None
            result = pipeline.ask(
                runtime,
                call.question,
                on_text=lambda piece: emit({"text": piece}),
                review=review,
                review_policy="never" if call.yes else None,
            )
    except NeedsTerminal:
        emit({"error": {"kind": "review", "message": "this question needs your review"}})
        return None
    except DragError as exc:
        emit(
            {
                "error": {
                    "kind": type(exc).__name__,
                    "message": str(exc),
                    "exit_code": exc.exit_code,
                    "reply": getattr(exc, "reply", None),
                }
            }
        )
        return exc
    except Exception as exc:  # told as this question's failure, never a dropped line
        message = f"drag serve failed ({type(exc).__name__}); the next question works"
        emit({"error": {"kind": "DragError", "message": message}})
        return None
    finally:
        runtime.settings = base
        runtime.conversation_id = None
    emit({"result": result.to_dict()})
    return None
