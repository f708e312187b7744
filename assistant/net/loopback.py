"""The one connection drag makes that is not to the teacher: to this machine's own
`drag serve`, on a loopback address, with the server's key.  It carries the user's
question as typed (the server is this user's own process: the privacy layer runs there
before anything leaves), so it never goes anywhere but a loopback address."""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import select
import socket
from collections.abc import Generator
from typing import Any
from urllib.parse import urlsplit

from assistant.base import calloff
from assistant.base.errors import DragError, Interrupted

MAX_EVENT = 64 * 1024 * 1024  # one event: an answer's whole record
GIVEN_UP = "given up before drag serve answered: the app was closed"


class Unreachable(DragError):
    """No `drag serve` answered: the caller works in-process instead."""


class Cut(DragError):
    """The server took the question, then its answer stopped."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback interface."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def peer_closed(sock: Any) -> bool:
    """Whether the client at the other end of ``sock`` (a connection to `drag serve`, its
    request read) has closed it: readable, and at its end (a next request already sent
    on it is no end); a socket that cannot be looked at is taken as closed."""
    try:
        return bool(select.select([sock], [], [], 0)[0]) and not sock.recv(1, socket.MSG_PEEK)
    except (OSError, ValueError):
        return True


def loopback_host(url: str) -> tuple[str, int]:
    """(host, port) of ``url``, which must name a loopback address; ValueError else."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme != "http" or not is_loopback(host) or parts.port is None:
        raise ValueError(f"not a loopback address: {url!r}")
    return host, parts.port


def events(
    url: str, path: str, token: str, body: dict[str, Any], timeout: float
) -> Generator[dict[str, Any], None, None]:
    """POST ``body`` to ``path`` of the server at ``url`` and read its server-sent events
    (JSON objects) as they come.  Unreachable when nothing answers there or it says no
    before the first event (an HTTP error: its message).  Called off (the app closed:
    assistant.base.calloff), the connection is shut, which ends a read at once, and
    Interrupted is raised; the server then stops working on it."""
    host, port = loopback_host(url)
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    call_off = calloff.current()
    # The socket as connected: the connection lets go of it once the reply is under way
    # (a reply without a length "passes the connection to the response").
    connected: list[socket.socket] = []

    def shut() -> None:
        for sock in connected:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    with contextlib.ExitStack() as stack:
        if call_off is not None:
            stack.enter_context(call_off.waking(shut))
        yield from _events(connection, url, path, token, body, call_off, connected)


def _events(
    connection: http.client.HTTPConnection,
    url: str,
    path: str,
    token: str,
    body: dict[str, Any],
    call_off: calloff.CallOff | None,
    connected: list[socket.socket],
) -> Generator[dict[str, Any], None, None]:
    host, port = connection.host, connection.port

    def given_up() -> None:
        if call_off is not None and call_off.is_set():
            raise Interrupted(GIVEN_UP)

    try:
        try:
            connection.connect()
            connected.append(connection.sock)
            given_up()  # set before there was a socket to shut
            payload = json.dumps(body).encode("utf-8")
            connection.request(
                "POST",
                path,
                body=payload,
                headers={
                    "Host": f"{host}:{port}" if ":" not in host else f"[{host}]:{port}",
                    "Authorization": f"Bearer {token}",
                    "Content-Type": "application/json",
                },
            )
            reply = connection.getresponse()
        except (OSError, http.client.HTTPException) as exc:  # nothing, or not an HTTP server
            given_up()
            raise Unreachable(f"drag serve at {url} did not answer ({exc})") from None
        if reply.status != 200:
            raise Unreachable(f"drag serve at {url} answered HTTP {reply.status}")
        while True:
            try:
                line = reply.readline(MAX_EVENT)
            except (OSError, http.client.HTTPException) as exc:
                given_up()
                raise Cut(f"drag serve's answer was cut ({exc})") from None
            given_up()
            if not line:
                return
            if line.startswith(b"data: "):
                try:
                    data = json.loads(line[len(b"data: ") :])
                except ValueError:
                    raise Cut("drag serve sent an event that is not JSON") from None
                if isinstance(data, dict):
                    yield data
    finally:
        connection.close()
