"""The privacy layer on the real upload path: real Presidio, real llama.cpp student,
real llama_cpp.server teacher over loopback HTTP.  Faults are injected only into the
detector, to prove the path fails closed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from assistant.base.errors import Declined, PrivacyError
from assistant.cli import cli
from assistant.core import pipeline
from assistant.core.session import Session
from assistant.privacy.detector import Detector
from assistant.privacy.findings import Finding
from tests.conftest import SocketLog, loopback_address, use_teacher

pytestmark = pytest.mark.integration

QUESTION = (
    "Dr. Amelia Thompson (athompson93@gmail.com, phone 555-201-7734, SSN 536-22-8471) "
    "asks: what does glutamine do in amino acid metabolism?"
)
VALUES = ["Amelia", "Thompson", "athompson93", "555-201-7734", "5552017734", "536-22-8471"]


@pytest.fixture
def env(teacher_env: dict[str, str]) -> dict[str, str]:
    return {
        **teacher_env,
        "DRAG_TEACHER_MAX_TOKENS": "512",
        "DRAG_PIPELINE_N": "4",
        "DRAG_PIPELINE_K": "3",
    }


address = loopback_address


def invoke(env: dict[str, str], *args: str) -> Any:
    return CliRunner().invoke(cli, ["ask", *args], env=env, catch_exceptions=True)


def test_pii_never_reaches_the_teacher(
    env: dict[str, str], teacher_server: str, socket_guard: SocketLog
) -> None:
    socket_guard.allowed.add(address(teacher_server))
    # The placeholder path itself (the student's rewrite, when it is used, has its own tests).
    result = invoke({**env, "DRAG_PRIVACY_REWRITE": "never"}, "--json", "--yes", QUESTION)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    sent = socket_guard.sent_text()
    assert "POST /v1/chat/completions" in sent  # the bytes really went out
    for value in VALUES:
        assert value not in sent, value
    assert "<PERSON_1>" in data["privacy"]["sent_question"] and "<PERSON_1>" in sent
    assert data["privacy"]["entities"]["PERSON"] == 1 and "US_SSN" in data["privacy"]["entities"]
    assert data["answer"].strip()


class FailAfter:
    """Fault injection: the real detector for the first ``good`` calls, then an exception."""

    def __init__(self, good: int) -> None:
        self.real = Detector()
        self.left = good

    def find(self, text: str) -> list[Finding]:
        if self.left <= 0:
            raise RuntimeError("injected detector failure")
        self.left -= 1
        return self.real.find(text)


# sanitize calls the detector three times (the question, its redacted form, then the
# described form as the guard reads it); the fourth call is the egress guard's re-check.
@pytest.mark.parametrize(
    ("good", "where"),
    [(0, "detector failed"), (2, "detector failed"), (3, "privacy check failed")],
)
def test_detector_exception_sends_nothing(
    env: dict[str, str],
    teacher_server: str,
    socket_guard: SocketLog,
    monkeypatch: pytest.MonkeyPatch,
    good: int,
    where: str,
) -> None:
    """good=0: detection of the question fails; good=2: the look at the described form
    fails; good=3: the egress guard's re-check fails."""
    socket_guard.allowed.add(address(teacher_server))
    monkeypatch.setattr(Session, "detector", property(lambda self: faulty))
    faulty = FailAfter(good)
    result = invoke(env, "--yes", "--mode", "evidence", "What is glutamine?")
    assert isinstance(result.exception, PrivacyError), result.output
    assert where in str(result.exception) and "nothing was sent" in str(result.exception)
    assert socket_guard.seen == [] and socket_guard.sent == bytearray()  # not one byte


def test_review_needed_without_a_terminal_sends_nothing(
    env: dict[str, str], teacher_server: str, socket_guard: SocketLog
) -> None:
    socket_guard.allowed.add(address(teacher_server))
    result = invoke(env, QUESTION)  # privacy.review = on-detection, no terminal, no --yes
    assert isinstance(result.exception, PrivacyError)
    assert "needs your review" in str(result.exception)
    assert socket_guard.seen == []


UNREAD = "我的同事李娜在腾讯升职了，我该怎么向老板要求加薪？"


def test_text_nothing_could_read_is_never_sent_blind(
    env: dict[str, str], teacher_server: str, socket_guard: SocketLog
) -> None:
    """Issue 30, item 1: with the reader off, a question in a script the detector cannot
    read is not sent without a review: --yes (no review) refuses it in one line."""
    socket_guard.allowed.add(address(teacher_server))
    result = invoke({**env, "DRAG_PRIVACY_READER": "off"}, "--yes", UNREAD)
    assert result.exit_code != 0 and isinstance(result.exception, PrivacyError)
    message = str(result.exception)
    assert "not checked: text in CJK script" in message and "privacy.reader" in message
    assert "\n" not in message and UNREAD not in message
    assert socket_guard.seen == []


