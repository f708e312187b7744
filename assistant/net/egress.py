"""The single point where anything leaves the machine.

Every request to the teacher -- chat completions and the reachability probe --
goes through :func:`send`.  No other module imports a network library; a test
(``tests/test_egress_boundary.py``) and a ruff rule keep it that way.

:func:`send` refuses to run without a :class:`Guard` (the privacy layer's
egress guard).  The guard judges the request twice: once on our own
serialisation before the HTTP client is called, and again inside the HTTP
client's request hook on the exact bytes about to be written to the socket.
Either refusal means nothing is sent.

What the HTTP client adds is held to the same standard: request headers are cut
to an allowlist (:data:`HEADERS`: no ``openai-organization`` or
``x-stainless-*`` machine description) and checked by the guard; redirects are
never followed (a 3xx is an error naming where it pointed); a reply is read up
to :data:`MAX_REPLY_BYTES` and within the endpoint's timeout in all, so a huge
or dripping reply is an error, not a hang.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from assistant import __version__
from assistant.base import calloff
from assistant.base.errors import (
    GuardBlocked,
    Interrupted,
    NotPassedOn,
    TeacherError,
    TeacherTimeout,
    one_line,
)
from assistant.net.loopback import is_loopback
from assistant.net.messages import (
    BodylessOnly,
    ChatReply,
    ChatRequest,
    Endpoint,
    Guard,
    ModelsReply,
    ModelsRequest,
    Recorder,
    Sent,
)

__all__ = [  # the request and reply shapes (assistant.net.messages) are named as egress.X
    "GIVEN_UP",
    "HEADERS",
    "MAX_REPLY_BYTES",
    "NO_KEY",
    "USER_AGENT",
    "BodylessOnly",
    "ChatReply",
    "ChatRequest",
    "Endpoint",
    "Guard",
    "ModelsReply",
    "ModelsRequest",
    "Recorder",
    "Sent",
    "allowed_headers",
    "send",
    "unreachable_hint",
]

if TYPE_CHECKING:  # imported when the first request is made: it costs 0.5 s at start-up
    import openai

# Local servers need no key, but the client insists on one.
NO_KEY = "no-key"
# The only request headers that leave (lower case); the HTTP client's others are dropped.
HEADERS = frozenset(
    {
        "host",
        "accept",
        "accept-encoding",
        "connection",
        "content-length",
        "content-type",
        "authorization",
        "user-agent",
    }
)
USER_AGENT = f"drag-assistant/{__version__}"
GIVEN_UP = "given up before the teacher answered: the app was closed"
# A teacher's reply is a few kB of JSON; anything much larger is refused unread.
MAX_REPLY_BYTES = 2 * 1024 * 1024


@dataclass
class _Flight:
    guard: Guard
    request: ChatRequest | ModelsRequest
    bodies: list[bytes] = field(default_factory=list)  # one per attempt that passed the guard
    before: Callable[[bytes], None] | None = None  # told of the first body before it leaves
    # A streamed reply's text as it arrives (kept when the reply breaks off or is given up).
    arrived: list[str] = field(default_factory=list)
    # Given up by the thread that asked (the app closed): no body leaves after that.
    given_up: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


_clients: dict[Endpoint, openai.OpenAI] = {}
# The send() in progress, for the HTTP client's request hook.
_in_flight: contextvars.ContextVar[_Flight | None] = contextvars.ContextVar(
    "drag_egress_in_flight", default=None
)


def allowed_headers(headers: Any) -> None:
    """Cut ``headers`` (an httpx ``Headers``) down to :data:`HEADERS`, with our user agent
    and no compressed replies (the size cap counts what is read)."""
    for name in {k.lower() for k in headers}:
        if name not in HEADERS:
            del headers[name]
    headers["user-agent"] = USER_AGENT
    headers["accept-encoding"] = "identity"


def _judge_exact_bytes(http_request: Any) -> None:
    """httpx request hook: the last look at the bytes before they reach the socket."""
    flight = _in_flight.get()
    if flight is None:
        raise GuardBlocked("a request was made outside egress.send; nothing was sent")
    allowed_headers(http_request.headers)
    body = http_request.read()
    flight.guard.check_body(body, flight.request)
    flight.guard.check_headers(
        {k.lower(): v for k, v in http_request.headers.items() if k.lower() != "authorization"},
        flight.request,
    )
    # A body counts for the ledger (its note written first) or never leaves; one given up
    # (the app closed) writes no note, which a next start would take for an upload.
    with flight.lock:
        if flight.given_up:
            raise GuardBlocked(GIVEN_UP)
        if flight.before is not None and not flight.bodies:
            try:
                flight.before(body)
            except Exception as exc:  # the ledger's note could not be written: fail closed
                raise GuardBlocked(
                    f"the upload could not be noted in the ledger before leaving "
                    f"({type(exc).__name__}: {one_line(str(exc), 160)}); nothing was sent"
                ) from None
        flight.bodies.append(body)


def _capped_stream(http: Any, stream: Any, url: str, limit: int, deadline: float) -> Any:
    """``stream`` (an httpx response stream) that stops past ``limit`` bytes or the
    ``deadline`` (time.monotonic())."""

    class Capped(http.SyncByteStream):  # type: ignore[misc]
        def __iter__(self) -> Any:
            read = 0
            for chunk in stream:
                read += len(chunk)
                if read > limit:
                    raise TeacherError(
                        f"the teacher at {url} sent a reply larger than {limit // 1024} kB; "
                        "it was not read"
                    )
                if time.monotonic() > deadline:
                    raise TeacherError(
                        f"the teacher at {url} did not finish its reply in time; "
                        "raise teacher.timeout or use a faster teacher"
                    )
                yield chunk

        def close(self) -> None:
            stream.close()

    return Capped()


def _judge_reply(endpoint: Endpoint, http: Any) -> Callable[[Any], None]:
    def hook(response: Any) -> None:
        """httpx response hook: no redirects; a bounded reply, read within the timeout."""
        if 300 <= response.status_code < 400:
            target = one_line(response.headers.get("location", "?"), 120)
            raise TeacherError(
                f"the teacher at {endpoint.base_url} answered with a redirect (HTTP "
                f"{response.status_code}) to {target!r}; drag does not follow redirects: "
                "set teacher.endpoint to the address that answers"
            )
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_REPLY_BYTES:
            raise TeacherError(
                f"the teacher at {endpoint.base_url} sent a reply larger than "
                f"{MAX_REPLY_BYTES // 1024} kB ({int(length) // 1024} kB); it was not read"
            )
        response.stream = _capped_stream(
            http,
            response.stream,
            endpoint.base_url,
            MAX_REPLY_BYTES,
            time.monotonic() + endpoint.timeout,
        )

    return hook


def _http() -> Any:
    """The HTTP library the OpenAI client is built on (httpx, or httpx2 in openai 3)."""
    import openai

    return importlib.import_module(openai.DefaultHttpxClient.__mro__[1].__module__.split(".")[0])


def _client(endpoint: Endpoint) -> openai.OpenAI:
    client = _clients.get(endpoint)
    if client is None:
        import openai

        http = _http()
        client = openai.OpenAI(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key or NO_KEY,
            timeout=endpoint.timeout,
            max_retries=endpoint.max_retries,  # exponential backoff on 408/409/429/5xx
            http_client=openai.DefaultHttpxClient(
                follow_redirects=False,
                # No proxy, .netrc or CA settings from the environment: the one
                # connection is to the teacher (an HTTP_PROXY would get the request
                # and its key).
                trust_env=False,
                event_hooks={
                    "request": [_judge_exact_bytes],
                    "response": [_judge_reply(endpoint, http)],
                },
            ),
        )
        _clients[endpoint] = client
    return client


def unreachable_hint(url: str) -> str:
    """What to do about a teacher at ``url`` that could not be reached: a server of this
    machine is started by its user (drag's own, `drag teacher serve`, listens on
    127.0.0.1 at the port asked for); one elsewhere is a matter of address and network."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not is_loopback(host):
        return "check the address and the network"
    if host in ("localhost", "127.0.0.1") and parts.scheme == "http":
        port = parts.port or 80
        return f"start the server it names (`drag teacher serve --port {port}` runs drag's own)"
    return "start the server it names"


