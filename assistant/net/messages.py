"""What goes to the teacher and what comes back, as :mod:`assistant.net.egress` sends
and reports it: the requests, the replies, the guard's shape and the ledger's record."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from assistant.base.errors import GuardBlocked


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 300.0
    max_retries: int = 3


class Guard(Protocol):
    """Judges the exact body of a request; raises GuardBlocked to stop it."""

    def check_body(self, body: bytes, request: ChatRequest | ModelsRequest) -> None: ...

    def check_headers(
        self, headers: dict[str, str], request: ChatRequest | ModelsRequest
    ) -> None: ...


class BodylessOnly:
    """The guard for requests that carry no body (the reachability probe)."""

    def check_body(self, body: bytes, request: ChatRequest | ModelsRequest) -> None:
        if body:
            raise GuardBlocked("a request with a body needs the privacy guard; nothing was sent")

    def check_headers(self, headers: dict[str, str], request: ChatRequest | ModelsRequest) -> None:
        return None  # the allowlist is applied before any guard is asked


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion, exactly as it will be sent."""

    purpose: str  # "evidence", "triples", "merge" ...
    model: str
    messages: tuple[dict[str, str], ...]
    max_tokens: int
    temperature: float = 0.0
    response_format: dict[str, Any] | None = None
    # The reply read as it is written (server-sent events), each piece told to send()'s
    # ``on_text``; its usage asked for at the end (OpenAI's stream_options).
    stream: bool = False
    # For the guard only, never sent: values that must not leave, our own prompt texts
    # (format strings: their literal parts are ours), and text already public (the teacher's).
    protected: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    templates: tuple[str, ...] = field(default=(), repr=False)
    public: tuple[str, ...] = field(default=(), repr=False)
    # Values the user chose at review to send as they are: not protected, not flagged.
    released: tuple[str, ...] = field(default=(), repr=False)
    prompt_version: str = ""  # for the upload ledger, never sent

    def payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in self.messages],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        if self.response_format is not None:
            body["response_format"] = self.response_format
        if self.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def payload_bytes(self) -> bytes:
        """The JSON body the HTTP client will send (canonical key order)."""
        return json.dumps(self.payload(), ensure_ascii=False, sort_keys=True).encode("utf-8")


@dataclass(frozen=True)
class ModelsRequest:
    """List the endpoint's models: the reachability probe."""

    purpose: str = "probe"


@dataclass(frozen=True)
class ChatReply:
    text: str
    finish_reason: str | None
    model: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    # When reading it must be done (time.monotonic(): the request's start plus the
    # endpoint's timeout): the parsers stop there (parsing.in_time).
    deadline: float | None = None


@dataclass(frozen=True)
class ModelsReply:
    models: tuple[str, ...]
    seconds: float


@dataclass(frozen=True)
class Sent:
    """What left the machine for one send(): for the upload ledger."""

    request: ChatRequest | ModelsRequest
    body: bytes  # the exact bytes of the last attempt's body
    attempts: int  # bodies written (retries re-send the same bytes)
    reply: ChatReply | ModelsReply | None
    error: str | None
    seconds: float


Recorder = Callable[[Sent], None]
