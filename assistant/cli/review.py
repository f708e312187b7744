"""The review in a terminal: the question and what would be sent, side by side."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from assistant.cli.common import echo, secho
from assistant.serve.wire import Shown

if TYPE_CHECKING:
    from assistant.privacy.sanitize import Sanitized


def side_by_side(left: str, right: str, width: int) -> list[str]:
    """Two texts in columns, wrapped to fit ``width``."""
    import textwrap

    col = max(20, (width - 3) // 2)
    a = [ln for para in left.splitlines() for ln in (textwrap.wrap(para, col) or [""])]
    b = [ln for para in right.splitlines() for ln in (textwrap.wrap(para, col) or [""])]
    rows = max(len(a), len(b))
    a += [""] * (rows - len(a))
    b += [""] * (rows - len(b))
    return [f"{x:<{col}} │ {y}" for x, y in zip(a, b, strict=True)]


def review_in_terminal(sanitized: Sanitized) -> bool:
    """Show what would be sent next to the original; ask before sending."""
    return ask_in_terminal(Shown.of(sanitized))


def ask_in_terminal(shown: Shown) -> bool:
    """The review of a question sanitized here or by `drag serve` (its review event)."""
    import shutil

    from assistant.privacy.sanitize import rewrite_line

    width = min(shutil.get_terminal_size((100, 20)).columns, 160)
    echo("", err=True)
    for line in side_by_side("YOUR QUESTION (stays here)", "SENT TO THE TEACHER", width):
        secho(line, err=True, bold=True)
    for line in side_by_side(shown.original, shown.text, width):
        echo(line, err=True)
    counts = ", ".join(f"{k} ×{v}" for k, v in sorted(shown.counts.items())) or "nothing"
    rewrite = rewrite_line(shown.rewrite_used, shown.rewrite_note)
    by = f" · {shown.read} found by the local model" if shown.read else ""
    secho(f"detected: {counts}{by}" + (f" · {rewrite}" if rewrite else ""), err=True, dim=True)
    for line in shown.unchecked:
        secho(f"{line}: read the right side yourself", err=True, fg="yellow")
    return confirm("Send the sanitized question to the teacher?")


def confirm(question: str) -> bool:
    """y or N from the terminal (Enter: no; the end of the input: interrupted, the caller
    keeps the question).  The wait goes back to Python five times a second: a signal
    that another thread of drag took (a model loader's) is handled only by the main
    thread, which it does not wake from a read, and `kill` at click's y/N waited for a
    key press."""
    import select

    while True:
        echo(f"{question} [y/N]: ", nl=False, err=True)
        while not select.select([sys.stdin], [], [], 0.2)[0]:
            pass  # signals are handled here
        line = sys.stdin.readline()
        if not line:  # the terminal's input ended (Ctrl+D)
            echo("", err=True)
            raise KeyboardInterrupt
        answer = line.strip().lower()
        if answer in ("y", "yes"):
            return True
        if answer in ("", "n", "no"):
            return False
        echo("Error: answer y or n", err=True)


def can_ask() -> bool:
    """Whether a review can be asked: a terminal to read the answer from and show it on."""
    return sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty()


def review_options(review: bool, yes: bool) -> dict[str, Any]:
    """What pipeline.ask needs for the review step, given the flags and the terminal."""
    policy = "never" if yes else ("always" if review else None)
    return {"review": review_in_terminal if can_ask() else None, "review_policy": policy}
