"""The privacy proxy: another program's OpenAI chat request, sent to the teacher with
every message sanitized the way a question is, and the reply restored here.

Each request gets placeholders of its own (:meth:`Session.own_placeholders`), numbered
in the order its messages name the values: the same earlier messages give the same
placeholders, and no two requests (nor two clients) share a vault.  Nothing is sent that
would need a review (``privacy.review``) or that the reader could not read: the request
is kept as a draft instead (:class:`NotSent`).  The guard judges the exact bytes, and
the upload ledger records the request with the purpose ``proxy`` and the client's name.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assistant.base.errors import InputError, PrivacyError, TeacherError, one_line
from assistant.core import drafts, pipeline
from assistant.core.results import AskResult
from assistant.core.session import Session
from assistant.net import egress
from assistant.privacy.guard import RestoreHold
from assistant.privacy.review import Review, approved, needs_review
from assistant.privacy.sanitize import Sanitized

PURPOSE = "proxy"
ROLES = ("system", "developer", "user", "assistant")
# A message's own fields: any other ("name" carries a person's name, "tool_call_id" and
# "tool_calls" belong to tools) is refused by name.
MESSAGE_FIELDS = frozenset({"role", "content"})
MAX_MESSAGES = 200
# Fields of a chat request the proxy understands; any other is refused by name rather
# than dropped (a dropped "tools" or "response_format" would change what the client
# asked for without telling it), and none of these carries free text but the messages.
# "user" (an identifier of the client's own user) is read and never sent.
KNOWN = frozenset(
    {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "stream",
     "stream_options", "n", "user"}
)  # fmt: skip


@dataclass(frozen=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True)
class ChatCall:
    """One chat request of a client, as read (:func:`parse`)."""

    model: str
    messages: tuple[Message, ...]
    max_tokens: int | None = None
    temperature: float | None = None
    stream: bool = False
    include_usage: bool = False

    def question(self) -> str:
        """What the DRAG pipeline answers (model ``drag``): the last user message."""
        for message in reversed(self.messages):
            if message.role == "user":
                return message.content
        raise InputError("model drag answers the last user message, and there is none")

    def transcript(self) -> str:
        """The messages as a draft keeps them (``drag drafts show``)."""
        return "\n\n".join(f"[{m.role}]\n{m.content}" for m in self.messages)


class ReviewNeeded(PrivacyError):
    """A request that a review would let through, and there is no one to ask: its
    draft can be released (`drag drafts release`).  ``would_send``: the messages as
    they would leave, for `drag drafts show`."""

    def __init__(self, message: str, would_send: str | None = None) -> None:
        super().__init__(message)
        self.would_send = would_send


class NotSent(PrivacyError):
    """Nothing was sent for a privacy reason; the request is kept as a draft (its name)."""

    def __init__(self, message: str, draft: str | None) -> None:
        super().__init__(message)
        self.draft = draft


@dataclass
class Forwarded:
    """The teacher's reply, restored."""

    text: str
    model: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    sent: list[dict[str, str]] = field(default_factory=list)  # the messages as sent


