"""Nothing the user typed is lost: questions that could not be answered are kept.

Files go to ``<data dir>/unsent/`` (owner-only permissions), one per failed
question, with the error and whatever the teacher had replied.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from assistant import paths
from assistant.errors import DragError, Interrupted


def unsent_dir() -> Path:
    return paths.private_dir(paths.data_dir() / "unsent")


def _new_file(suffix: str) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    base = unsent_dir() / f"{stamp}-{os.getpid()}"
    path = base.with_suffix(suffix)
    n = 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}").with_suffix(suffix)
    return path


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def keep(question: str | bytes, error: str, teacher_reply: str | None = None) -> Path:
    """Save a question that was not answered; returns where it went."""
    if isinstance(question, bytes):
        path = _new_file(".bin")  # not valid text: keep the exact bytes
        _write_private(path, question)
        return path
    path = _new_file(".json")
    record = {"question": question, "error": error, "teacher_reply": teacher_reply}
    _write_private(path, json.dumps(record, ensure_ascii=False, indent=1).encode("utf-8"))
    return path


def kept_error(question: str, exc: BaseException) -> DragError:
    """The error to show for a question that failed, after keeping the question."""
    error = exc if isinstance(exc, DragError) else Interrupted("interrupted")
    if not question.strip():
        return error
    kept = keep(question, str(error), getattr(error, "reply", None))
    return type(error)(f"{error} (your question is kept in {kept})")