def _failed(
    exc: openai.OpenAIError, endpoint: Endpoint, request: ChatRequest | ModelsRequest
) -> TeacherError:
    import openai

    kind = TeacherTimeout if isinstance(exc, openai.APITimeoutError) else TeacherError
    return kind(_explain(exc, endpoint, request))


def _explain(
    exc: openai.OpenAIError, endpoint: Endpoint, request: ChatRequest | ModelsRequest
) -> str:
    import openai

    url = endpoint.base_url
    if isinstance(exc, openai.APITimeoutError):
        return (
            f"the teacher at {url} did not answer within {endpoint.timeout:g} s; "
            "raise teacher.timeout or use a faster teacher"
        )
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        why = one_line(str(cause), 120)
        hint = unreachable_hint(url)
        return f"cannot reach the teacher at {url} ({why}); {hint}, or fix teacher.endpoint"
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


def send(
    endpoint: Endpoint,
    request: ChatRequest | ModelsRequest,
    guard: Guard | None,
    *,
    record: Recorder | None = None,
    before: Callable[[bytes], None] | None = None,
    on_text: Callable[[str], None] | None = None,
) -> ChatReply | ModelsReply:
    """Send one request to the teacher.  The only function that opens a connection.

    Without a guard nothing is sent; a guard's refusal is raised as GuardBlocked.
    ``before`` is given the exact body once it has passed the guard and before it
    reaches the socket (the ledger's note of an upload under way; if it raises, nothing
    is sent); ``record`` hears of every send that wrote a body, with the exact bytes,
    the reply or the error: the upload ledger.  A streamed request (``ChatRequest.stream``)
    tells ``on_text`` each piece of the reply as it arrives; if it breaks off, what had
    arrived is kept with the error (TeacherError.reply, and the ledger's row).
    """
    if guard is None:
        raise GuardBlocked("no privacy guard is in place; nothing was sent")
    body = request.payload_bytes() if isinstance(request, ChatRequest) else b""
    guard.check_body(body, request)
    client = _client(endpoint)
    flight = _Flight(guard, request, before=before)
    token = _in_flight.set(flight)
    started = time.perf_counter()
    reply: ChatReply | ModelsReply | None = None
    error: str | None = None
    call_off = calloff.current()
    try:
        if call_off is None:
            reply = _send(client, endpoint, request, on_text, flight.arrived)
        else:
            # The HTTP client cannot be woken from a read: a worker left in it held the
            # app's end until the request's timeout.  Given up, the request may go on
            # reading in its own thread; no body leaves after that (a retry).
            reply = calloff.unless_called_off(
                call_off,
                lambda: _send(client, endpoint, request, on_text, flight.arrived),
                give_up=lambda: _give_up(flight),
                said=GIVEN_UP,
            )
        return reply
    except TeacherError as exc:
        error = str(exc)
        if exc.reply and isinstance(request, ChatRequest):  # the part that arrived
            reply = ChatReply(exc.reply, None, request.model, 0, 0, 0.0)
        raise
    except Interrupted as exc:
        error = str(exc)
        arrived = "".join(flight.arrived)
        if arrived and isinstance(request, ChatRequest):
            reply = ChatReply(arrived, None, request.model, 0, 0, 0.0)
        raise
    finally:
        _in_flight.reset(token)
        if record is not None and flight.bodies and flight.bodies[-1]:
            record(
                Sent(
                    request=request,
                    body=flight.bodies[-1],
                    attempts=len(flight.bodies),
                    reply=reply,
                    error=error,
                    seconds=time.perf_counter() - started,
                )
            )


