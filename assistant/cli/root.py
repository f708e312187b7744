"""The `drag` group and its entry point: one-line errors, no tracebacks."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from pathlib import Path
from typing import Any

import click

from assistant.base import config as config_mod
from assistant.base import errors, safetext
from assistant.cli.common import GivenPath, echo, secho


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_path", type=GivenPath(dir_okay=False), help="Config file to use.")
@click.version_option(package_name="drag-assistant", prog_name="drag")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None) -> None:
    """drag: a private assistant. A small local model answers; a large teacher
    only ever sees the question, and gives evidence and a knowledge graph."""

    ctx.ensure_object(dict)
    named = Path(config_path) if config_path else None
    if named is not None and not named.exists() and ctx.invoked_subcommand != "config":
        # A mistyped path would run on the defaults (another teacher) without a word;
        # `drag config set` creates the file, `config show` shows what it would hold.
        raise errors.InputError(f"--config {named}: no such file (drag config set creates one)")
    try:
        ctx.obj["settings"] = config_mod.load(config_file=named)
    except errors.ConfigError as exc:  # `drag config set` mends a file that does not load
        if ctx.invoked_subcommand != "config":
            raise
        ctx.obj["unloaded"] = (exc, named)
    if ctx.invoked_subcommand is None:
        from assistant.cli.ask import chat

        ctx.invoke(chat)


# A group named alone ("drag audit") raises this from click 8.2 on; on 8.1 it prints its
# help itself, and an empty tuple here catches nothing.
_NO_ARGS: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _standard_streams(args: list[str]) -> None:
    """Standard input, output and error each open: one closed (`drag … >&-`) would be the
    next file opened (the database), and a library's log written into it.  A closed one
    is opened on the null device (input: an empty one); output closed, nothing is done
    (what it would say is lost), but for a server (`drag serve`, `drag teacher serve`),
    whose work is not its output."""
    closed = []
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:  # the lowest free descriptor: this one, those below being open
            os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            setattr(sys, name, open(fd, mode, encoding="utf-8", closefd=False))  # noqa: SIM115
            closed.append(name)
    serving = "serve" in [a for a in args if not a.startswith("-")][:2]
    if "stdout" in closed and not serving:
        raise errors.InputError("standard output is closed: nothing was done")


def main(argv: list[str] | None = None) -> None:
    """Entry point: one-line errors, no tracebacks (DRAG_DEBUG=1 shows them)."""
    try:
        _standard_streams(sys.argv[1:] if argv is None else argv)
        code = cli.main(args=argv, prog_name="drag", standalone_mode=False)
    except errors.DragError as exc:
        secho(f"drag: error: {exc}", err=True, fg="red")
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        echo("drag: cancelled", err=True)
        sys.exit(130)
    except _NO_ARGS as exc:
        exc.show()  # a group named alone ("drag audit"): its help, as written
        sys.exit(exc.exit_code)
    except click.UsageError as exc:  # one line, with where its help is
        told = exc.ctx.command_path if exc.ctx is not None else "drag"
        message = safetext.one_line(exc.format_message())
        secho(f"drag: error: {message} ({told} --help)", err=True, fg="red")
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.message = safetext.one_line(exc.message)  # type: ignore[misc]
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        echo("drag: interrupted", err=True)
        sys.exit(130)
    except OSError as exc:
        if os.environ.get("DRAG_DEBUG"):
            raise
        if exc.errno not in _OUTPUT_FAILED:
            raise _internal(exc) from None
        # A write failed (a full disk, a quota, a device): said; output that cannot be
        # written is dropped (the interpreter's own flush would fail again at exit).
        try:
            sys.stdout.flush()
        except OSError:
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        where = exc.filename or "standard output"  # a write to it names no file
        verb = "reading or writing" if exc.errno == errno.EIO else "writing"
        secho(f"drag: error: {verb} {where} failed: {exc.strerror}", err=True, fg="red")
        sys.exit(1)
    except Exception as exc:
        if os.environ.get("DRAG_DEBUG"):
            raise
        raise _internal(exc) from None
    sys.exit(code if isinstance(code, int) else 0)


# Why a write (or, for EIO, a read) failed that is no fault of drag's: no space, a
# quota, a file too large, the device.
_OUTPUT_FAILED = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


def _internal(exc: Exception) -> SystemExit:
    """An error drag did not expect: one line, and exit 70."""
    secho(
        f"drag: internal error: {type(exc).__name__}: {errors.one_line(str(exc), 200)} "
        "(run with DRAG_DEBUG=1 for the traceback)",
        err=True,
        fg="red",
    )
    return SystemExit(70)
