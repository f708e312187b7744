"""drag-assistant: a local student model answers with evidence distilled from a teacher."""

from assistant.base import _env  # noqa: F401  (must run before any heavy import)

__version__ = "0.1.0"