def _give_up(flight: _Flight) -> None:
    with flight.lock:
        flight.given_up = True


def _send(
    client: openai.OpenAI,
    endpoint: Endpoint,
    request: ChatRequest | ModelsRequest,
    on_text: Callable[[str], None] | None,
    arrived: list[str],
) -> ChatReply | ModelsReply:
    import openai

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
        if request.stream:
            return _streamed(completion, endpoint, request, on_text, started, arrived)
    except openai.APIConnectionError as exc:
        ours = exc.__cause__
        if isinstance(ours, GuardBlocked | TeacherError):  # raised in one of our hooks
            raise ours from None
        raise _failed(exc, endpoint, request) from None
    except openai.OpenAIError as exc:
        raise _failed(exc, endpoint, request) from None
    except ValueError as exc:  # a body that claims JSON but is cut off or broken
        raise TeacherError(
            f"the teacher at {endpoint.base_url} sent a broken reply "
            f"(invalid JSON: {one_line(str(exc), 80)}); try again"
        ) from None
    seconds = time.perf_counter() - started
    # Reading the reply gets teacher.timeout of its own, from when it arrived (a request
    # that was retried has used some of its own already).
    deadline = time.monotonic() + endpoint.timeout
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list):
        raise TeacherError(
            f"the teacher at {endpoint.base_url} did not answer with an OpenAI-style JSON reply "
            f"(got {type(completion).__name__}: {one_line(str(completion), 60)}); "
            "check that teacher.endpoint is the API's base URL (usually ending in /v1)"
        )
    if not choices:
        raise TeacherError(f"the teacher at {endpoint.base_url} returned no choices")
    # The client builds these objects without checking them: each field is read as what
    # it must be (a reply with "message": null or "choices": [1] is an error, not a crash).
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    if message is None or not isinstance(content, str | None):
        raise TeacherError(
            f"the teacher at {endpoint.base_url} sent a reply whose first choice holds "
            "no message text; try again or check teacher.endpoint"
        )
    finish = getattr(choices[0], "finish_reason", None)
    model = getattr(completion, "model", None)
    usage = getattr(completion, "usage", None)
    return ChatReply(
        text=content or "",
        finish_reason=finish if isinstance(finish, str) else None,
        model=model if isinstance(model, str) and model else request.model,
        prompt_tokens=_count(getattr(usage, "prompt_tokens", 0)),
        completion_tokens=_count(getattr(usage, "completion_tokens", 0)),
        seconds=seconds,
        deadline=deadline,
    )


