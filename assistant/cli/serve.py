"""`drag serve`: one resident drag that other programs reach with OpenAI's chat API."""

from __future__ import annotations

import os
import sys

import click

from assistant.base import errors
from assistant.base.config import Settings
from assistant.cli.common import echo
from assistant.cli.root import cli

DEFAULT_PORT = 8778


@cli.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="0: a free one.")
@click.option(
    "--queue",
    type=int,
    default=8,
    show_default=True,
    help="Chat requests in flight or waiting; more get HTTP 429.",
)
@click.option(
    "--keep-alive",
    type=float,
    default=300.0,
    show_default=True,
    help="Seconds idle before the models are let go (0: never); the next request loads them.",
)
@click.option(
    "--allow-network",
    is_flag=True,
    help="Listen on an address other than loopback (clients still need a token).",
)
@click.option("--status", "show_status", is_flag=True, help="Say whether one runs, and exit.")
@click.option(
    "--token",
    "token_name",
    is_flag=False,
    flag_value="default",
    default=None,
    metavar="[NAME]",
    help="Print client NAME's API key (made if new; default: default), and exit.",
)
@click.pass_context
def serve(
    ctx: click.Context,
    /,
    host: str,
    port: int,
    queue: int,
    keep_alive: float,
    allow_network: bool,
    show_status: bool,
    token_name: str | None,
) -> None:
    """Keep drag running for every program on this machine: OpenAI's chat API at
    http://127.0.0.1:8778/v1 (model "drag": the DRAG pipeline; model teacher.model, or
    "local-teacher" for the embedded one: the teacher, through the privacy layer).
    Ctrl+C stops it."""
    from assistant.serve import server, tokens
    from assistant.serve.status import server_status, status_line

    if token_name is not None:
        echo(tokens.token_for(token_name))
        return
    if show_status:
        status = server_status()
        echo(status_line(status))
        sys.exit(0 if status is not None else 1)
    if not 0 <= port <= 65535:
        raise errors.InputError("--port must be between 0 and 65535")
    running = server_status()
    if running is not None:
        raise errors.InputError(f"{status_line(running)}; stop it first")
    settings: Settings = ctx.obj["settings"]
    # A setting the detector would refuse at the first request (each then an HTTP 500)
    # is said now, before the server listens: privacy.categories written by hand.
    from assistant.privacy.policy import check_categories

    check_categories(settings.privacy.categories)
    server.run(
        settings,
        host=host,
        port=port,
        queue=queue,
        allow_network=allow_network,
        announce=lambda line: echo(line),
        keep_alive=keep_alive,
    )
    # Stopped: the process ends now, as server.run asks (a request still under way in
    # another thread keeps its models; a signal during the interpreter's exit would end
    # it by that signal).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
