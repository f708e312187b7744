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

import hashlib
import importlib.metadata
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import assistant
from assistant.base import paths
from assistant.base.config import Settings
from assistant.base.errors import DragError, InputError, PrivacyError
from assistant.core import pipeline
from assistant.core.results import AskResult
from assistant.core.session import Session
from assistant.privacy.sanitize import Sanitized

PATH = "/drag/ask"
# Settings a request may set for itself; any other flag is worked in-process.
FLAGS = frozenset(
    {"pipeline.mode", "pipeline.n", "pipeline.k", "pipeline.gate", "store.offline", "store.cache"}
)


class NeedsTerminal(PrivacyError):
    """A review is needed, and only the client's terminal can hold it."""


def _resolved(value: str) -> str:
    """A setting that names a file, as this process finds it (relative paths and ``~``
    depend on where and as whom it runs); a manifest name as it is."""
    if value and (os.sep in value or value.endswith(".gguf") or value.startswith("~")):
        return str(Path(value).expanduser().resolve())
    return value


def settings_key(settings: Settings) -> str:
    """Which settings, files, key and code a process runs with: a client whose key
    differs from the server's works in-process."""
    sections = tuple(getattr(settings, f.name) for f in fields(settings) if f.compare)
    files = [
        _resolved(settings.get(k))
        for k in ("store.database", "student.model", "teacher.model", "privacy.reader_model")
    ]
    where = [str(paths.data_dir()), str(paths.cache_dir()), str(paths.config_file())]
    key = hashlib.sha256(os.environ.get("DRAG_TEACHER_API_KEY", "").encode()).hexdigest()
    try:
        version = importlib.metadata.version("drag-assistant")
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    code = (assistant.__file__, version, [f.name for f in fields(AskResult)])
    return hashlib.sha256(repr((sections, files, where, key, code)).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class AskCall:
    question: str
    flags: dict[str, Any] = field(default_factory=dict)
    yes: bool = False  # `drag ask --yes`: sent without the review step
    settings: str = ""  # the client's settings_key


def parse(body: object) -> AskCall:
    if not isinstance(body, dict) or not isinstance(body.get("question"), str):
        raise InputError("a /drag/ask request is {question, flags, yes}")
    flags = body.get("flags") or {}
    if not isinstance(flags, dict) or not set(flags) <= FLAGS:
        raise InputError(f"only these flags travel to drag serve: {', '.join(sorted(FLAGS))}")
    return AskCall(
        body["question"], dict(flags), bool(body.get("yes")), str(body.get("settings") or "")
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
    runtime.conversation_id = None  # each `drag ask` is a conversation of its own
    try:
        with runtime.own_placeholders():
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
    emit({"result": result.to_dict()})
    return None