def _streamed(
    chunks: Any,
    endpoint: Endpoint,
    request: ChatRequest,
    on_text: Callable[[str], None] | None,
    started: float,
    text: list[str],
) -> ChatReply:
    """Read a streamed reply (the client's chunks) into ``text``, telling ``on_text``
    each piece of text as it comes.  Each field is read as what it must be; a stream
    that breaks off is a TeacherError that keeps what had arrived."""
    import openai

    http = _http()
    finish: str | None = None
    model, used = request.model, (0, 0)
    try:
        for chunk in chunks:
            named = getattr(chunk, "model", None)
            if isinstance(named, str) and named:
                model = named
            usage = getattr(chunk, "usage", None)
            if usage is not None:
                used = (
                    _count(getattr(usage, "prompt_tokens", 0)),
                    _count(getattr(usage, "completion_tokens", 0)),
                )
            choices = getattr(chunk, "choices", None)
            if not isinstance(choices, list) or not choices:
                continue
            ended = getattr(choices[0], "finish_reason", None)
            finish = ended if isinstance(ended, str) else finish
            piece = getattr(getattr(choices[0], "delta", None), "content", None)
            if isinstance(piece, str) and piece:
                text.append(piece)
                if on_text is not None:
                    _tell(on_text, piece, text)
    except TeacherError as exc:  # the size cap, the deadline (_capped_stream), or _tell
        raise type(exc)(str(exc), reply="".join(text)) from None
    except (openai.OpenAIError, http.HTTPError, ValueError) as exc:
        raise TeacherError(
            f"the teacher at {endpoint.base_url} broke off its streamed reply "
            f"({type(exc).__name__}: {one_line(str(exc), 120)}); what it had sent is kept",
            reply="".join(text),
        ) from None
    finally:
        with contextlib.suppress(Exception):
            chunks.close()
    if finish is None:  # the events stopped before the one that ends the reply
        raise TeacherError(
            f"the teacher at {endpoint.base_url} ended its streamed reply without saying "
            "it was complete; what it had sent is kept",
            reply="".join(text),
        )
    return ChatReply(
        text="".join(text),
        finish_reason=finish,
        model=model,
        prompt_tokens=used[0],
        completion_tokens=used[1],
        seconds=time.perf_counter() - started,
        deadline=time.monotonic() + endpoint.timeout,
    )


def _tell(on_text: Callable[[str], None], piece: str, text: list[str]) -> None:
    """``on_text(piece)``; its failure ends the reply as a TeacherError that keeps what
    had arrived (the ledger's row says so, with the text)."""
    try:
        on_text(piece)
    except Exception as exc:
        raise NotPassedOn(
            f"the teacher's streamed reply could not be passed on ({type(exc).__name__}: "
            f"{one_line(str(exc), 120)}); what it had sent is kept",
            reply="".join(text),
        ) from None


def _count(value: object) -> int:
    """A token count the teacher reported, as the ledger keeps it: 0 when it is not a
    whole number a reply could hold (a string, a float, 10**30)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31:
        return value
    return 0
