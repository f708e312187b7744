"""The HTTP side of `drag serve`: OpenAI's chat API on the loopback interface.

Every request is checked in this order, and refused with an OpenAI-shaped error: its
``Host`` must be a loopback name (a web page that rebinds its own name to 127.0.0.1
gets 403), it must carry a client's token (401), a chat request's body must be a JSON
object of at most :data:`MAX_BODY` bytes (413) that :func:`proxy.parse` accepts (400),
and at most ``queue`` chat requests are in flight or waiting (429 beyond).  The models
do one request's work at a time, and stay loaded between requests.  A request waiting
for them when the server stops, or that gets them after the ledger failed, is not
started (503; on drag's own route, an error event).  ``/health``: what is loaded, and
how many requests are in flight or waiting.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import math
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from assistant.base.config import Settings
from assistant.base.errors import (
    DragError,
    InputError,
    Interrupted,
    ModelError,
    NotCovered,
    PrivacyError,
    StoreError,
    TeacherError,
    one_line,
)
from assistant.core import proxy
from assistant.core.results import AskResult
from assistant.core.session import Session
from assistant.models import localserver
from assistant.net.loopback import is_loopback, peer_closed
from assistant.serve import native, shapes, stopping, tokens, wire

MAX_BODY = 4 * 1024 * 1024
MAX_CONNECTIONS = 64  # open at once; more are closed unanswered
PORT = re.compile(r"(:[0-9]{1,5})?")
PARTS = ("detector", "reader", "student", "embedder", "teacher")


def host_name(header: str | None) -> str | None:
    """The name in a ``Host`` header, without its port (``[::1]:80`` gives ``::1``);
    None for anything else than a name or an address with an optional port."""
    value = (header or "").strip().lower()
    if value.startswith("["):
        end = value.find("]")
        name, rest = value[1:end], value[end + 1 :]
    else:
        name, _, port = value.partition(":")
        rest = f":{port}" if port or value.endswith(":") else ""
    return name if name and end_ok(rest) else None


def end_ok(rest: str) -> bool:
    return PORT.fullmatch(rest) is not None


def addressed_here(header: str | None, names: frozenset[str]) -> bool:
    """A ``Host`` this server answers: "localhost", an IP address (a page's own name
    rebound to 127.0.0.1 is neither), or a name given with --allow-network."""
    name = host_name(header)
    if name is None:
        return False
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return name == "localhost" or name in names
    return True


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(
        self,
        address: tuple[str, int],
        session: Session,
        *,
        queue: int = 8,
        hosts: tuple[str, ...] = (),
        keep_alive: float = 0.0,
    ) -> None:
        super().__init__(address, Handler)
        self.session = session
        self.keep_alive = keep_alive  # seconds idle before the models are let go; 0: never
        self.recorded = False  # run() records where it listens (tokens.state_file)
        self.noted: list[str] = []  # the loaded models the state file lists
        self.tidied = time.monotonic()  # run() applied the keeping settings
        self.last_used = time.monotonic()
        self.slots = threading.BoundedSemaphore(queue)
        self.queue = queue
        self.work = threading.Lock()
        self.hosts = frozenset(h.lower() for h in hosts)
        self.connections = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._count = threading.Lock()
        self.waiting = 0  # chat requests in flight or waiting (busy())
        # Set when the ledger could not record an upload: nothing more is sent.
        self.stopped: str | None = None
        # Set when the server stops: no request waiting for the models starts (refusal()).
        self.closing = threading.Event()
        names = [shapes.DRAG_MODEL]
        teacher = localserver.ALIAS if session.teacher_is_local else session.settings.teacher.model
        self.models = tuple(names + ([teacher] if teacher else []))
        self.settings_key = wire.settings_key(session.settings)  # a client's must match

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{name}]" if ":" in name else name
        return f"http://{shown}:{port}/v1"

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.connections.acquire(blocking=False):  # no unbounded threads
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.connections.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.connections.release()

    def refusal(self) -> tuple[str, str] | None:
        """Why a request that now has the models does not start (nothing is sent): the
        server is stopping, or the ledger failed while it waited; message, code."""
        if self.closing.is_set():
            return "drag serve is stopping; nothing was sent (ask again)", "stopping"
        if self.stopped is not None:
            return self.stopped, "ledger_failed"
        return None

    def unload_if_idle(self, now: float | None = None) -> bool:
        """After ``keep_alive`` seconds without a chat request, the models are let go:
        a new session takes the old one's place and loads each again when it is asked
        for.  Never while a request runs or waits."""
        idle = (time.monotonic() if now is None else now) - self.last_used
        due = bool(self.keep_alive) and idle >= self.keep_alive and bool(self.loaded())
        if not due or not self.work.acquire(blocking=False):
            return False
        try:
            if self.waiting:
                return False
            old, self.session = self.session, Session(self.session.settings)
        finally:
            self.work.release()
        old.close()
        self.note_loaded()
        return True

    def note_loaded(self) -> None:
        """The state file's list of loaded models, written when it changed (so that
        `drag serve --status` says what a request that was answered has loaded)."""
        held = self.loaded()
        if self.recorded and held != self.noted:
            with contextlib.suppress(OSError):
                tokens.record_state(self.url, held, self.settings_key)
                self.noted = held

    def tidy_now(self) -> None:
        """The keeping settings (ledger payloads, drafts), once an hour while it runs."""
        if time.monotonic() - self.tidied < 3600:
            return
        self.tidied = time.monotonic()
        with contextlib.suppress(DragError):
            self.session.tidy()

    def busy(self) -> int:
        """Chat requests in flight or waiting."""
        return self.waiting

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that failed outside a request's own handling (the client went
        during its headers): nothing to tell it, nothing printed."""
        return None

    def loaded(self) -> list[str]:
        return [part for part in PARTS if part in self.session.__dict__]


