"""What every `drag` command shares: printing (never a terminal control), JSON out,
status lines, settings with the command's flags, the question on stdin, and keeping a
question that failed."""

from __future__ import annotations

import io
import json
import os
import stat
import sys
from collections.abc import Callable
from typing import Any, TextIO, get_args

import click

from assistant.base import errors, safetext, signals
from assistant.base.config import MODES, Gate, Settings

_STDIN_LIMIT = 4 * 1024 * 1024  # more than any question; stops a runaway pipe


class GivenPath(click.Path):
    """A path the user names: an empty one is an error, not the current folder (which
    is what ``Path("")`` is: `drag index --forget "$F"` with F unset forgot every
    indexed file under the folder it ran in)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail(
                "the path is empty (a variable that is not set?); nothing was done", param, ctx
            )
        return super().convert(value, param, ctx)


# Everything this CLI prints goes through these: what a model, the user or the database
# wrote is shown as text, never run by the terminal (assistant.base.safetext).
def echo(message: Any = None, **kwargs: Any) -> None:
    click.echo(None if message is None else safetext.plain(str(message)), **kwargs)


def secho(message: Any = None, **kwargs: Any) -> None:
    click.secho(None if message is None else safetext.plain(str(message)), **kwargs)


def to_json(value: Any) -> str:
    """JSON for --json: readable Unicode, but C1 controls and bidi overrides escaped, and
    a file name's bytes that are not UTF-8 (held as lone surrogates) as JSON's \\u escapes
    (written raw, they made the output no UTF-8, and no JSON a reader could load)."""
    text = json.dumps(value, ensure_ascii=False, indent=2)
    return safetext.escape_controls(text.encode("utf-8", "backslashreplace").decode("utf-8"))


def status_printer(enabled: bool) -> Callable[[str], None]:
    def show(message: str) -> None:
        if enabled:
            secho(message, err=True, dim=True)

    return show


def interactive_stderr() -> bool:
    return sys.stderr.isatty()


def settings_of(ctx: click.Context, flags: dict[str, Any]) -> Settings:
    base: Settings = ctx.obj["settings"]
    return base.with_flags({k: v for k, v in flags.items() if v is not None})


def read_stdin_question() -> str:
    """The question piped on standard input, decoded strictly as UTF-8."""
    stream = sys.stdin
    if stream is None or stream.isatty():
        raise errors.InputError(
            'no question: give it as an argument (drag ask "...") or on standard input'
        )
    return _read_stdin(stream)


def question_of(words: tuple[str, ...]) -> str:
    """The question of ``drag ask WORDS``: the words.  Standard input is read only when
    asked: no words, or "-" alone (the question is piped), or "-" first (`git diff | drag
    ask - "why?"`: the piped text, a blank line, then the words).  Words beside a pipe
    that holds text leave it unread, with a note: a script's loop (`while read q; do drag
    ask "$q"; done < list`) or a here-document must not have its rest taken for the
    question, nor sent."""
    if not words or words == ("-",):
        return read_stdin_question()
    if words[0] == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise errors.InputError(
                '"-" reads the text piped on standard input, and nothing is piped: '
                'pipe it in (git diff | drag ask - "why?"), or leave the "-" out'
            )
        piped = read_stdin_question()
        typed = " ".join(words[1:])
        return f"{piped.rstrip()}\n\n{typed}" if piped.strip() else typed
    if _pipe_holds_text():
        echo('drag: note: the text piped in was not read (drag ask - "…" reads it first)', err=True)
    return " ".join(words)


def _pipe_holds_text() -> bool:
    """Whether standard input is a pipe with bytes in it now (counted, never read:
    FIONREAD; an ended or empty pipe holds none)."""
    stream = sys.stdin
    try:
        if stream is None or stream.isatty():
            return False
        fd = stream.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
        import fcntl
        import termios

        count = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
        return int.from_bytes(count, sys.byteorder) > 0
    except (OSError, ValueError, ImportError, io.UnsupportedOperation):
        return False


def _read_stdin(stream: TextIO) -> str:
    """Standard input, decoded strictly as UTF-8 (what is not is kept as a draft)."""
    raw = stream.buffer.read(_STDIN_LIMIT + 1)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _undecodable("standard input", raw, exc) from None


def _undecodable(what: str, raw: bytes, exc: UnicodeDecodeError) -> errors.InputError:
    """The error for ``raw`` bytes that are not UTF-8, with the bytes kept as a draft."""
    error = errors.InputError(
        f"{what} is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
    )
    return _kept_bytes(raw, error, "your input")


def _kept_bytes(raw: bytes, error: errors.InputError, what: str) -> errors.InputError:
    """``error``, saying where ``raw`` (``what`` of the input) is kept as a draft."""
    from assistant.core import drafts

    try:
        kept = drafts.keep(raw, str(error))
    except (errors.DragError, OSError) as why:
        return errors.InputError(f"{error}; it could not be kept: {why}")
    return errors.InputError(f"{error}; {what} is kept in drag drafts as {kept.stem}")


def chat_line(prompt: str, interactive: bool) -> str | None:
    """The next question of `drag chat --plain`, None at the end of its input.  Typed
    (``interactive``), with the terminal's line editing; piped, read as bytes a line at
    a time.  A line that is not UTF-8 is an InputError, its bytes kept as a draft; one
    longer than :data:`_STDIN_LIMIT` too, its start kept and the rest of it read past
    (never asked as a question of its own); the next line is read after either."""
    if interactive:
        if isinstance(sys.stdin, io.TextIOWrapper) and sys.stdin.errors != "surrogateescape":
            sys.stdin.reconfigure(errors="surrogateescape")  # bytes not UTF-8: escapes
        try:
            line = input(prompt)
        except EOFError:
            return None
        except UnicodeDecodeError as exc:  # a stream that could not be told: bytes gone
            raise errors.InputError(f"that line is not valid UTF-8 ({exc.reason})") from None
        raw = line.encode("utf-8", "surrogateescape")  # the bytes typed, again
    else:
        stream = sys.stdin.buffer
        raw = stream.readline(_STDIN_LIMIT + 1)
        if not raw:
            return None
        if len(raw) > _STDIN_LIMIT and not raw.endswith(b"\n"):
            while (rest := stream.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass  # the rest of this line: not kept, and not a question
            raise _kept_bytes(
                raw[:_STDIN_LIMIT],
                errors.InputError(f"that line is over {_STDIN_LIMIT:,} bytes"),
                "its first part",
            )
        raw = raw.removesuffix(b"\n").removesuffix(b"\r")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _undecodable("that line", raw, exc) from None


def kept(question: str, exc: errors.DragError | KeyboardInterrupt) -> errors.DragError:
    from assistant.core import drafts

    with signals.held():  # a second signal does not cut the keeping short
        return drafts.kept_error(question, exc)


mode_option = click.option("--mode", type=click.Choice(MODES), help="Context for the student.")
gate_option = click.option(
    "--gate",
    type=click.Choice(get_args(Gate)),
    help="auto: the gate, or with the embedded teacher the student alone (the evidence "
    "shown); gate: the student reads its reply both ways and picks; always-evidence; never.",
)
k_option = click.option("--k", type=int, help="Top evidence/triples given to the student.")
n_option = click.option("--n", type=int, help="Evidence statements asked of the teacher.")
_model_options = [
    click.option("--student", "student_model", help="Student: manifest name or .gguf path."),
    click.option("--teacher", "teacher_endpoint", help='Teacher: "local" or a base URL.'),
    click.option("--teacher-model", help="Model name at the teacher endpoint."),
]
_cache_options = [
    click.option(
        "--offline",
        is_flag=True,
        default=None,
        help="Never contact the teacher: answer from the local cache or say it cannot.",
    ),
    click.option(
        "--no-cache",
        "no_cache",
        is_flag=True,
        default=None,
        help="Do not answer from the cache (what the teacher says is still cached).",
    ),
]


def with_model_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_model_options):
        f = option(f)
    return f


def with_cache_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_cache_options):
        f = option(f)
    return f


def flags(**kw: Any) -> dict[str, Any]:
    names = {
        "mode": "pipeline.mode",
        "gate": "pipeline.gate",
        "k": "pipeline.k",
        "n": "pipeline.n",
        "student_model": "student.model",
        "teacher_endpoint": "teacher.endpoint",
        "teacher_model": "teacher.model",
        "offline": "store.offline",
    }
    flags = {names[k]: v for k, v in kw.items() if k in names}
    if kw.get("no_cache"):
        flags["store.cache"] = False
    return flags


def open_store(ctx: click.Context) -> Any:
    from assistant.store import Store

    s: Settings = ctx.obj["settings"]
    return Store.configured(s.store.database, s.store.key)
