"""The teacher: any OpenAI-compatible endpoint, reached only through egress.send."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from assistant.base.config import TeacherSettings
from assistant.base.errors import NotPassedOn, StoreError, TeacherError
from assistant.net import egress
from assistant.net.upload import Upload


@dataclass
class CallRecord:
    purpose: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    finish_reason: str | None
    upload_id: int | None = None  # its row in the upload ledger


@dataclass
class Teacher:
    """A configured teacher plus the calls made through it."""

    endpoint: egress.Endpoint
    model: str
    structured: str  # "json_schema" | "json_object" | "off" (never "auto" here)
    max_tokens: int = 2048
    temperature: float = 0.0
    guard: egress.Guard | None = None  # None: egress refuses to send
    # The values the guard must keep from leaving (the vault's), read at each request.
    protected: Callable[[], Sequence[tuple[str, str]]] = lambda: ()
    calls: list[CallRecord] = field(default_factory=list)
    # The upload ledger: told of every request that left (and of its note, when one was
    # made), returns the row's id.
    ledger: Callable[[Upload, int | None], int] | None = None
    # The ledger's note of a request about to leave (assistant.store.ledger.begin): made
    # before its bytes reach the socket, returns the note's id; if it fails nothing leaves.
    journal: Callable[[Upload], int] | None = None
    # Entity types and counts redacted from the question being worked on (never values).
    redaction: dict[str, int] = field(default_factory=dict)
    # Values the user chose at review to send as they are, for the question being worked on.
    released: tuple[str, ...] = ()
    # Coarser values sent after placeholders ("a city in Norway"): our words, not the user's.
    hints: tuple[str, ...] = ()
    # Why a request failed when the teacher itself is gone (the local server crashed):
    # asked after a failure, None when it is not that.
    diagnose: Callable[[], str | None] | None = None

    @classmethod
    def from_settings(
        cls,
        settings: TeacherSettings,
        *,
        base_url: str,
        model: str,
        api_key: str | None,
        local: bool,
        guard: egress.Guard | None,
        protected: Callable[[], Sequence[tuple[str, str]]],
        ledger: Callable[[Upload, int | None], int] | None = None,
        journal: Callable[[Upload], int] | None = None,
        diagnose: Callable[[], str | None] | None = None,
    ) -> Teacher:
        structured = settings.structured
        if structured == "auto":
            # llama-cpp-python's server answers HTTP 500 to json_schema but enforces
            # {"type": "json_object", "schema": ...}; OpenAI, vLLM and Ollama take json_schema.
            structured = "json_object" if local else "json_schema"
        return cls(
            endpoint=egress.Endpoint(
                base_url=base_url,
                api_key=api_key,
                timeout=settings.timeout,
                # The embedded llama_cpp.server goes on writing a reply that timed out, and
                # a retry would wait behind it: the local teacher is asked once.
                max_retries=0 if local else settings.max_retries,
            ),
            model=model,
            structured=structured,
            max_tokens=settings.max_tokens,
            temperature=settings.temperature,
            guard=guard,
            protected=protected,
            ledger=ledger,
            journal=journal,
            diagnose=diagnose,
        )

    def for_question(
        self, redaction: dict[str, int], released: tuple[str, ...], hints: tuple[str, ...] = ()
    ) -> Teacher:
        """This teacher for one question: its own call list, the question's redaction
        summary, released values and coarser values (questions may be worked on at the
        same time)."""
        return replace(self, calls=[], redaction=dict(redaction), released=released, hints=hints)

    def response_format(self, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        if self.structured == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
        if self.structured == "json_object":
            return {"type": "json_object", "schema": schema}
        return None

    def request(
        self,
        purpose: str,
        system: str,
        user: str,
        schema: dict[str, Any],
        *,
        templates: Sequence[str] = (),
        public: Sequence[str] = (),
        max_tokens: int | None = None,
        prompt_version: str = "",
    ) -> egress.ChatRequest:
        """A request.  ``templates``: our prompt format strings in it; ``public``: the
        teacher's own words in it.  Both tell the egress guard what is not the user's."""
        return egress.ChatRequest(
            purpose=purpose,
            model=self.model,
            messages=({"role": "system", "content": system}, {"role": "user", "content": user}),
            max_tokens=max_tokens or self.max_tokens,
            temperature=self.temperature,
            response_format=self.response_format(purpose, schema),
            protected=tuple(self.protected()),
            templates=(system, *templates),
            public=(*public, *self.hints),
            released=self.released,
            prompt_version=prompt_version,
        )

    def upload_of(self, sent: egress.Sent) -> Upload:
        """The ledger row for what egress.send reports as sent."""
        reply = sent.reply if isinstance(sent.reply, egress.ChatReply) else None
        request = sent.request
        return Upload(
            endpoint=self.endpoint.base_url,
            model=self.model,
            purpose=request.purpose,
            prompt_version=getattr(request, "prompt_version", ""),
            request=sent.body,
            reply=reply.text if reply else None,
            status="ok" if reply and not sent.error else "error",  # a stream cut: its part
            error=sent.error,
            redaction=dict(self.redaction),
            prompt_tokens=reply.prompt_tokens if reply else 0,
            completion_tokens=reply.completion_tokens if reply else 0,
            seconds=sent.seconds,
            attempts=sent.attempts,
        )

    def complete(
        self, request: egress.ChatRequest, on_text: Callable[[str], None] | None = None
    ) -> egress.ChatReply:
        """Send ``request`` (noted first, recorded after); a streamed one tells ``on_text``
        each piece of the reply as it arrives."""
        recorded: list[int] = []
        failed: list[str] = []
        noted: list[int] = []

        def before(body: bytes) -> None:
            assert self.journal is not None
            pending = egress.Sent(request, body, 1, None, None, 0.0)
            noted.append(self.journal(self.upload_of(pending)))

        def record(sent: egress.Sent) -> None:
            assert self.ledger is not None
            try:
                recorded.append(self.ledger(self.upload_of(sent), noted[0] if noted else None))
            except Exception as exc:  # disk full, locked database: reported below
                failed.append(f"{type(exc).__name__}: {exc}")

        with self._diagnosed():
            try:
                reply = egress.send(
                    self.endpoint,
                    request,
                    self.guard,
                    record=record if self.ledger else None,
                    before=before if self.ledger and self.journal else None,
                    on_text=on_text,
                )
            except TeacherError as exc:
                if failed:  # fail closed: the ledger could not show this upload either
                    raise StoreError(
                        f"the teacher failed ({exc}), and the upload could not be written "
                        f"to the ledger ({failed[0]}); nothing more is sent",
                        reply=exc.reply,
                    ) from None
                raise
        if not isinstance(reply, egress.ChatReply):  # pragma: no cover - send's contract
            raise TeacherError("the teacher gave an unexpected reply type")
        if failed:  # fail closed: no further uploads that the ledger cannot show
            raise StoreError(
                f"the teacher answered, but the upload could not be written to the ledger "
                f"({failed[0]}); nothing more is sent",
                reply=reply.text,
            )
        self.calls.append(
            CallRecord(
                purpose=request.purpose,
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
                seconds=reply.seconds,
                finish_reason=reply.finish_reason,
                upload_id=recorded[-1] if recorded else None,
            )
        )
        return reply

    @contextlib.contextmanager
    def _diagnosed(self) -> Iterator[None]:
        """A failure because the teacher itself died is told as that (a crashed local
        server: how it died and its log), with what it had sent kept."""
        try:
            yield
        except NotPassedOn:  # its reader failed, not the teacher: nothing to look for
            raise
        except TeacherError as exc:
            crash = self.diagnose() if self.diagnose is not None else None
            if crash is None:
                raise
            raise TeacherError(crash, reply=exc.reply) from None

    def probe(self) -> tuple[str, ...]:
        with self._diagnosed():
            reply = egress.send(self.endpoint, egress.ModelsRequest(), egress.BodylessOnly())
        assert isinstance(reply, egress.ModelsReply)
        return reply.models