class _Stream:
    """A streamed reply (server-sent events), its headers sent with its first event so
    that a refusal before any text is still a plain HTTP error.  A client that goes away
    is noted: the reply under way, the teacher's or the student's, is written no further
    (what came is kept), as Ctrl+C does in-process."""

    def __init__(self, handler: Handler, ident: str, model: str) -> None:
        self.handler, self.ident, self.model = handler, ident, model
        self.started = self.gone = self.cut = False

    def event(self, data: object) -> None:
        payload = b"[DONE]" if data is None else shapes.encode(data)
        if self.gone:
            return
        try:
            if not self.started:
                self.started = True
                h = self.handler
                h.send_response(200)
                h.send_header("Content-Type", "text/event-stream")
                h.send_header("Cache-Control", "no-cache")
                h.send_header("Connection", "close")
                h.end_headers()
                h.close_connection = True
            self.handler.wfile.write(b"data: " + payload + b"\n\n")
            self.handler.wfile.flush()
        except OSError:  # the client went away
            self.gone = True

    def text(self, piece: str) -> None:
        """A piece of the answer; the first event carries the role too."""
        if piece or not self.started:
            delta = {"content": piece} if self.started else {"role": "assistant", "content": piece}
            self.event(shapes.chunk(self.ident, self.model, delta))

    def told(self, piece: str) -> None:
        """A piece of a reply, forwarded or the student's; the first after the client went
        ends it (what came is kept): neither the teacher nor the student writes for no one
        (the models are shared: the others wait)."""
        self.text(piece)
        if self.gone and not self.cut:
            self.cut = True
            raise Interrupted("the client went away before the end of the reply")

    def end(self, finish: str | None, usage: tuple[int, int] | None) -> None:
        self.event(shapes.chunk(self.ident, self.model, {}, finish or "stop"))
        if usage is not None:
            self.event(shapes.usage_chunk(self.ident, self.model, usage))
        self.event(None)