def test_text_nothing_could_read_is_reviewed_with_a_line_that_says_so(
    env: dict[str, str],
    teacher_server: str,
    socket_guard: SocketLog,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from assistant.base import config

    use_teacher({**env, "DRAG_PRIVACY_READER": "off"}, monkeypatch, socket_guard, teacher_server)
    shown: list[str] = []

    def review(sanitized: Any) -> bool:
        shown.append(sanitized.unread_line)
        return False  # the user reads it and declines

    with Session(config.load()) as runtime, pytest.raises(Declined):
        pipeline.gather(runtime, UNREAD, mode="evidence", review=review)
    assert len(shown) == 1 and shown[0].startswith("not checked: text in CJK script")
    assert socket_guard.seen == []


def test_review_is_asked_once_right_before_the_upload(
    env: dict[str, str],
    teacher_server: str,
    socket_guard: SocketLog,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from assistant.base import config

    use_teacher(env, monkeypatch, socket_guard, teacher_server)
    runtime = Session(config.load())
    asked: list[str] = []

    def review(sanitized: Any) -> bool:
        asked.append(sanitized.text)
        assert socket_guard.seen == []  # nothing left before the answer
        return True

    result = pipeline.gather(runtime, QUESTION, mode="evidence", review=review)
    assert len(asked) == 1 and asked[0] == result.privacy["sent_question"]
    assert result.source == "teacher" and socket_guard.seen


def test_a_value_kept_at_review_is_the_only_one_that_leaves(
    env: dict[str, str],
    teacher_server: str,
    socket_guard: SocketLog,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from assistant.base import config
    from assistant.store import ledger

    use_teacher({**env, "DRAG_PRIVACY_REWRITE": "never"}, monkeypatch, socket_guard, teacher_server)
    runtime = Session(config.load())
    ssn = "536-22-8471"
    result = pipeline.gather(runtime, QUESTION, mode="evidence", review=lambda s: s.keeping([ssn]))
    sent = socket_guard.sent_text()
    assert ssn in sent and ssn in result.privacy["sent_question"]
    assert all(v not in sent for v in VALUES if v != ssn)
    assert result.privacy["kept_by_user"] == {"US_SSN": 1}
    row = ledger.select(runtime.store.db)[-1]
    assert ssn.encode() in bytes(row["request"])  # the ledger shows exactly what left
    # The cache holds what was sent: the value kept at review, and no other.
    db = runtime.store.db
    cached = [str(r[0]) for r in db.execute("SELECT question FROM cache_entries")]
    cached += [str(r[0]) for r in db.execute("SELECT text FROM cache_evidence")]
    assert ssn in cached[0] and all(v not in " ".join(cached) for v in VALUES if v != ssn)
    runtime.close()


def test_two_windows_on_one_conversation_keep_each_others_placeholders() -> None:
    """Two processes answer in one conversation (the app and ``drag serve``, two
    windows): each stores the conversation's placeholders merged with what the other
    stored, never only its own, and a value both protected stays protected under its
    own placeholder."""
    from assistant.base import config

    with (
        Session(config.load()) as first,
        Session(config.load()) as second,
        Session(config.load()) as third,
    ):
        talk = first.store.new_conversation(title="shared")
        first.store.save_vault(talk, first.vault.dump())
        first.resume(talk)
        second.resume(talk)
        # Both questions in flight at once: each gave its name the first number.
        amelia = first.sanitize("Email Amelia Thompson about the rota.", rewrite=False)
        brendan = second.sanitize("Call Brendan Okafor about the rota.", rewrite=False)
        assert "<PERSON_1>" in amelia.text and "<PERSON_1>" in brendan.text
        first.keep_vault()
        second.keep_vault()
        third.resume(talk)
        assert third.vault.restore("<PERSON_1>") == "Amelia Thompson"
        assert third.vault.restore("<PERSON_2>") == "Brendan Okafor"
        assert second.vault.restore("<PERSON_2>") == "Brendan Okafor"
        assert "<PERSON_3>" in second.sanitize("Ask Chidi Eze too.", rewrite=False).text
        second.keep_vault()
        # The first window catches up before it reads its next question.
        again = first.sanitize("Did Chidi Eze answer Brendan Okafor?", rewrite=False)
        assert again.text == "Did <PERSON_3> answer <PERSON_2>?"
