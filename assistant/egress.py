"""The single point where anything leaves the machine.

Every request to the teacher -- chat completions and the reachability probe --
goes through :func:`send`.  No other module imports a network library; a test
(``tests/test_egress_boundary.py``) and a ruff rule keep it that way.  The
privacy layer's egress guard belongs at the top of :func:`send`: it sees the
exact payload before any byte is written to a socket.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import openai

from assistant.errors import TeacherError, one_line

# Local servers need no key, but the client insists on one.
NO_KEY = "no-key"


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 300.0
    max_retries: int = 3


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion, exactly as it will be sent."""

    purpose: str  # "evidence", "triples", "merge" ...
    model: str
    messages: tuple[dict[str, str], ...]
    max_tokens: int
    temperature: float = 0.0
    response_format: dict[str, Any] | None = None

    def payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in self.messages],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        if self.response_format is not None:
            body["response_format"] = self.response_format
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


@dataclass(frozen=True)
class ModelsReply:
    models: tuple[str, ...]
    seconds: float


_clients: dict[Endpoint, openai.OpenAI] = {}


def _client(endpoint: Endpoint) -> openai.OpenAI:
    client = _clients.get(endpoint)
    if client is None:
        client = openai.OpenAI(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key or NO_KEY,
            timeout=endpoint.timeout,
            max_retries=endpoint.max_retries,  # exponential backoff on 408/409/429/5xx
        )
        _clients[endpoint] = client
    return client


def _explain(
    exc: openai.OpenAIError, endpoint: Endpoint, request: ChatRequest | ModelsRequest
) -> str:
    url = endpoint.base_url
    if isinstance(exc, openai.APITimeoutError):
        return (
            f"the teacher at {url} did not answer within {endpoint.timeout:g} s; "
            "raise teacher.timeout or use a faster teacher"
        )
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return (
            f"cannot reach the teacher at {url} ({one_line(str(cause), 120)}); "
            "start it (`drag teacher serve`) or fix teacher.endpoint"
        )
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return (
            f"the teacher at {url} refused the API key (HTTP {exc.status_code}); "
            "set DRAG_TEACHER_API_KEY or store a key with `drag config set-key`"
        )
    if isinstance(exc, openai.NotFoundError):
        model = getattr(request, "model", "")
        return (
            f"the teacher at {url} has no model {model!r} or no such API (HTTP 404); "
            "check teacher.model and that teacher.endpoint ends in /v1"
        )
    if isinstance(exc, openai.RateLimitError):
        return (
            f"the teacher at {url} is rate limiting (HTTP 429) after {endpoint.max_retries} "
            "retries; wait and ask again, or raise teacher.max_retries"
        )
    if isinstance(exc, openai.APIStatusError):
        detail = one_line(getattr(exc, "message", "") or str(exc), 160)
        hint = ""
        if isinstance(request, ChatRequest) and request.response_format is not None:
            hint = (
                "; if the server does not support structured output, set "
                'teacher.structured = "json_object" (llama.cpp) or "off"'
            )
        return f"the teacher at {url} failed with HTTP {exc.status_code}: {detail}{hint}"
    return f"teacher request failed: {one_line(str(exc), 200)}"


def send(endpoint: Endpoint, request: ChatRequest | ModelsRequest) -> ChatReply | ModelsReply:
    """Send one request to the teacher.  The only function that opens a connection."""
    client = _client(endpoint)
    started = time.perf_counter()
    try:
        if isinstance(request, ModelsRequest):
            listing = client.with_options(max_retries=0).models.list()
            return ModelsReply(
                models=tuple(
                    str(getattr(m, "id", m)) for m in getattr(listing, "data", None) or []
                ),
                seconds=time.perf_counter() - started,
            )
        completion = client.chat.completions.create(**request.payload())
    except openai.OpenAIError as exc:
        raise TeacherError(_explain(exc, endpoint, request)) from None
    except ValueError as exc:  # a body that claims JSON but is cut off or broken
        raise TeacherError(
            f"the teacher at {endpoint.base_url} sent a broken reply "
            f"(invalid JSON: {one_line(str(exc), 80)}); try again"
        ) from None
    seconds = time.perf_counter() - started
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list):
        raise TeacherError(
            f"the teacher at {endpoint.base_url} did not answer with an OpenAI-style JSON reply "
            f"(got {type(completion).__name__}: {one_line(str(completion), 60)}); "
            "check that teacher.endpoint is the API's base URL (usually ending in /v1)"
        )
    if not choices:
        raise TeacherError(f"the teacher at {endpoint.base_url} returned no choices")
    choice = choices[0]
    usage = completion.usage
    return ChatReply(
        text=choice.message.content or "",
        finish_reason=choice.finish_reason,
        model=completion.model or request.model,
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=usage.completion_tokens if usage else 0,
        seconds=seconds,
    )
