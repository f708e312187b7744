"""`drag index`: add your own files to the local index, list them, forget them."""

from __future__ import annotations

import datetime as dt
import errno
import sys
from pathlib import Path
from typing import Any

import click

from assistant.base.errors import InputError
from assistant.base.safetext import name_line
from assistant.cli.common import (
    GivenPath,
    echo,
    secho,
    settings_of,
    status_printer,
    to_json,
)
from assistant.cli.root import cli


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _there(path: Path) -> bool:
    """Whether ``path`` names something (a link that leads nowhere too); a name the file
    system cannot hold (too long) names nothing."""
    try:
        return path.exists() or path.is_symlink()
    except OSError as exc:  # a permission refused is said where the file is read
        return exc.errno != errno.ENAMETOOLONG


@cli.command("index")
@click.argument("paths", nargs=-1, type=GivenPath(path_type=Path))
@click.option("--list", "list_", is_flag=True, help="Show the indexed files.")
@click.option(
    "--forget",
    "forget",
    multiple=True,
    type=GivenPath(path_type=Path),
    help="Remove a file, or every file under a folder, from the index.",
)
@click.option(
    "--names",
    is_flag=True,
    help="Show the names your files taught the detector (privacy.allow removes one).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def index_command(
    ctx: click.Context,
    /,
    paths: tuple[Path, ...],
    list_: bool,
    forget: tuple[Path, ...],
    names: bool,
    as_json: bool,
) -> None:
    """Add PATHS (files and folders) to the index of your own files; `drag ask --files`
    answers from it, and nothing in it is ever sent.  A changed file is indexed anew, an
    unchanged one is left as it is."""
    from assistant.core import localfiles
    from assistant.core.session import Session
    from assistant.privacy.entities import without_allowed

    if not (paths or list_ or forget or names):
        raise click.UsageError("name files or folders to index, or use --list, --names or --forget")
    if forget and paths:  # "--forget a b" would index b: each path to forget has its --forget
        raise click.UsageError(
            f"--forget takes one path: --forget {forget[-1]} --forget {paths[0]} to forget "
            "both; indexing and forgetting are two commands (nothing was done)"
        )
    missing = [p for p in paths if not _there(p)]
    if paths and len(missing) == len(paths):  # said once, before anything loads
        raise InputError(f"no such file or folder: {missing[0]} (nothing was indexed)")
    settings = settings_of(ctx, {})
    out: dict[str, Any] = {}
    nothing = False  # files were named, and every one was skipped
    with Session(settings, status=status_printer(not as_json and sys.stderr.isatty())) as rt:
        not_indexed: list[Path] = []
        for path in forget:
            gone = localfiles.forget(rt, path)
            out.setdefault("forgotten", []).extend(gone)
            if not gone:
                not_indexed.append(path)
            elif not as_json:
                if len(gone) == 1 and not path.is_dir():  # the file named
                    echo(f"forgot {name_line(path)}")
                else:
                    echo(f"forgot {len(gone)} file(s) under {name_line(path)}")
        if paths:
            report = _index(rt, paths, quiet=as_json)
            out["indexed"] = {
                "added": report.added,
                "replaced": report.replaced,
                "unchanged": len(report.unchanged),
                "skipped": [{"path": str(s.path), "reason": s.reason} for s in report.skipped],
                "cut": [{"path": str(c.path), "reason": c.reason} for c in report.cut],
                "chunks": report.chunks,
                "seconds": round(report.seconds, 2),
            }
            nothing = bool(report.skipped) and not (
                report.added or report.replaced or report.unchanged
            )
        if list_:
            listed = localfiles.sources(rt)
            out["files"] = [
                {
                    "path": s.path,
                    "kind": s.kind,
                    "size": s.size,
                    "chunks": s.chunks,
                    "indexed": s.indexed,
                }
                for s in listed
            ]
            if not as_json:
                _print_list(listed)
        if names:
            learnt = rt.learnt()
            people = set(learnt.people)
            out["names"] = [
                {"name": n, "person": n in people}
                for n in without_allowed(learnt.names, settings.privacy.allow)
            ]
            if not as_json:
                _print_names(out["names"], settings.files.learn_names)
    if as_json:
        echo(to_json(out))
    if nothing:
        why = "the output says why" if as_json else "each with its reason above"
        if report.removed:
            why += f"; {len(report.removed)} indexed before, now gone from the index"
        raise InputError(f"nothing was indexed: {len(report.skipped)} file(s) skipped, {why}")
    if missing:
        raise InputError(f"no such file or folder: {missing[0]} (the rest was indexed)")
    if not_indexed:
        raise InputError(f"not in the index: {not_indexed[0]} (drag index --list shows it)")


def _index(rt: Any, paths: tuple[Path, ...], *, quiet: bool) -> Any:
    from assistant.core import localfiles

    bar: Any = None
    shown = not quiet and sys.stderr.isatty()

    def progress(done: int, total: int, _path: str) -> None:
        nonlocal bar
        if not shown or total < 2:
            return
        if bar is None:
            bar = click.progressbar(length=total, label="indexing", file=sys.stderr)
            bar.__enter__()
        bar.update(done - bar.pos)

    try:
        report = localfiles.index(rt, paths, progress)
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
    if not quiet:
        for line in [c.line() for c in report.cut] + [s.line() for s in report.skipped]:
            secho(f"drag: {line}", err=True, fg="yellow")
        echo(report.line())
    return report


def _print_list(listed: list[Any]) -> None:
    if not listed:
        echo("no files are indexed")
        return
    for s in listed:
        when = dt.datetime.fromisoformat(s.indexed).astimezone().strftime("%Y-%m-%d %H:%M")
        echo(f"{name_line(s.path)}  {s.kind}  {_size(s.size)}  {s.chunks} chunks  indexed {when}")
    total = sum(s.size for s in listed)
    echo(f"{len(listed)} file(s), {_size(total)}")


def _print_names(names: list[dict[str, Any]], learning: bool) -> None:
    """One learnt name a line, a person's marked; what privacy.allow and
    files.learn_names do to them."""
    if not learning:
        echo("files.learn_names is off: no name from your files is learnt")
        return
    for n in names:
        echo(name_line(n["name"]) + ("  (a person)" if n["person"] else ""))
    echo(
        f"{len(names)} name(s) learnt from your files count as personal; privacy.allow removes one"
    )
