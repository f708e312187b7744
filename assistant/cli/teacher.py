"""`drag teacher serve`: the embedded local teacher, kept running."""

from __future__ import annotations

import time
from pathlib import Path

import click

from assistant.base import errors, signals
from assistant.base.config import Settings
from assistant.cli.common import echo, status_printer
from assistant.cli.root import cli
from assistant.net.listeners import alive


@cli.group("teacher")
def teacher_group() -> None:
    """The embedded local teacher (llama.cpp server on 127.0.0.1)."""


@teacher_group.command("serve")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    help="Port on 127.0.0.1 (default: a free one).",
)
@click.option("--model", "model", help="Manifest name or .gguf path (default: teacher.model).")
@click.pass_context
def teacher_serve(ctx: click.Context, port: int, model: str | None) -> None:
    """Run the local teacher until Ctrl+C; other drag commands reuse it."""
    from assistant.models import localserver, modelfiles

    settings: Settings = ctx.obj["settings"]
    name = model or settings.teacher.model or settings.student.model
    path, _spec = modelfiles.resolve(name, status_printer(True))
    server = localserver.LocalServer(path, n_ctx=settings.teacher.n_ctx, port=port)
    # Ctrl+C, `kill` and a background job's SIGINT (started with SIGINT ignored, as a
    # shell without job control does) all stop the llama.cpp child and the record.
    stops = signals.StopOnce()
    signals.stop_on(stops)
    if not port and _serve_running(path, settings.teacher.n_ctx, stops):
        signals.exit_stopped()
    echo(f"starting {path.name} on 127.0.0.1:{server.port}…", err=True)
    recorded = False
    try:
        server.start()
        server.record()
        recorded = True
        echo(
            f"local teacher ready at {server.base_url} (model alias {localserver.ALIAS}; "
            f"its API key is in {localserver.state_file()}, readable by you only); "
            "Ctrl+C stops it"
        )
        assert server.process is not None
        code = server.process.wait()
        # It ended by itself: the commands that used it are told how, and so is this one.
        log = server.write_exit(localserver.exit_file(localserver.state_file()))
        raise errors.TeacherError(localserver.crash_line(code, log))
    except KeyboardInterrupt:
        pass
    finally:
        stops.stopping()  # a signal from here on hurries the stop, never cuts it short
        server.stop(stops.hurried)
        if recorded:
            server.forget()
    signals.exit_stopped()


def _serve_running(path: Path, n_ctx: int, stops: signals.StopOnce) -> bool:
    """What ``drag teacher serve`` does when a local teacher for ``path`` already runs:
    another serve is told of and left; the shared server that other drag commands
    started is held until Ctrl+C (as a server of serve's own would be).  False: none runs."""
    from assistant.models import localserver

    existing = localserver.running(path)
    if existing is not None:
        echo(
            f"a local teacher for {path.name} already runs at {existing.base_url} "
            f"(drag teacher serve, pid {existing.pid}); nothing started"
        )
        return True
    with localserver.holding_shared(path, n_ctx=n_ctx) as shared:
        if shared is None:
            return False
        echo(
            f"local teacher ready at {shared.base_url} (model alias {localserver.ALIAS}; "
            "the server other drag commands started, held while this runs); Ctrl+C lets it go"
        )
        try:
            while alive(shared.pid):
                time.sleep(1.0)
        except KeyboardInterrupt:
            return True
        finally:
            stops.stopping()  # letting the lease go is never cut short
    raise errors.TeacherError(f"the shared local teacher (pid {shared.pid}) stopped")
