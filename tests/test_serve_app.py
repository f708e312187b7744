"""Issue 50: the app asks a running `drag serve` (real server, real student, real
Presidio, the app driven by a pilot); a question that needs a review is worked in the
app, in the same conversation."""

# ruff: noqa: F811 - test_serve's fixtures, imported, are this module's arguments too

from __future__ import annotations

import os

import pytest
from textual.widgets import Input

from assistant.base import config
from assistant.core.session import Session
from assistant.serve import client
from assistant.tui.app import DragApp
from assistant.tui.chat import ChatScreen, Turn
from assistant.tui.review import ReviewModal
from tests import hostile_teacher
from tests.conftest import SocketLog
from tests.test_serve import NAME, curious, echo_env, recorded, serving_to  # noqa: F401
from tests.test_tui import wait_for

MODELS = ("detector", "reader", "embedder", "student")


def held(runtime: Session) -> list[str]:
    return [part for part in MODELS if part in runtime.__dict__]


async def ask(app: DragApp, pilot: object, question: str) -> Turn:
    chat = app.screen
    assert isinstance(chat, ChatScreen)
    await pilot.click("#question")  # type: ignore[attr-defined]
    chat.query_one("#question", Input).value = question
    await pilot.press("enter")  # type: ignore[attr-defined]
    return chat.query(Turn).last()


@pytest.mark.integration
async def test_the_app_asks_a_running_server_and_a_review_is_shown_in_the_app(
    echo_env: SocketLog,
    curious: hostile_teacher.HostileTeacher,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first question is answered by the server (the app loads no model of its own),
    the second needs a review: the app shows it, works the question itself, and goes on
    in the conversation the server began."""
    monkeypatch.setenv("DRAG_TEACHER_ENDPOINT", curious.url("evidence"))
    monkeypatch.setenv("DRAG_PRIVACY_REVIEW", "on-detection")
    monkeypatch.setenv("DRAG_PIPELINE_MODE", "evidence")
    with serving_to(echo_env) as server, recorded(server):
        app = DragApp(config.load())
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(pilot, lambda: app.status.startswith("ready"), 30)
            assert f"drag serve (pid {os.getpid()})" in app.status  # this test runs it
            first = await ask(app, pilot, "What is the boiling point of water?")
            await wait_for(pilot, lambda: first.result is not None, 180)
            assert first.result is not None and first.result.source == "teacher", first.note
            assert "student" in server.loaded()
            assert held(app.runtime) == []  # the server's models answered it
            (asked,) = server.session.store.questions()
            assert app.runtime.conversation_id == asked["conversation_id"]

            second = await ask(app, pilot, f"Where does {NAME} work?")
            await wait_for(pilot, lambda: isinstance(app.screen, ReviewModal), 180)
            await pilot.press("y")
            await wait_for(pilot, lambda: second.result is not None, 180)
            assert "detector" in held(app.runtime)  # worked here
            assert second.result is not None and second.result.source == "teacher"
    questions = server.session.store.questions()
    assert len(questions) == 2
    assert {q["conversation_id"] for q in questions} == {asked["conversation_id"]}
    sent = [s.body.decode() for s in curious.seen]
    assert any("Where does <PERSON_1> work?" in body for body in sent)
    assert not any(NAME in body for body in sent)


def test_the_app_asks_a_server_only_with_the_same_settings_and_flags_that_travel(
    echo_env: SocketLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """client.serving reads the server's record: the same settings, and only flags a
    request may carry (another student model is worked in-process)."""
    assert client.serving(config.load(), {}) is None  # no server
    with serving_to(echo_env) as server, recorded(server):
        found = client.serving(config.load(), {"store.offline": True, "pipeline.k": None})
        assert found is not None and found["url"] == server.url
        assert client.serving(config.load(), {"student.model": "other.gguf"}) is None
        monkeypatch.setenv("DRAG_STUDENT_MAX_TOKENS", "17")
        assert client.serving(config.load(), {}) is None
