"""What `drag ask` and `drag serve` agree on before a question travels (``POST
/drag/ask``): the route, the flags a request may set, and the settings key that says
whether the two run with the same settings, files, key and code.  Kept apart from the
server's side (:mod:`assistant.serve.native`) so that the thin client imports no model,
store or pipeline before its first byte."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from dataclasses import fields
from pathlib import Path

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