def _text(content: object, where: str) -> str:
    """A message's content as one text: a string, or a list of text parts."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise InputError(f"{where}: only text parts are passed on (not {kind!r})")
            text = part.get("text")
            if not isinstance(text, str):
                raise InputError(f"{where}: a text part without text")
            parts.append(text)
        return "\n".join(parts)  # never glued: "Write to" + "Jane Doe" stays two words
    raise InputError(f"{where}: content must be a string or a list of text parts")


def _number(body: Mapping[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    try:  # an integer of 400 digits is too large for a float: not a number here
        number = float(value) if isinstance(value, int | float) else math.nan
    except OverflowError:
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise InputError(f"{name} must be a number")
    if not low <= number <= high:
        raise InputError(f"{name} must be between {low:g} and {high:g}")
    return number


def parse(body: object, max_chars: int, models: Sequence[str]) -> ChatCall:
    """A chat-completion request body (JSON already decoded), checked; InputError says
    what is wrong in one line.  ``max_chars``: the most text all messages may hold;
    ``models``: the names offered (a model's name leaves as it is: never the client's
    own words, only names this configuration gave)."""
    if not isinstance(body, dict):
        raise InputError("the request body must be a JSON object")
    unknown = sorted(set(body) - KNOWN)
    if unknown:
        raise InputError(
            f"drag does not pass on {', '.join(map(repr, unknown[:5]))}: "
            "only the messages and the sampling settings are sent"
        )
    model = body.get("model")
    if not isinstance(model, str) or model not in models:
        raise InputError(f"the models offered are {', '.join(models)} (drag serve's /v1/models)")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise InputError("messages must be a non-empty list")
    if len(raw) > MAX_MESSAGES:
        raise InputError(f"at most {MAX_MESSAGES} messages are passed on")
    messages, total = [], 0
    for i, item in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(item, dict) or item.get("role") not in ROLES:
            raise InputError(f"{where}: a message needs a role, one of {', '.join(ROLES)}")
        extra = sorted(set(item) - MESSAGE_FIELDS)
        if extra:
            raise InputError(
                f"{where}: drag does not pass on {', '.join(map(repr, extra[:5]))} "
                "(tool calls and participants' names included)"
            )
        text = _text(item.get("content"), where)
        total += len(text)
        if total > max_chars:
            raise InputError(
                f"the messages hold more than {max_chars:,} characters "
                "(pipeline.max_question_chars)"
            )
        messages.append(Message(str(item["role"]), text))
    if body.get("n", 1) != 1:
        raise InputError("n must be 1")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise InputError("stream must be true or false")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise InputError("stream_options must be an object")
    limit = _number(body, "max_completion_tokens", 1, 1_000_000)
    if limit is None:
        limit = _number(body, "max_tokens", 1, 1_000_000)
    return ChatCall(
        model=model,
        messages=tuple(messages),
        max_tokens=int(limit) if limit is not None else None,
        temperature=_number(body, "temperature", 0, 2),
        stream=stream,
        include_usage=bool(options.get("include_usage")),
    )


def release_key(call: ChatCall, client: str) -> str:
    """What a released draft matches: the same client, model and messages."""
    canonical = json.dumps(
        [client, call.model, [[m.role, m.content] for m in call.messages]], ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _refused(call: ChatCall, exc: PrivacyError, client: str, releasable: bool) -> NotSent:
    """The refusal, the request kept as a draft (sealed, as a question is)."""
    try:
        draft: str | None = drafts.keep(
            call.transcript(),
            f"{exc} (proxy, client {client})",
            release_key=release_key(call, client) if releasable else None,
            would_send=exc.would_send if isinstance(exc, ReviewNeeded) else None,
        ).stem
    except Exception:  # the refusal is told all the same
        draft = None
    if draft is None:
        where = "; it could not be kept as a draft"
    elif releasable:
        where = (
            f"; kept as draft {draft}: drag drafts show {draft} shows it, drag drafts "
            f"release {draft} lets this request through once, drag drafts rm {draft} drops it"
        )
    else:
        where = f"; kept as draft {draft} (drag drafts show {draft})"
    return NotSent(one_line(f"drag did not send this request: {exc}") + where, draft)


def _sanitized(runtime: Session, message: Message) -> Sanitized:
    reading = runtime.read(message.content) if message.content.strip() else None
    with runtime.local:
        return runtime.sanitize(message.content, reading, rewrite=False)


def _passed(call: ChatCall, client: str, policy: str, would_send: str) -> bool:
    """The review of a request with no one to ask: passed where the user released its
    draft (`drag drafts release`, once), else ReviewNeeded."""
    if drafts.take_release(release_key(call, client)):
        return True
    raise ReviewNeeded(
        f"it needs your review before it is sent (privacy.review = {policy}, or text "
        "nothing here could read)",
        would_send,
    )


def reviewer(call: ChatCall, client: str, policy: str) -> Review:
    """:func:`_passed` as the pipeline asks it, of the question as it would leave."""
    return lambda sanitized: _passed(call, client, policy, sanitized.text)


def sanitize_all(runtime: Session, call: ChatCall, client: str) -> list[Sanitized]:
    """Every message as it may be sent, in the vault of the work under way; raises
    PrivacyError where one may not be sent without a review it did not have."""
    policy = runtime.settings.privacy.review
    found = [_sanitized(runtime, message) for message in call.messages]
    if policy == "never" or not any(needs_review(policy, s) or s.unchecked for s in found):
        return [approved(s, policy, None) for s in found]  # unchecked text: never sent
    would_send = "\n\n".join(
        f"[{m.role}]\n{s.text}" for m, s in zip(call.messages, found, strict=True)
    )
    passed = _passed(call, client, policy, would_send)  # one release lets all through
    return [approved(s, policy, lambda _s: passed) for s in found]


def forward(
    runtime: Session,
    call: ChatCall,
    client: str,
    on_text: Callable[[str], None] | None = None,
) -> Forwarded:
    """Send ``call`` to the configured teacher, sanitized; the reply restored.  With
    ``on_text``, the teacher's reply is streamed and each piece told restored as it
    comes (:class:`RestoreHold`: never inside a link, never half a placeholder).

    Raises NotSent (kept as a draft) when the privacy layer keeps it here, TeacherError
    when the teacher fails (the ledger has the row), InputError for a bad request."""
    with runtime.own_placeholders() as vault:
        runtime.conversation_id = None  # a request is a conversation of its own
        try:
            sanitized = sanitize_all(runtime, call, client)
        except PrivacyError as exc:
            raise _refused(call, exc, client, isinstance(exc, ReviewNeeded)) from None
        counts: dict[str, int] = {}
        hints: list[str] = []
        for s in sanitized:
            for entity, n in s.counts.items():
                counts[entity] = counts.get(entity, 0) + n
            hints += s.hints.values()
        with runtime.local:
            teacher = runtime.teacher.for_question(counts, (), tuple(hints))
        sent = [
            {"role": m.role, "content": s.text}
            for m, s in zip(call.messages, sanitized, strict=True)
        ]
        request = egress.ChatRequest(
            purpose=f"{PURPOSE} ({client})",
            model=call.model,
            messages=tuple(sent),
            max_tokens=min(call.max_tokens or teacher.max_tokens, teacher.max_tokens),
            temperature=teacher.temperature if call.temperature is None else call.temperature,
            protected=tuple(vault.values()),
            public=tuple(hints),
            prompt_version=PURPOSE,
            stream=on_text is not None,
        )
        held = RestoreHold(on_text, vault.restore) if on_text is not None else None
        try:
            reply = teacher.complete(request, held)
        except PrivacyError as exc:  # the guard's verdict on the exact bytes
            raise _refused(call, exc, client, False) from None
        except TeacherError as exc:  # broken off: what came is told, restored
            if held is not None:
                held.flush()
            if exc.reply:
                exc.reply = vault.restore(exc.reply)
            raise
        if held is not None:
            held.flush()
        # Never inside a link's target: the teacher saw only placeholders, and a link
        # that asks for one gets it back as a placeholder (Vault.restore).
        restored = vault.restore(reply.text)
    return Forwarded(
        text=restored,
        model=reply.model,
        finish_reason=reply.finish_reason,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        sent=sent,
    )


def answer(
    runtime: Session,
    call: ChatCall,
    client: str,
    on_text: Callable[[str], None] | None,
    answered: Callable[[AskResult], None] | None = None,
) -> AskResult:
    """Model ``drag``: the DRAG pipeline answers the last user message (the cache first,
    then evidence from the teacher; the local student writes), a conversation of its own.
    A question that would need a review is not sent: NotSent, kept as a draft.
    ``answered`` hears of the answer as soon as it is written (before the graph that
    may be built for the cache after it)."""
    question = call.question()
    policy = runtime.settings.privacy.review

    def progress(stage: str, result: AskResult) -> None:
        if stage == "answered" and answered is not None:
            answered(result)

    with runtime.own_placeholders():
        runtime.conversation_id = None
        try:
            return pipeline.ask(
                runtime,
                question,
                on_text=on_text,
                review=reviewer(call, client, policy),
                progress=progress,
            )
        except PrivacyError as exc:
            raise _refused(call, exc, client, isinstance(exc, ReviewNeeded)) from None
        finally:  # its conversation is its own: the next request must not join it
            runtime.conversation_id = None
