"""The methods the privacy benchmark compares: this product's upload path (``full``,
with the local reader or not), Presidio's defaults, and the student's rewrite alone."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from assistant.base import config
from assistant.base.errors import GuardBlocked, PrivacyError
from assistant.core.session import Session
from assistant.drag import evidence
from assistant.models.teacher import Teacher
from assistant.net import egress
from assistant.privacy.detector import Detector
from assistant.privacy.engine import offline_email_recognizer, spacy_engine
from assistant.privacy.findings import Finding
from assistant.privacy.generalise import Generaliser
from assistant.privacy.guard import EgressGuard
from assistant.privacy.placeholders import Vault
from assistant.privacy.policy import load_policy
from assistant.privacy.reader import Reading
from assistant.privacy.review import approved
from assistant.privacy.sanitize import REWRITE_SYSTEM, sanitize
from drag_bench.privacy.datasets import Item


def evidence_request(
    question: str,
    protected: tuple[tuple[str, str], ...] = (),
    n: int = 15,
    public: tuple[str, ...] = (),
) -> egress.ChatRequest:
    """The evidence request that would carry ``question``: built by the product's own
    :func:`assistant.drag.evidence.request`, for a teacher that is never called (``public``:
    the question's coarser values, as the pipeline passes them)."""
    teacher = Teacher(
        endpoint=egress.Endpoint("http://teacher.invalid/v1"),
        model="teacher",
        structured="json_schema",
        protected=lambda: protected,
        hints=public,
    )
    return evidence.request(teacher, question, n)


def evidence_body(question: str, n: int = 15) -> bytes:
    """The exact body the evidence request would carry for ``question``."""
    return evidence_request(question, n=n).payload_bytes()


@dataclass
class Outcome:
    """What one method did with one item."""

    sent: str | None  # the outgoing body as text; None = refused, nothing sent
    seconds: dict[str, float] = field(default_factory=dict)
    changed: bool = False  # the question was altered before upload
    note: str = ""


Method = Callable[[Item], Outcome]


class RecordingGuard:
    """Passes the judgement to the real guard and keeps the last body it let through."""

    def __init__(self, guard: EgressGuard) -> None:
        self.guard = guard
        self.last: bytes | None = None

    def check_body(self, body: bytes, request: egress.ChatRequest | egress.ModelsRequest) -> None:
        self.guard.check_body(body, request)
        self.last = body

    def check_headers(
        self, headers: dict[str, str], request: egress.ChatRequest | egress.ModelsRequest
    ) -> None:
        self.guard.check_headers(headers, request)


Sender = Callable[[egress.ChatRequest, RecordingGuard], None]


def cached_reads(
    read: Callable[[str], Reading | None], path: Path, reader: str
) -> Callable[[str], Reading | None]:
    """``read`` with its readings kept in ``path`` (JSONL, one line per question and
    ``reader``, the model and how it used the grammar): a later run with the same reader
    takes them from there, so a change to the detector is measured again without the
    model's time.  A reading taken from the file keeps the seconds of the run that made
    it.  Only for the benchmark: ``drag ask`` always reads afresh."""
    known: dict[str, Reading] = {}
    if path.is_file():
        for line in path.read_text("utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:  # the last line of a run that was stopped
                continue
            known[row["key"]] = Reading(
                [Finding(**f) for f in row["findings"]],
                row["seconds"],
                row["listed"],
                row["dropped"],
                row.get("complete", False),  # a row from before the flag: not vouched
            )

    def cached(question: str) -> Reading | None:
        key = hashlib.sha256(f"{reader}\0{question}".encode()).hexdigest()
        if key in known:
            return known[key]
        reading = read(question)
        if reading is None:
            return None
        known[key] = reading
        row = {
            "key": key,
            "reader": reader,
            "findings": [dataclasses.asdict(f) for f in reading.findings],
            "seconds": reading.seconds,
            "listed": reading.listed,
            "dropped": reading.dropped,
            "complete": reading.complete,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        return reading

    return cached


def make_full(
    detector: Detector,
    rewriter: Callable[[str, str], str] | None,
    send: Sender | None = None,
    read: Callable[[str], Reading | None] | None = None,
) -> Method:
    """This product's upload path; with ``send``, each request really goes to the teacher;
    with ``read`` (:meth:`Session.read`, as ``drag ask`` calls it), the local model reads
    each question too."""
    guard = EgressGuard(detector)
    generaliser = Generaliser.from_policy(detector.policy.generalise)

    def run(item: Item) -> Outcome:
        vault = Vault(tag_of=load_policy().tag)  # one fresh session per item
        started = time.perf_counter()
        try:
            reading = read(item.text) if read is not None else None
        except PrivacyError as exc:  # fails closed: nothing is sent; its time counts too
            return Outcome(None, {"read": time.perf_counter() - started}, True, str(exc))
        san = sanitize(
            item.text,
            scanner=detector,
            vault=vault,
            guard=guard,
            rewriter=rewriter,
            rewrite="on-detection" if rewriter else "never",
            generaliser=generaliser,
            read=reading,
        )
        seconds = dict(san.stages)
        try:  # what drag ask --yes (no review) may send: the pipeline's own decision
            san = approved(san, "never", None)
        except PrivacyError as exc:
            return Outcome(None, seconds, True, str(exc))
        request = evidence_request(
            san.text, tuple(vault.values()), public=tuple(san.hints.values())
        )
        recorder = RecordingGuard(guard)
        started = time.perf_counter()
        try:
            if send is None:  # --no-teacher: judge and record, send nothing
                recorder.check_body(request.payload_bytes(), request)
            else:  # through egress.send: recorder.last ends as the bytes the HTTP hook saw
                send(request, recorder)
        except GuardBlocked as exc:
            seconds["guard"] = time.perf_counter() - started
            return Outcome(None, seconds, True, str(exc))
        seconds["guard" if send is None else "guard+upload"] = time.perf_counter() - started
        sent = recorder.last.decode("utf-8") if recorder.last is not None else None
        return Outcome(sent, seconds, san.text != item.text, san.rewrite_note)

    return run


def make_presidio_default() -> Method:
    from presidio_analyzer import AnalyzerEngine

    # Presidio's defaults (all predefined recognizers, default thresholds, default entity
    # mapping); only the spaCy model differs: en_core_web_lg cannot be installed here, so
    # both methods run on the policy's en_core_web_md.
    nlp = spacy_engine(
        {
            "nlp_engine_name": "spacy",
            "models": [{"lang_code": "en", "model_name": load_policy().model}],
        }
    )
    engine = AnalyzerEngine(nlp_engine=nlp, supported_languages=["en"])
    # One deviation: Presidio's e-mail check would download a suffix list (no traffic here).
    engine.registry.remove_recognizer("EmailRecognizer")
    engine.registry.add_recognizer(offline_email_recognizer())

    def run(item: Item) -> Outcome:
        started = time.perf_counter()
        results = engine.analyze(text=item.text, language="en")
        spans = sorted(
            {(r.start, r.end, r.entity_type) for r in results}, key=lambda s: (s[0], -s[1])
        )
        out, cursor = [], 0
        for start, end, entity in spans:
            if start < cursor:
                continue
            out += [item.text[cursor:start], f"<{entity}>"]
            cursor = end
        out.append(item.text[cursor:])
        text = "".join(out)
        return Outcome(
            evidence_body(text).decode("utf-8"),
            {"detect": time.perf_counter() - started},
            text != item.text,
        )

    return run


def make_rewrite_only(rewriter: Callable[[str, str], str]) -> Method:
    def run(item: Item) -> Outcome:
        started = time.perf_counter()
        text = rewriter(REWRITE_SYSTEM, item.text).strip() or item.text
        return Outcome(
            evidence_body(text).decode("utf-8"),
            {"rewrite": time.perf_counter() - started},
            text != item.text,
        )

    return run


def _student_rewriter() -> Callable[[str, str], str]:
    from assistant.models import modelfiles
    from assistant.models.student import Student

    settings = config.load()
    path, _spec = modelfiles.resolve(settings.student.model)
    student = Student(path, n_ctx=settings.student.n_ctx, gpu=settings.student.gpu)

    def rewrite(system: str, text: str) -> str:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": text}]
        return student.chat(messages, max_tokens=max(64, len(text) // 2)).text

    return rewrite


@contextlib.contextmanager
def _sender() -> Iterator[Sender]:
    """Send each request to the configured teacher (asking for one token: only the
    upload is measured), through egress.send and its HTTP hook."""

    with Session(config.load()) as rt:
        teacher = rt.teacher

        def to_ledger(sent: egress.Sent) -> None:
            """A real upload: it goes in the ledger like any other."""
            if teacher.ledger is not None:
                teacher.ledger(teacher.upload_of(sent), None)

        def send(request: egress.ChatRequest, guard: RecordingGuard) -> None:
            request = dataclasses.replace(
                request,
                model=teacher.model,
                max_tokens=1,
                response_format=teacher.response_format("evidence", evidence.schema(15)),
            )
            egress.send(teacher.endpoint, request, guard, record=to_ledger)

        yield send
