"""Fakes for error paths a real server will not produce on demand (named as fakes)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class FakeGuardPassingAll:
    """A guard that lets every body through (where the teacher is the test's own and
    the reply, not the guard, is the subject)."""

    def check_body(self, body: bytes, request: object) -> None:
        pass

    def check_headers(self, headers: dict[str, str], request: object) -> None:
        pass


def completion(content: str, finish_reason: str = "stop") -> bytes:
    return json.dumps(
        {
            "id": "fake",
            "object": "chat.completion",
            "created": 0,
            "model": "fake",
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


@contextmanager
def fake_teacher_server(
    body: bytes,
    content_type: str = "application/json",
    on_request: Callable[[], None] = lambda: None,
) -> Iterator[str]:
    """A loopback HTTP server that answers every request with ``body`` (``on_request``
    is called once the request is read); yields its base URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            on_request()
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
