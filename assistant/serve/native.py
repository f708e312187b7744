"""drag's own route on `drag serve`: `drag ask` as a thin client (``POST /drag/ask``).

The question comes as typed; the server's session (its models already loaded) answers
it with the pipeline, the events streamed back: ``{"text": piece}`` as the answer is
written, then ``{"result": record}`` (:meth:`AskResult.to_dict`), or ``{"error": ...}``.
First ``{"accepted": true}`` once the server has taken it (it will not fall back after
that).  A question that needs the user's review is not decided here, and nothing is
sent: to a client with a terminal (``can_review``), ``{"review": Shown}`` ends the
request; the client shows it and asks again with ``approved``, the digest of what the
user saw, and the server sends the question only if it sanitizes to exactly that text.
To any other (the app: its review shows more), ``{"error": {"kind": "review"}}`` tells
it to work the question in-process.  Only drag's own CLI key reaches this route
(tokens.CLI), and only flags that a loaded session can follow travel with the question."""

from __future__ import annotations

import dataclasses
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from assistant.base.errors import DragError, InputError, PrivacyError
from assistant.core import pipeline
from assistant.core.session import Session
from assistant.privacy.sanitize import Sanitized
from assistant.serve.wire import FLAGS, Shown

DIGEST = re.compile(r"[0-9a-f]{64}")


class NeedsTerminal(PrivacyError):
    """A review is needed, and only the client's terminal can hold it."""


class ToReview(PrivacyError):
    """A review is needed: what it shows goes to the client's terminal, which asks the
    question again with the user's approval of exactly that text (AskCall.approved)."""

    def __init__(self, shown: Shown) -> None:
        super().__init__("this question needs your review")
        self.shown = shown


@dataclass(frozen=True)
class AskCall:
    question: str
    flags: dict[str, Any] = field(default_factory=dict)
    yes: bool = False  # `drag ask --yes`: sent without the review step
    settings: str = ""  # the client's settings_key
    # `drag chat`'s conversation so far (the history's id): its placeholders keep their
    # meaning; None: a conversation of its own.
    conversation: int | None = None
    can_review: bool = False  # the client has a terminal to show a review on
    always: bool = False  # `drag ask --review`: reviewed even with nothing found
    approved: str = ""  # the Shown.digest the user approved at the client's review


def parse(body: object) -> AskCall:
    if not isinstance(body, dict) or not isinstance(body.get("question"), str):
        raise InputError("a /drag/ask request is {question, flags, yes}")
    flags = body.get("flags") or {}
    if not isinstance(flags, dict) or not set(flags) <= FLAGS:
        raise InputError(f"only these flags travel to drag serve: {', '.join(sorted(FLAGS))}")
    approved = body.get("approved") or ""
    if not isinstance(approved, str) or (approved and not DIGEST.fullmatch(approved)):
        raise InputError("a /drag/ask approval is the digest of a review (64 hex digits)")
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
        bool(body.get("can_review")),
        bool(body.get("always")),
        approved,
    )


def answer(
    runtime: Session,
    call: AskCall,
    emit: Callable[[dict[str, Any]], None],
    wanted: Callable[[], bool] | None = None,
) -> DragError | None:
    """Answer ``call`` in ``runtime`` (the server's session), telling ``emit`` each event;
    the session's own settings are put back after.  ``wanted``: whether the client is
    still there, asked before anything is sent.  Returns the error it told."""

    def review(sanitized: Sanitized) -> bool:
        shown = Shown.of(sanitized)
        if call.approved and hmac.compare_digest(call.approved, shown.digest()):
            return True  # the user saw exactly this text at the client's review
        if not call.can_review:
            raise NeedsTerminal("this question needs your review")
        raise ToReview(shown)

    base = runtime.settings
    runtime.settings = base.with_flags(call.flags) if call.flags else base
    runtime.wanted = wanted
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
                # An approval is checked on every text, even one this reading finds
                # nothing in (a reading can differ from the one the user saw).
                review_policy="always"
                if call.always or call.approved
                else ("never" if call.yes else None),
            )
    except ToReview as asked:  # nothing was sent: the client asks its terminal
        emit({"review": dataclasses.asdict(asked.shown)})
        return None
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
        runtime.wanted = None
    emit({"result": result.to_dict()})
    return None