def _error_of(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """The HTTP status and OpenAI-shaped body for a failure (no traceback, no value)."""
    if isinstance(exc, proxy.NotSent):
        return 403, shapes.error(str(exc), "privacy_error", "not_sent", exc.draft)
    if isinstance(exc, PrivacyError):
        return 403, shapes.error(str(exc), "privacy_error", "not_sent")
    if isinstance(exc, InputError):
        return 400, shapes.error(str(exc), "invalid_request_error", "invalid_request")
    if isinstance(exc, TeacherError):
        return 502, shapes.error(str(exc), "teacher_error", "teacher_failed")
    if isinstance(exc, NotCovered):
        return 503, shapes.error(str(exc), "not_covered", "not_covered")
    if isinstance(exc, ModelError):
        return 500, shapes.error(str(exc), "model_error", "model_failed")
    if isinstance(exc, DragError):
        return 500, shapes.error(str(exc), "drag_error", "failed")
    return 500, shapes.error(
        f"drag serve failed ({type(exc).__name__}); the next request works",
        "server_error",
        "internal_error",
    )


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "drag-serve"
    sys_version = ""
    timeout = 60.0  # a client that sends nothing for a minute is let go
    # Headers and body are two writes: without this, the body waits for the client's
    # delayed acknowledgement (about 40 ms a reply on Linux).
    disable_nagle_algorithm = True
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        return None  # nothing of a request is logged (its path may carry a value)

    def _json(self, status: int, data: object, headers: tuple[tuple[str, str], ...] = ()) -> None:
        body = shapes.encode(data)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if status >= 400 and status != 429:  # the same request would fail the same way
            self.send_header("x-should-retry", "false")
        if self.close_connection:  # said, so that a client never sends on a closed one
            self.send_header("Connection", "close")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(body)

    def _refuse(self, status: int, message: str, kind: str, code: str) -> None:
        self.close_connection = True
        self._json(status, shapes.error(message, kind, code))

    def _client(self) -> str | None:
        """The client's name, after the Host and token checks; None: refused (answered)."""
        if not addressed_here(self.headers.get("Host"), self.server.hosts):
            self._refuse(
                403,
                "drag serve answers requests addressed to this machine's loopback names only",
                "permission_error",
                "host_not_allowed",
            )
            return None
        # Read at each request: a token made by `drag serve --token NAME` works at once.
        try:
            held = tokens.tokens()
        except DragError as exc:
            self._refuse(500, str(exc), "server_error", "tokens_unreadable")
            return None
        client = tokens.client_of(self.headers.get("Authorization"), held)
        if client is None:
            self._refuse(
                401,
                "a drag serve token is needed as the API key (drag serve --token prints it)",
                "authentication_error",
                "invalid_api_key",
            )
        return client

    def do_GET(self) -> None:
        if self._client() is None:
            return
        if self.path == "/v1/models":
            self._json(200, shapes.models(self.server.models))
        elif self.path == "/health":
            self._json(
                200, {"status": "ok", "loaded": self.server.loaded(), "busy": self.server.busy()}
            )
        else:
            self._refuse(404, f"no such path {self.path[:80]!r}", "invalid_request_error", "404")

    def do_POST(self) -> None:
        client = self._client()
        if client is None:
            return
        if self.path not in ("/v1/chat/completions", wire.PATH):
            self._refuse(404, f"no such path {self.path[:80]!r}", "invalid_request_error", "404")
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._refuse(411, "a request needs a Content-Length", "invalid_request_error", "411")
            return
        if length <= 0:
            self._refuse(400, "the request has no body", "invalid_request_error", "empty")
            return
        if length > MAX_BODY:
            self._refuse(
                413,
                f"a request body holds at most {MAX_BODY:,} bytes",
                "invalid_request_error",
                "request_too_large",
            )
            return
        try:
            body = json.loads(self.rfile.read(length).decode("utf-8"))
            limit = self.server.session.settings.pipeline.max_question_chars
            call: proxy.ChatCall | native.AskCall = (
                native.parse(body)
                if self.path == wire.PATH
                else proxy.parse(body, limit, self.server.models)
            )
        except (UnicodeDecodeError, ValueError, RecursionError, InputError) as exc:
            message = str(exc) if isinstance(exc, InputError) else "the body is not JSON"
            self._refuse(400, one_line(message), "invalid_request_error", "invalid_request")
            return
        if self.server.stopped is not None:
            self._refuse(503, self.server.stopped, "server_error", "ledger_failed")
            return
        if isinstance(call, native.AskCall):
            if client != tokens.CLI:  # a program's key never reaches the CLI's route
                self._refuse(403, "this route is drag's own CLI's", "permission_error", "cli_only")
                return
            if call.settings != self.server.settings_key:
                self._refuse(409, "other settings: work in-process", "conflict", "settings")
                return
        if not self.server.slots.acquire(blocking=False):
            self._json(
                429,
                shapes.error(
                    f"drag serve is busy: {self.server.queue} requests are in flight or "
                    "waiting (drag serve --queue); try again",
                    "rate_limit_error",
                    "busy",
                ),
                (("Retry-After", "1"),),
            )
            return
        with self.server._count:
            self.server.waiting += 1
        try:
            stream = _Stream(self, "", "drag")
            if isinstance(call, native.AskCall):  # taken: from now on it never falls back
                stream.event({"accepted": True})
            held = stopping.take_turn(self.server.work, self.server.closing)
            try:
                refused = self.server.refusal()  # never None when not held: closing
                if refused is not None:
                    told, code = refused
                    if isinstance(call, native.AskCall):  # accepted: told on its stream
                        stream.event({"error": {"kind": "DragError", "message": told}})
                        stream.event(None)
                    else:
                        self._refuse(503, told, "server_error", code)
                    return
                if isinstance(call, native.AskCall):

                    def emit(event: dict[str, Any]) -> None:
                        if "result" in event:  # before the client hears: --status next
                            self.server.note_loaded()
                        stream.event(event)
                        if stream.gone and "text" in event:  # Ctrl+C: as in-process
                            raise Interrupted("the client went away before the answer")

                    failed = native.answer(
                        self.server.session,
                        call,
                        emit,
                        lambda: not peer_closed(self.connection),
                    )
                    stream.event(None)
                    # The teacher answered and the ledger could not record it (the error
                    # holds the reply): nothing more is sent.
                    if isinstance(failed, StoreError) and failed.reply is not None:
                        self.server.stopped = (
                            f"drag serve sends nothing more: {failed}; check it with drag "
                            "audit verify, then start drag serve again"
                        )
                else:
                    self._chat(call, client)
                self.server.tidy_now()
                self.server.note_loaded()
            finally:
                if held:
                    self.server.work.release()
        finally:
            self.server.last_used = time.monotonic()
            with self.server._count:
                self.server.waiting -= 1
            self.server.slots.release()

    def _unless_gone(self, piece: str) -> None:
        """A piece of an answer not streamed: it ends once its client has gone."""
        if peer_closed(self.connection):
            raise Interrupted("the client went away before the answer")

    def _chat(self, call: proxy.ChatCall, client: str) -> None:
        ident = shapes.new_id()
        stream = _Stream(self, ident, call.model) if call.stream else None
        answered: list[bool] = []

        def finish(text: str, finish: str | None, used: tuple[int, int]) -> None:
            """The whole reply told: the rest (a drag answer's graph) does not hold it."""
            answered.append(True)
            self.server.session.wanted = None  # what follows is for the cache (the graph)
            self.server.note_loaded()  # before the client hears: it may ask --status next
            if stream is None:
                self._json(200, shapes.completion(ident, call.model, text, finish, used))
                return
            if not stream.started and text:
                stream.text(text)  # an answer that was not streamed (a cached one)
            stream.end(finish, used if call.include_usage else None)

        def done(result: AskResult) -> None:
            s = result.student
            finish(
                result.answer or "",
                "length" if s.get("finished") is False else "stop",  # cut off: said so
                (int(s.get("prompt_tokens", 0)), int(s.get("completion_tokens", 0))),
            )

        on_text = stream.told if stream is not None else None
        if stream is None and call.model == shapes.DRAG_MODEL:  # the student still stops
            on_text = self._unless_gone
        session = self.server.session  # nothing is sent for a client gone (as it waited):
        session.wanted = lambda: not peer_closed(self.connection)  # until it is told
        try:
            if call.model == shapes.DRAG_MODEL:
                result = proxy.answer(session, call, client, on_text, done)
                if not answered:
                    done(result)
            else:
                reply = proxy.forward(session, call, client, on_text)
                finish(
                    reply.text, reply.finish_reason, (reply.prompt_tokens, reply.completion_tokens)
                )
        except Exception as exc:
            if isinstance(exc, StoreError):  # the ledger failed: nothing more is sent
                self.server.stopped = (
                    f"drag serve sends nothing more: {exc}; check it with drag audit "
                    "verify, then start drag serve again"
                )
            if answered:
                return  # told already; what failed came after (the graph for the cache)
            status, body = _error_of(exc)
            if stream is not None and stream.started:
                stream.event(body)  # the stream has begun: the error is its last event
                return
            self.close_connection = True
            self._json(status, body)
        finally:
            session.wanted = None


def run(
    settings: Settings,
    *,
    host: str,
    port: int,
    queue: int,
    allow_network: bool,
    announce: Callable[[str], None],
    keep_alive: float = 300.0,
) -> None:
    """Serve until a signal; the models load with the first request that needs them.
    The caller then ends the process at once (``os._exit``, stopping.end_now): not
    through the interpreter's finalisers, which would free the models under a request
    still under way and wait for threads that no longer matter."""
    if not is_loopback(host) and not allow_network:
        shown = host or '"" (every interface)'
        raise InputError(
            f"drag serve listens on the loopback interface; {shown} needs --allow-network "
            "(every client still needs a token)"
        )
    if not 1 <= queue <= 1024:
        raise InputError("--queue must be between 1 and 1024")
    if not math.isfinite(keep_alive) or keep_alive < 0:
        raise InputError("--keep-alive must be 0 (never let go) or more seconds")
    session = Session(settings)
    try:
        try:  # the keeping settings now, then hourly (Server.tidy_now)
            session.tidy()
        except DragError as exc:
            announce(f"drag serve: warning: the keeping settings were not applied: {exc}")
        try:
            server = Server(
                (host, port),
                session,
                queue=queue,
                hosts=(host,) if allow_network else (),
                keep_alive=keep_alive,
            )
        except OSError as exc:
            raise InputError(f"drag serve cannot listen on {host}:{port}: {exc.strerror}") from None
    except BaseException:
        session.close()
        raise
    del session  # the server holds it: one it lets go when idle is then freed
    stop = threading.Event()

    def watch() -> None:  # the models let go after keep_alive idle
        while not stop.wait(min(keep_alive, 5.0)):
            with contextlib.suppress(Exception):  # tried again at the next wake
                server.unload_if_idle()

    abandoned = False
    with server, stopping.stopped_by_signals(server.shutdown) as stops:
        try:  # a signal from here on (even as it says it listens) stops it cleanly
            tokens.tokens()  # the default client's key, made before any request asks
            tokens.record_state(server.url, [], server.settings_key)
            server.recorded = True
            if allow_network and not is_loopback(host):
                announce(
                    "drag serve: warning: plain HTTP on the network: keys, questions and "
                    "answers with your values travel unencrypted"
                )
            announce(f"drag serve: listening on {server.url} (drag serve --token: the API key)")
            if keep_alive:
                threading.Thread(target=watch, name="drag-serve-idle", daemon=True).start()
            server.serve_forever(stopping.POLL)  # until a signal's thread calls shutdown
        finally:
            stops.stopping = True  # a signal from here on hurries the stop
            stop.set()
            server.closing.set()  # from now on a waiting request does not start
            with contextlib.suppress(DragError):  # a state file that cannot be read: left
                tokens.forget_state()
            # The request under way ends before the models close (ledger row and history
            # written whole); a stuck one gets a minute (another signal ends the wait),
            # then the process ends without freeing them (the next drag settles its upload).
            if not server.work.acquire(blocking=False):  # held from here on, as below
                announce(
                    "drag serve: stopping when the request under way ends (a minute at "
                    "most; stop it again to stop now)"
                )
                abandoned = not stopping.request_ended(server.work, stops.hurry)
            if abandoned:
                announce("drag serve: stopped with a request under way")
            else:
                server.session.close()
            stopping.told(server.busy, stops.hurry, 1 if abandoned else 0)  # those waiting
