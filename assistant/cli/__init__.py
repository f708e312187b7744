"""The `drag` command line: a thin skin over assistant.core.pipeline, one module per command
group.

Errors the user can fix print one line (``drag: error: ...``) and exit
non-zero; nothing the user typed is lost (see assistant.core.drafts).
"""

from assistant.cli import admin, ask, audit, bench, files, serve, teacher  # noqa: F401 - they register
from assistant.cli.root import cli, main

__all__ = ["cli", "main"]
