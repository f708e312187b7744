"""What `drag ask` and `drag serve` agree on before a question travels (``POST
/drag/ask``): the route, the flags a request may set, and the settings key that says
whether the two run with the same settings, files, key and code.  Kept apart from the
server's side (:mod:`assistant.serve.native`) so that the thin client imports no model,
store or pipeline before its first byte."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
from dataclasses import dataclass, field, fields
from typing import Any

import assistant
from assistant.base import paths
from assistant.base.config import Settings
from assistant.core.results import AskResult

PATH = "/drag/ask"
# Settings a request may set for itself; any other flag is worked in-process.
FLAGS = frozenset(
    {"pipeline.mode", "pipeline.n", "pipeline.k", "pipeline.gate", "store.offline", "store.cache"}
)


def _resolved(value: str) -> str:
    """A setting that names a file, as this process finds it (relative paths and ``~``
    depend on where and as whom it runs); a manifest name as it is."""
    if value and (os.sep in value or value.endswith(".gguf") or value.startswith("~")):
        return str(paths.expand(value).resolve())
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
class Shown:
    """What the review in a terminal shows of a question (assistant.cli.review): made
    from the sanitized question where it was sanitized, in-process or in the server,
    whose review event carries it to the client's terminal."""

    original: str
    text: str  # what the teacher would get
    counts: dict[str, int] = field(default_factory=dict)
    read: int = 0  # values the local reader found
    rewrite_used: bool = False
    rewrite_note: str = ""
    unchecked: tuple[str, ...] = ()

    @classmethod
    def of(cls, sanitized: Any) -> Shown:
        """From an assistant.privacy.sanitize.Sanitized (not imported: the thin client
        never loads the privacy layer)."""
        return cls(
            sanitized.original,
            sanitized.text,
            dict(sanitized.counts),
            len(sanitized.read_values),
            bool(sanitized.rewrite_used),
            str(sanitized.rewrite_note),
            tuple(sanitized.unchecked),
        )

    @classmethod
    def parse(cls, told: object) -> Shown:
        """A review event's record (TypeError, ValueError: not one)."""
        if not isinstance(told, dict):
            raise ValueError("a review is a record")
        counts = told.get("counts") or {}
        unchecked = told.get("unchecked") or []
        if not isinstance(counts, dict) or not isinstance(unchecked, list):
            raise ValueError("a review's counts and lines")
        return cls(
            str(told["original"]),
            str(told["text"]),
            {str(k): int(v) for k, v in counts.items()},
            int(told.get("read") or 0),
            bool(told.get("rewrite_used")),
            str(told.get("rewrite_note") or ""),
            tuple(str(line) for line in unchecked),
        )

    def digest(self) -> str:
        """What the user approves: this question, sent as this text, with what was said
        of it.  The client asks again with it, and the server sends only a question
        whose review would show the same."""
        fields_ = dataclasses.asdict(self)
        return hashlib.sha256(json.dumps(fields_, sort_keys=True).encode()).hexdigest()
