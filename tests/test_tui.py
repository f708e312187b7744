"""The Textual app, driven by pilots: real store, real config file; the ask flows use the
real llama.cpp student, the real local teacher server and real Presidio."""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable, Input, ListItem, ListView, Markdown, ProgressBar, Static

from assistant.base import config, secrets
from assistant.base.errors import PrivacyError
from assistant.core import drafts
from assistant.core.results import AskResult
from assistant.core.session import Session
from assistant.drag import answer, gate
from assistant.net.upload import Upload
from assistant.privacy.guard import EgressGuard
from assistant.store import Store, ledger
from assistant.tui.app import DragApp
from assistant.tui.chat import ChatScreen, Turn
from assistant.tui.dialogs import Confirm, NotSent
from assistant.tui.review import ReviewModal
from tests.conftest import TEST_MODEL, SocketLog, loopback_address, use_teacher
from tests.test_privacy_integration import QUESTION, VALUES, FailAfter


async def wait_for(pilot: object, condition: Callable[[], bool], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            app = getattr(pilot, "app", None)
            notes = [t.note for t in app.query(Turn)] if app is not None else []
            screen = app.screen if app is not None else None
            status = getattr(app, "status", None)
            raise AssertionError(
                f"timed out waiting in the app: screen {screen}, status {status!r}, turns {notes}"
            )
        await asyncio.sleep(0.2)


def settings_from(env: dict[str, str] | None = None) -> config.Settings:
    return config.load(env={**os.environ, **(env or {})})


async def test_first_paint_and_every_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first screen is painted, its question line focused, while the parts still
    load: they load in a worker, after the first paint.  Here the detector's load (a
    fake) waits for the test, so an app that loaded before its first paint would show
    it only once that load was over.  Then every screen."""
    released, over = threading.Event(), threading.Event()

    def fake_detector_load(runtime: Session) -> Any:
        try:
            released.wait(60)
            raise PrivacyError("the fake detector was released by the test")
        finally:
            over.set()

    monkeypatch.setattr(Session.detector, "load", fake_detector_load)
    app = DragApp(settings_from({"DRAG_STORE_OFFLINE": "1", "DRAG_STUDENT_MODEL": TEST_MODEL}))
    async with app.run_test(size=(120, 36)) as pilot:
        assert isinstance(app.screen, ChatScreen)
        assert not over.is_set(), "the first paint waited for the detector's load"
        await pilot.pause()
        assert app.screen.query_one("#question", Input).has_focus
        await pilot.press("f2")
        assert app.screen.query_one("#uploads", DataTable)
        await pilot.press("f3")
        assert app.screen.query_one("#bench-run")
        await pilot.press("f4")
        assert app.screen.query_one("#set-teacher-endpoint", Input)
        await pilot.press("f1")
        assert isinstance(app.screen, ChatScreen)
        assert not app.status.startswith("ready")
        released.set()
        await wait_for(pilot, lambda: app.status.startswith("✗ detector"), 60)


async def test_the_app_starts_and_says_so_when_the_keeping_settings_fail() -> None:
    """The keeping settings run where the app starts, in a thread: a draft that cannot be
    read (a folder where a draft should be) is a notice, and the app goes on."""
    told: list[str] = []

    class Watched(DragApp):
        CSS_PATH = str(Path(__file__).parents[1] / "assistant" / "tui" / "app.tcss")

        def notify(self, message: str, **kw: Any) -> None:
            told.append(message)
            super().notify(message, **kw)

    unreadable = drafts.unsent_dir() / "20250101T000000-3.json"
    unreadable.mkdir()
    try:
        app = Watched(settings_from(), warm=False)
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for(pilot, lambda: any("keeping settings" in m for m in told), 30)
            assert isinstance(app.screen, ChatScreen) and app.is_running
    finally:
        unreadable.rmdir()  # the drafts folder is shared by the whole test run


async def test_no_widget_on_any_screen_reads_markup() -> None:
    """Issue 30, item 7: every Static and Label on every screen and dialog shows its text
    as written (a teacher's error quoted in the benchmark's live line crashed the app with
    "[/] [@click=app.quit]click[/]").  Walks each screen's widgets; then feeds that line to
    the benchmark screen's failure path and sees it shown as written."""
    from textual.widgets import Label, Static

    from assistant.tui.dialogs import TextPrompt

    hostile = "[/] [@click=app.quit]click[/] [b]bold"
    app = DragApp(settings_from(), warm=False)
    seen: dict[str, int] = {}

    def markup_widgets() -> list[str]:
        widgets = [w for w in app.screen.query("*") if isinstance(w, Static)]
        seen[type(app.screen).__name__] = len(widgets)
        # Ours, and every plain Static or Label (Textual's own parts, such as a progress
        # bar's percentage, a select's prompt or the header's TITLE, show our constants).
        mine = [
            w
            for w in widgets
            if type(w).__module__.startswith("assistant.") or type(w) in (Static, Label)
        ]
        return [f"{type(w).__name__}#{w.id}" for w in mine if w._render_markup]

    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        for key in ("f1", "f2", "f3", "f4"):
            await pilot.press(key)
            await pilot.pause()
            assert markup_widgets() == [], type(app.screen).__name__
        await app.switch_mode("drafts")
        await pilot.pause()
        assert markup_widgets() == [], "DraftsScreen"
        for dialog in (Confirm(hostile), NotSent(hostile), TextPrompt(hostile, hostile)):
            await app.push_screen(dialog)
            await pilot.pause()
            assert markup_widgets() == [], type(dialog).__name__
            app.pop_screen()
        await pilot.press("f3")
        await pilot.pause()
        app.screen._failed(hostile)  # type: ignore[attr-defined]
        await pilot.pause()
        shown = str(app.screen.query_one("#bench-live", Static).render())
        assert hostile in shown
    assert (app.title, app.sub_title) == (DragApp.TITLE, DragApp.SUB_TITLE)
    assert set(seen) >= {
        "ChatScreen", "AuditScreen", "BenchScreen", "SettingsScreen", "DraftsScreen", "Confirm"
    }  # fmt: skip
    assert all(seen.values()), seen  # each screen had Statics to check


async def test_the_app_loads_its_parts_while_the_user_types() -> None:
    """warm=True (the default): the detector, the embedder (both side by side with the
    student) and the student load, and the student has read its system prompt ahead."""
    app = DragApp(settings_from({"DRAG_STORE_OFFLINE": "1", "DRAG_STUDENT_MODEL": TEST_MODEL}))
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.status.startswith("ready"), 120)
        loaded = app.runtime.__dict__
        assert {"detector", "embedder", "student"} <= set(loaded)
        student = loaded["student"]
        assert student._llm.n_tokens > student.count_tokens(answer.SYSTEM)


async def test_the_question_line_follows_the_status_until_its_context_is_ready() -> None:
    """While the teacher works, the question's own line says so (it used to stay at
    "checking for personal data"); once the context is ready, its badge stays."""
    from textual.containers import VerticalScroll

    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(120, 36)) as pilot:
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        turn = Turn("Why do leaves change colour?", note="… working")
        await chat.query_one("#messages", VerticalScroll).mount(turn)
        chat.questions.add(turn.question, turn)
        app.status = "asking the teacher for evidence…"
        await pilot.pause()
        assert turn.note == "… asking the teacher for evidence…"
        turn.set_note("from the teacher now · answering…")
        app.status = "the student is answering…"
        await pilot.pause()
        assert turn.note == "from the teacher now · answering…"


async def test_settings_are_validated_and_saved_to_the_cli_config() -> None:
    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("f4")
        path = app.settings.config_file
        assert path is not None
        # Saving with nothing changed writes nothing (the numbers shown are text).
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert not path.exists()
        k = app.screen.query_one("#set-pipeline-k", Input)
        k.value = "500"
        await pilot.press("ctrl+s")
        error = app.screen.query_one("#set-pipeline-k-error", Static)
        assert "above the maximum" in str(error.render())
        assert not path.exists()  # nothing saved while a field is wrong
        k.value = "7"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert config.load(config_file=path).pipeline.k == 7
        assert "pipeline.n" not in path.read_text()  # only what was changed
        assert app.settings.pipeline.k == 7  # and the app uses it


async def test_the_api_key_goes_to_the_keyring_and_nowhere_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real keyring backend (keyrings.alt's file keyring, in tmp_path): the machine
    # running the tests has no system keyring, and its own must never be touched.
    import keyring
    from keyrings.alt.file import PlaintextKeyring

    secret = "sk-test-4f8a1c9e0b7d2265"
    monkeypatch.delenv(secrets.ENV_VAR, raising=False)
    backend = PlaintextKeyring()
    backend.file_path = str(tmp_path / "keyring.cfg")
    previous = keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        app = DragApp(settings_from(), warm=False)
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.press("f4")
            field = app.screen.query_one("#set-api-key", Input)
            assert field.password  # typed as dots
            field.value = secret
            await pilot.press("ctrl+s")
            await pilot.pause()
            note = str(app.screen.query_one("#set-api-key-error", Static).render())
            assert "stored in the system keyring" in note
            assert field.value == "" and secret not in field.placeholder  # never shown again
            assert "system keyring" in field.placeholder
        assert backend.get_password(secrets.SERVICE, secrets.USERNAME) == secret
        assert secrets.api_key() == secret
        # Nowhere else: not the config file, not the database (nor its WAL).
        config_file = app.settings.config_file
        assert (
            config_file is None
            or not config_file.exists()
            or (secret not in config_file.read_text("utf-8"))
        )
        database = Path(os.environ["DRAG_STORE_DATABASE"])
        for path in database.parent.glob(database.name + "*"):
            assert secret.encode() not in path.read_bytes(), path
    finally:
        keyring.set_keyring(previous)


async def test_audit_lists_uploads_and_verify_finds_tampering() -> None:
    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as store:
        for i in range(3):
            store.record_upload(Upload("http://t/v1", "m", "evidence", "v1", b'{"q": %d}' % i, "r"))
    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f2")
        table = app.screen.query_one("#uploads", DataTable)
        assert table.row_count == 3
        await pilot.press("v")
        assert "ledger ok: 3 uploads" in str(app.screen.query_one("#verdict", Static).render())
        app.ui_store.db.execute("UPDATE uploads SET reply = 'forged' WHERE id = 2")
        await pilot.press("v")
        assert "BROKEN at #2" in str(app.screen.query_one("#verdict", Static).render())
        table.focus()
        await pilot.press("down")
        await pilot.pause()
        assert '"q": 1' in str(app.screen.query_one("#detail", Static).render())
        # "/" searches the request and reply text (the README's Audit screen).
        await pilot.press("slash")
        for key in '"q": 2':
            await pilot.press("space" if key == " " else key)
        await pilot.pause()
        assert app.screen.query_one("#audit-search", Input).value == '"q": 2'
        assert table.row_count == 1
        # "e" exports the ledger; where it cannot be written, it says so and the app
        # goes on (an OSError ended the app).
        from assistant.base import paths

        table.focus()
        await pilot.press("e")
        exported = paths.data_dir() / "ledger-export.jsonl"
        assert len(exported.read_text("utf-8").splitlines()) == 3
        exported.unlink()
        exported.mkdir()
        try:
            await pilot.press("e")
            told = [str(n.message) for n in app._notifications]
            assert told[-1].startswith(f"not exported to {exported}: Is a directory"), told
            assert app.is_running
        finally:
            exported.rmdir()


async def test_the_audit_screen_lists_an_upload_a_killed_drag_left_noted() -> None:
    from assistant.net import listeners
    from assistant.store import journal

    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as store:
        sent = Upload("http://t/v1", "m", "evidence", "v1", b'{"q": "cut off"}', None)
        journal.begin(store.db, sent, listeners.process_tag(999999999), store.sealer.mac_key)
    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f2")
        table = app.screen.query_one("#uploads", DataTable)
        assert table.row_count == 1
        table.focus()
        await pilot.pause()
        assert "may have reached the teacher" in str(
            app.screen.query_one("#detail", Static).render()
        )


async def test_the_drafts_screen_shows_releases_once_and_drops() -> None:
    """Issue 50: what drag serve kept shows what would leave; r releases it, d drops."""
    for name in list(drafts.listing()):
        drafts.remove(name["name"])
    kept = drafts.keep(
        "[user]\nWrite to Jane Doe [b]x[/b]",
        "it needs your review (proxy, client editor)",
        release_key="k1",
        would_send="[user]\nWrite to <PERSON_1> [b]x[/b]",
    ).stem
    mine = drafts.keep("What is my tax ID 123?", "not sent: declined").stem
    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await app.switch_mode("drafts")
        await pilot.pause()
        table = app.screen.query_one("#draft-list", DataTable)
        assert table.row_count == 2
        table.move_cursor(row=table.get_row_index(kept))
        await pilot.pause()
        shown = str(app.screen.query_one("#draft-text", Static).render())
        assert "Write to <PERSON_1> [b]x[/b]" in shown and "WHAT WOULD BE SENT" in shown
        await pilot.press("r")
        await pilot.pause()
        assert drafts.read(kept).get("released")
        table.move_cursor(row=table.get_row_index(mine))
        await pilot.press("r")  # a question of the user's own is asked again, not released
        await pilot.pause()
        assert not drafts.read(mine).get("released")
        shown = str(app.screen.query_one("#draft-text", Static).render())
        assert shown.splitlines()[1] == "not sent: declined"  # said once, not twice
        await pilot.press("d")  # dropped only when the user says yes: it is kept nowhere else
        await wait_for(pilot, lambda: isinstance(app.screen, Confirm), 30)
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, Confirm), 30)
        assert len(drafts.listing()) == 2 and table.row_count == 2
        assert table.cursor_row == table.get_row_index(mine)  # still the one chosen
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, Confirm), 30)
        await pilot.press("y")
        await wait_for(pilot, lambda: table.row_count == 1, 30)
        assert [r["name"] for r in drafts.listing()] == [kept]


async def test_the_conversation_list_is_searchable() -> None:
    """The README: on the left are your conversations, searchable (ctrl+f)."""
    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as store:
        for title in ("Glutamine and sleep", "Photosynthesis at night", "Glutamate vs GABA"):
            store.new_conversation(title)
    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(120, 40)) as pilot:
        listing = app.screen.query_one("#conversations", ListView)
        assert len(listing.children) == 3
        await pilot.press("ctrl+f")
        for key in "GLUTA":
            await pilot.press(key)
        await pilot.pause()
        assert app.screen.query_one("#search", Input).value == "GLUTA"
        shown = [str(item.query_one(Static).render()) for item in listing.query(ListItem)]
        assert sorted(shown) == ["Glutamate vs GABA", "Glutamine and sleep"]
        # Opening one: the right-hand panel no longer shows the last answer's context
        # (here a stand-in for it), which belonged to another conversation.
        panel = app.screen.query_one("#context-body", Static)
        panel.update("Evidence used (3 of 4): of the conversation before")
        listing.focus()
        listing.index = 0
        await pilot.press("enter")
        await pilot.pause()
        assert "of the conversation before" not in str(panel.render())


async def test_an_opened_conversation_shows_its_last_answer() -> None:
    """A conversation opened from the list shows its end, where it was left (it opened
    at its first question, the last answer out of view)."""
    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as store:
        cid = store.new_conversation("A long one")
        for i in range(12):
            store.save_question(
                conversation_id=cid,
                original=f"Question {i}?",
                sanitized=f"Question {i}?",
                answer=f"Answer {i}.\n" + "More of it.\n" * 4,
                mode="none",
                source="none",
                entry_id=None,
                uploads=[],
                record=None,
            )
    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(120, 30)) as pilot:
        listing = app.screen.query_one("#conversations", ListView)
        listing.focus()
        listing.index = 0
        await pilot.press("enter")
        from textual.containers import VerticalScroll

        messages = app.screen.query_one("#messages", VerticalScroll)
        await wait_for(pilot, lambda: len(app.screen.query(Turn)) == 12, 30)
        await wait_for(pilot, lambda: messages.max_scroll_y > 0, 30)
        await wait_for(pilot, lambda: messages.scroll_y == messages.max_scroll_y, 30)


async def test_a_new_conversation_at_any_time_keeps_the_app() -> None:
    """ctrl+n on the first screen (its welcome still shown) ended the app: the new welcome
    was mounted while the old one, with the same id, was still being removed."""
    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(3):
            await pilot.press("ctrl+n")
            await pilot.pause()
        assert app.is_running and isinstance(app.screen, ChatScreen)
        assert len(app.screen.query("#messages .welcome")) == 1


async def test_a_narrow_terminal_leaves_the_chat_room() -> None:
    """An exploratory test at 70 columns: the side panels left the chat 11 columns."""
    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(70, 20)) as pilot:
        await pilot.pause()
        assert app.screen.query_one("#main").size.width >= 30
    async with DragApp(settings_from(), warm=False).run_test(size=(140, 40)) as pilot:
        await pilot.pause()  # and a wide one keeps its panels as they were
        assert pilot.app.screen.query_one("#sidebar").outer_size.width == 28


async def test_ctrl_d_deletes_the_conversation_from_the_question_box() -> None:
    """An exploratory test: ctrl+d, shown in the footer as Delete, was taken by the question
    box (the focus, nearly always) as "delete the character right"; with no conversation
    yet it did nothing and said nothing.  Then an answered conversation asks first."""
    from assistant.privacy.placeholders import Vault

    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as store:  # as an answer leaves it
        store.save_vault(store.new_conversation("Glutamine and sleep"), Vault().dump())
    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(120, 40)) as pilot:
        box = app.screen.query_one("#question", Input)
        box.value = "What is"
        box.cursor_position = 0
        await pilot.press("ctrl+d")
        await pilot.pause()
        assert box.value == "What is"  # not a character deleted
        said = [n.message for n in app._notifications]
        assert said == ["nothing to delete yet: no answer in this one"], said
        listing = app.screen.query_one("#conversations", ListView)
        listing.focus()
        listing.index = 0
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.runtime.conversation_id is not None)
        search = app.screen.query_one("#search", Input)  # the search box keeps its ctrl+d
        search.value = "sleepy"
        search.focus()
        await pilot.pause()
        search.cursor_position = 5  # no selection: focus selects the whole value
        await pilot.press("ctrl+d")
        await pilot.pause()
        assert search.value == "sleep" and isinstance(app.screen, ChatScreen)
        box.focus()
        await pilot.press("ctrl+d")
        await pilot.pause()
        assert type(app.screen).__name__ == "Confirm"


async def test_ctrl_c_says_how_to_quit_in_plain_words() -> None:
    """An exploratory test of the app: ctrl+c's notice read "Press [b]ctrl+q[/b] to quit
    the app" (Textual's markup, shown as written by the app's plain notices)."""
    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.screen.query_one("#conversations", ListView).focus()
        await pilot.press("ctrl+c")
        await pilot.pause()
        said = [n.message for n in app._notifications]
        assert said == ["Press ctrl+q to quit the app"], said
        assert app.is_running


@pytest.fixture
def env(teacher_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    # The key is read from the environment itself, not from the settings: the app's.
    monkeypatch.setenv("DRAG_TEACHER_API_KEY", teacher_env["DRAG_TEACHER_API_KEY"])
    return {
        **teacher_env,
        "DRAG_PIPELINE_N": "4",
        "DRAG_PIPELINE_K": "3",
        "DRAG_PIPELINE_MODE": "evidence",
    }


@pytest.mark.integration
async def test_ask_review_answer(
    env: dict[str, str], teacher_server: str, socket_guard: SocketLog
) -> None:
    socket_guard.allowed.add(loopback_address(teacher_server))
    app = DragApp(settings_from(env))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.click("#question")
        app.screen.query_one("#question", Input).value = QUESTION
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewModal))
        sent_side = str(app.screen.query_one("#sanitized", Static).render())
        assert "<PERSON_1>" in sent_side and "Thompson" not in sent_side
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, ChatScreen))  # the modal is gone
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        await wait_for(pilot, lambda: chat.pending is None)
        turn = chat.query(Turn).last()
        assert turn.result is not None and turn.result.source == "teacher", turn.note
        assert turn.answer.strip()
        shown = str(chat.query_one("#context-body", Static).render())
        verb = "used" if turn.result.context_used else "offered, not used"
        assert f"Evidence {verb} (" in shown and f"Gate: {gate.describe(turn.result.gate)}" in shown
        assert app.status.startswith("ready ·")  # the status line is not left stale
        # The conversation is in the history list, and the uploads in the ledger.
        assert len(chat.query_one("#conversations").children) == 1
        rows = ledger.select(app.ui_store.db)
        assert rows and all(v.encode() not in bytes(r["request"]) for r in rows for v in VALUES)
    sent = socket_guard.sent_text()
    assert all(v not in sent for v in VALUES)


@pytest.mark.integration
async def test_the_answer_shows_in_the_app_as_it_is_written(
    env: dict[str, str],
    teacher_server: str,
    socket_guard: SocketLog,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The app draws the answer's first words before its last: each redraw of the turn
    is recorded, with whether the finished result had replaced the stream yet."""
    socket_guard.allowed.add(loopback_address(teacher_server))
    monkeypatch.setattr(ChatScreen, "STREAM_INTERVAL", 0.0)  # a redraw per piece
    drawn: list[tuple[str, bool]] = []
    add_text = Turn.add_text

    def recording(turn: Turn, piece: str) -> None:
        add_text(turn, piece)
        drawn.append((turn.answer, turn.result is not None))

    monkeypatch.setattr(Turn, "add_text", recording)
    app = DragApp(settings_from({**env, "DRAG_PIPELINE_MODE": "evidence"}))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.click("#question")
        app.screen.query_one("#question", Input).value = "What does glutamine do in the body?"
        await pilot.press("enter")
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        await wait_for(pilot, lambda: chat.pending is None, 300)
        turn = chat.query(Turn).last()
        assert turn.result is not None and turn.result.answer.strip(), turn.note
    assert len(drawn) >= 2 and not any(finished for _, finished in drawn)
    first, last = drawn[0][0], drawn[-1][0]
    assert first and len(first) < len(last) and last.startswith(first)
    assert last.strip() == turn.result.answer.strip()  # nothing to restore in this question


@pytest.mark.integration
async def test_a_question_asked_while_the_graph_is_built_waits_its_turn(
    env: dict[str, str],
    teacher_server: str,
    socket_guard: SocketLog,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the graph built after the answer, the next question may be typed as soon as
    the answer is complete: it waits for that graph, then runs. One waits at a time."""
    from assistant.core import pipeline

    socket_guard.allowed.add(loopback_address(teacher_server))
    gate = threading.Event()  # holds the first question's graph until the test lets go
    real_graph_later = pipeline._graph_later

    def held(*args: Any, **kwargs: Any) -> None:
        gate.wait(120)
        real_graph_later(*args, **kwargs)

    monkeypatch.setattr(pipeline, "_graph_later", held)
    after = {"DRAG_PIPELINE_MODE": "combined", "DRAG_PIPELINE_GRAPH_TIMING": "after-answer"}
    app = DragApp(settings_from({**env, **after}), warm=False)
    async with app.run_test(size=(140, 40)) as pilot:
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        question = chat.query_one("#question", Input)
        try:
            question.value = "What is photosynthesis?"
            await pilot.press("enter")
            await wait_for(pilot, lambda: chat.questions.answered)
            first = chat.query(Turn).last()
            assert "building the graph" in first.note and first.answer.strip()
            question.value = "What is osmosis?"
            await pilot.press("enter")
            second = chat.query(Turn).last()
            assert second is not first and "asked once" in second.note
            question.value = "What is diffusion?"  # a third waits for its own turn
            await pilot.press("enter")
            assert len(list(chat.query(Turn))) == 2 and question.value == "What is diffusion?"
        finally:
            gate.set()  # never leave the worker waiting
        await wait_for(pilot, lambda: chat.pending is None and second.result is not None)
        assert first.result is not None and first.result.source == "teacher"
        assert second.answer.strip()


@pytest.mark.integration
async def test_declined_and_blocked_uploads_keep_the_question(
    env: dict[str, str],
    teacher_server: str,
    socket_guard: SocketLog,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    socket_guard.allowed.add(loopback_address(teacher_server))
    app = DragApp(settings_from(env), warm=False)
    async with app.run_test(size=(140, 40)) as pilot:
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        before = set(drafts.unsent_dir().iterdir())
        chat.query_one("#question", Input).value = QUESTION
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewModal))
        await pilot.press("n")  # declined
        await wait_for(pilot, lambda: chat.pending is None)
        assert "you declined" in chat.query(Turn).last().note
        # ... and the question is back in the box, to be edited and asked again.
        assert chat.query_one("#question", Input).value == QUESTION
        # The guard's own re-check fails (sanitize looks three times first): nothing is
        # sent, the app says why.
        faulty = FailAfter(3)
        guard = EgressGuard(faulty, timeout=10.0)
        monkeypatch.setattr(Session, "detector", property(lambda self: faulty))
        monkeypatch.setattr(Session, "guard", property(lambda self: guard))
        chat.query_one("#question", Input).value = "What is glutamine?"
        await pilot.press("enter")
        await wait_for(pilot, lambda: chat.pending is None)
        note = chat.query(Turn).last().note
        assert "nothing was sent" in note and "kept in" in note
        # A refusal is not only a line in the chat: a window says why.
        await wait_for(pilot, lambda: isinstance(app.screen, NotSent))
        reason = str(app.screen.query_one("#not-sent-reason", Static).render())
        assert "privacy check failed" in reason and "kept in" in reason
        await pilot.press("enter")
        assert app.screen is chat
        assert len(set(drafts.unsent_dir().iterdir()) - before) == 2
    assert socket_guard.sent == bytearray()  # not one byte in either case


def fake_fault(fault: Exception) -> Callable[..., object]:
    """A fake in place of the app's work: it raises ``fault`` (a fault of ours)."""

    def raising(*args: object, **kwargs: object) -> object:
        raise fault

    return raising


async def test_a_question_answered_before_its_graph_failed_is_not_put_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A failed question goes back in the box, but not one whose answer was written
    before the graph built after it failed (the review of the put-back).  The pipeline
    is a fake: it tells the app the answer is complete, then fails."""
    from assistant.base.errors import TeacherError
    from assistant.tui import chat as chat_module

    def fake_pipeline_ask(rt: Any, question: str, *, progress: Any, **kw: Any) -> AskResult:
        result = AskResult(question, "evidence", 4, 4, answer="an answer", source="teacher")
        progress("graph", result)  # answered; the graph is built after the answer
        raise TeacherError("the teacher went away while the graph was built")

    monkeypatch.setattr(chat_module.pipeline, "ask", fake_pipeline_ask)
    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(140, 40)) as pilot:
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        chat.query_one("#question", Input).value = "What is photosynthesis?"
        await pilot.press("enter")
        await wait_for(pilot, lambda: chat.pending is None and "✗" in chat.query(Turn).last().note)
        assert chat.query_one("#question", Input).value == ""


async def test_a_fault_of_ours_while_answering_is_a_line_and_the_app_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not a DragError (a bug, a reply of a shape no check foresaw): the turn says so,
    the question is kept, and the next question is answered (before, the worker's error
    ended the app with a traceback).  The fault is a fake raised in place of the
    pipeline's work; what is judged is the app's handling of it."""
    from assistant.tui import chat as chat_module

    fault = AttributeError("'NoneType' object has no attribute 'content'")
    monkeypatch.setattr(chat_module.pipeline, "ask", fake_fault(fault))
    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(140, 40)) as pilot:
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        before = set(drafts.unsent_dir().iterdir())
        for question in ("What is glutamine?", "And arginine?"):
            chat.query_one("#question", Input).value = question
            await pilot.press("enter")
            await wait_for(
                pilot, lambda: chat.pending is None and "✗" in chat.query(Turn).last().note
            )
            note = chat.query(Turn).last().note
            assert "internal error: AttributeError" in note and "kept in drag drafts" in note
            assert chat.query_one("#question", Input).value == question  # to ask again
        assert app.is_running and app.screen is chat
        assert len(set(drafts.unsent_dir().iterdir()) - before) == 2


async def test_the_app_quits_while_a_model_is_still_loading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Closing joins the threads that load the models; one that reported its status to
    the app then (call_from_thread: it waits for the app, which waited for it) hung the
    quit for good.  A fake loader reports once the close has begun."""
    closing = threading.Event()
    close = Session.close

    def signalling_close(self: Session) -> None:
        closing.set()
        close(self)

    monkeypatch.setattr(Session, "close", signalling_close)
    app = DragApp(settings_from(), warm=False)
    fake_loader = threading.Thread(
        target=lambda: closing.wait(30) and app.report("loading the student model…")
    )
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        app.runtime._loaders.append(fake_loader)
        fake_loader.start()
    fake_loader.join(5)
    assert closing.is_set() and not fake_loader.is_alive()


async def test_the_chat_follows_a_new_question_to_its_last_line() -> None:
    """An exploratory test of the app: below earlier turns, a new answer showed its first
    line only, and a refusal ("the question is 10,000 characters long…") was written out
    of sight, so that nothing seemed to happen.  A user who scrolls up is left there."""
    from textual.containers import VerticalScroll

    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(100, 30)) as pilot:
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        messages = chat.query_one("#messages", VerticalScroll)
        for n in range(12):
            messages.mount(Turn(f"Question {n}?", "An answer.\n" * 4, "◇ teacher"))
        await pilot.pause()
        messages.scroll_home(animate=False)
        await wait_for(pilot, lambda: messages.scroll_y == 0)
        chat.query_one("#question", Input).value = "x " * 5000
        await pilot.press("enter")
        await wait_for(pilot, lambda: chat.pending is None and "✗" in chat.query(Turn).last().note)
        last = chat.query(Turn).last()
        assert "characters long" in last.note
        await wait_for(
            pilot,
            lambda: (
                messages.max_scroll_y > 0
                and messages.scroll_y == messages.max_scroll_y
                and last.region.bottom <= messages.region.bottom
            ),
            30,
        )
        # At the end, what is written there is followed (the refusal above may come
        # before the question's own scroll; this does not).
        before = messages.max_scroll_y
        last.set_note("✗ a longer note\n" * 30, True)
        await wait_for(
            pilot,
            lambda: messages.max_scroll_y > before and messages.scroll_y == messages.max_scroll_y,
            30,
        )
        # Scrolled up to read: what is written at the end leaves the view where it is.
        messages.scroll_home(animate=False)
        await wait_for(pilot, lambda: messages.scroll_y == 0)
        last.set_note("✗ a note longer still\n" * 40, True)
        await pilot.pause()
        await pilot.pause()
        assert messages.scroll_y == 0


async def test_a_question_keeps_the_mode_it_was_asked_in_while_it_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 47, item 10: a files-mode question asked while the last answer's graph was
    built, then ctrl+l back to teacher mode, went to the teacher.  The mode is fixed when
    the question is asked.  The pipeline and the files path are fakes that record which
    ran; the first holds its graph until the test lets go."""
    from assistant.tui import chat as chat_module

    ran: list[tuple[str, str]] = []
    graph_held = threading.Event()

    def fake_pipeline_ask(rt: Any, question: str, *, progress: Any, **kw: Any) -> AskResult:
        ran.append(("teacher", question))
        result = AskResult(question, "evidence", 4, 4, answer="an answer", source="teacher")
        progress("graph", result)  # answered; the graph is built after the answer
        graph_held.wait(60)
        return result

    def fake_ask_files(rt: Any, question: str, **kw: Any) -> AskResult:
        ran.append(("files", question))
        return AskResult(question, "none", 5, 5, answer="from files", source="files")

    monkeypatch.setattr(chat_module.pipeline, "ask", fake_pipeline_ask)
    monkeypatch.setattr(chat_module.localfiles, "ask_files", fake_ask_files)
    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(140, 40)) as pilot:
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        try:
            chat.query_one("#question", Input).value = "What is photosynthesis?"
            await pilot.press("enter")
            await wait_for(pilot, lambda: chat.questions.answered)
            await pilot.press("ctrl+l")  # files mode on, and the question box says so
            box = chat.query_one("#question", Input)
            assert "Ask your files" in box.placeholder and box.has_class("files-mode")
            box.value = "Where is the noodle bar?"
            await pilot.press("enter")
            waiting = chat.query(Turn).last()
            assert "asked (from your files) once" in waiting.note
            await pilot.press("ctrl+l")  # and off again while it waits
            assert not chat.from_files
            assert "Ask your files" not in box.placeholder and not box.has_class("files-mode")
        finally:
            graph_held.set()
        await wait_for(pilot, lambda: chat.pending is None and waiting.result is not None)
    assert ran == [("teacher", "What is photosynthesis?"), ("files", "Where is the noodle bar?")]


async def test_a_fault_of_ours_while_indexing_is_a_notice_and_the_app_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As for a question: the fault is a fake raised in place of the indexing work."""
    from assistant.tui import chat as chat_module

    fault = RecursionError("maximum recursion depth exceeded")
    monkeypatch.setattr(chat_module.localfiles, "index", fake_fault(fault))
    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(140, 40)) as pilot:
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        chat._index([Path("notes")])
        told = lambda: [str(n.message) for n in app._notifications]  # noqa: E731
        await wait_for(pilot, lambda: any("not indexed" in m for m in told()))
        assert any("internal error: RecursionError" in m for m in told())
        assert app.is_running and app.screen is chat


async def test_review_modal_says_what_nothing_could_read() -> None:
    """Issue 30, item 1: the review of a question in a script the detector cannot read
    (the reader off) says so in its own line; a question it could read has no such line."""
    from textual.app import App

    from assistant.privacy.detector import Detector
    from assistant.privacy.placeholders import Vault
    from assistant.privacy.policy import load_policy
    from assistant.privacy.sanitize import sanitize

    detector = Detector()
    cases = (("내 친구 김민수에게 생일 선물로 뭘 줄까?", True), ("Is tea bad?", False))
    for question, unread in cases:
        shown = sanitize(
            question,
            scanner=detector,
            vault=Vault(tag_of=load_policy().tag),
            guard=EgressGuard(detector),
        )

        class Host(App[None]):
            def on_mount(self) -> None:
                self.push_screen(ReviewModal(shown))  # noqa: B023 - used at once

        app = Host()
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.pause()
            lines = app.screen.query("#unread")
            if unread:
                text = str(lines.only_one(Static).render())
                assert text.startswith("not checked: text in HANGUL script"), text
            else:
                assert len(lines) == 0


async def test_review_modal_shows_what_is_sent_on_a_short_terminal() -> None:
    """An exploratory test at 20 rows: both sides shrank to a border line and the buttons
    were cut off, while y still sent.  The sides keep their height, the dialog scrolls to
    its buttons, and it opens on what is sent."""
    from textual.app import App
    from textual.widget import Widget

    from assistant.privacy.detector import Detector
    from assistant.privacy.placeholders import Vault
    from assistant.privacy.policy import load_policy
    from assistant.privacy.sanitize import sanitize
    from assistant.tui import app as styled

    detector = Detector()
    question = "My neighbour Tomasz Wierzbicki in Gdynia wants to appeal a parking fine."
    vault = Vault(tag_of=load_policy().tag)
    shown = sanitize(question, scanner=detector, vault=vault, guard=EgressGuard(detector))

    class Host(App[None]):
        CSS_PATH = Path(styled.__file__).with_name("app.tcss")  # the app's own style

        def on_mount(self) -> None:
            self.push_screen(ReviewModal(shown))

    app = Host()
    async with app.run_test(size=(70, 20)) as pilot:
        await pilot.pause()
        review = app.screen.query_one("#review")
        sent = app.screen.query_one("#sanitized", Static)
        side = sent.parent
        assert isinstance(side, Widget)
        shown_rows = sent.region.intersection(side.content_region).intersection(review.region)
        assert shown_rows.height >= 3, (sent.region, side.content_region, review.region)
        app.screen.query_one("#send").scroll_visible(animate=False)
        await pilot.pause()
        assert app.screen.query_one("#send").region.bottom <= review.region.bottom


async def test_review_modal_keeps_a_value_only_when_the_user_says_so() -> None:
    """The modal on its own (no models): toggling an entity shows the exact text to be
    sent, and the verdict carries the choice."""
    from textual.app import App
    from textual.widgets import SelectionList

    from assistant.privacy.detector import Detector
    from assistant.privacy.placeholders import Vault
    from assistant.privacy.policy import load_policy
    from assistant.privacy.sanitize import sanitize

    detector = Detector()
    question = "Did Marie Curie write to Dr. Amelia Thompson about radium?"
    shown = sanitize(
        question,
        scanner=detector,
        vault=Vault(tag_of=load_policy().tag),
        guard=EgressGuard(detector),
    )
    verdicts: list[object] = []

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(ReviewModal(shown), verdicts.append)

    app = Host()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        sent = app.screen.query_one("#sanitized", Static)
        assert "Marie Curie" not in str(sent.render())
        entities = app.screen.query_one("#entities", SelectionList)
        assert entities.option_count == 2
        curie = next(
            i
            for i in range(entities.option_count)
            if "Marie Curie" in str(entities.get_option_at_index(i).prompt)
        )
        entities.focus()
        entities.highlighted = curie
        await pilot.press("space")
        await pilot.pause()
        assert "Marie Curie" in str(sent.render()) and "Thompson" not in str(sent.render())
        # Each line says what is sent for its value now: the kept one as it is.
        rows = [str(entities.get_option_at_index(i).prompt) for i in range(2)]
        assert rows[curie].endswith("→ sent as it is") and "<PERSON_" not in rows[curie]
        assert "→ <PERSON_" in rows[1 - curie]
        await pilot.press("y")
        await pilot.pause()
    assert len(verdicts) == 1
    verdict = verdicts[0]
    assert not isinstance(verdict, bool) and verdict.released == ("Marie Curie",)
    # Esc declines, as n does (the README): the verdict is no, nothing to send.
    app = Host()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        app.screen.query_one("#entities", SelectionList).focus()
        await pilot.press("escape")
        await pilot.pause()
    assert verdicts[1:] == [False]


async def test_bench_screen_runs_the_privacy_benchmark() -> None:
    """Real Presidio, the bundled set, no teacher: progress, then the table and the bars."""
    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("f3")
        app.screen.query_one("#bench-limit", Input).value = "abc"
        await pilot.press("ctrl+b")
        assert app.screen.query_one("#bench-progress").display is False  # refused, not run
        app.screen.query_one("#bench-limit", Input).value = "4"
        await pilot.press("ctrl+b")
        screen = app.screen
        await wait_for(pilot, lambda: not screen.query_one("#bench-run").disabled, 180)
        live = str(screen.query_one("#bench-live", Static).render())
        assert "finished: 5 items × 2 methods" in live  # 4 questions + 1 control
        bar = screen.query_one("#bench-progress", ProgressBar)
        assert bar.progress == bar.total == 10  # the progress followed every item
        table = screen.query_one("#bench-table", Markdown).source
        assert "4 questions with personal data and 1 without (controls)" in table
        plot = str(screen.query_one("#bench-plot", Static).render())
        assert "full" in plot and "presidio-default" in plot and "%" in plot


@pytest.mark.integration
async def test_bench_screen_runs_the_accuracy_benchmark(
    env: dict[str, str],
    teacher_server: str,
    socket_guard: SocketLog,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Real teacher server and student: two questions, the table and the bars appear."""
    from textual.widgets import Markdown, Select

    use_teacher(env, monkeypatch, socket_guard, teacher_server)
    app = DragApp(settings_from(env), warm=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("f3")
        screen = app.screen
        screen.query_one("#bench-kind", Select).value = "accuracy"
        await pilot.pause()
        assert screen.query_one("#bench-limit", Input).value == "10"
        screen.query_one("#bench-limit", Input).value = "2"
        await pilot.press("ctrl+b")
        await wait_for(pilot, lambda: not screen.query_one("#bench-run").disabled, 300)
        table = screen.query_one("#bench-table", Markdown).source
        assert "| none | evidence K=5 |" in table, screen.query_one("#bench-live", Static).render()
        plot = str(screen.query_one("#bench-plot", Static).render())
        assert plot.startswith("Accuracy by context mode and K:\n"), plot
        lines = plot.splitlines()
        header = lines.index("evidence K=10")  # a group per column, then a bar per student
        assert re.search(r" [█▏]+ \d+\.\d%$", lines[header + 1]), plot
    assert ledger.select(Store(Path(os.environ["DRAG_STORE_DATABASE"])).db)  # it went out


# --- pasted text (assistant.tui.paste) -------------------------------------------------


async def test_a_pasted_text_keeps_its_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exploratory test: a paste of several lines into the question box kept the first
    line only (Textual's Input), and the rest of a pasted e-mail was lost.  Its line
    breaks show as ␤ and are asked as line breaks; a failed question goes back so.  The
    pipeline is a fake that records the question and fails."""
    from textual import events

    from assistant.base.errors import TeacherError
    from assistant.tui import chat as chat_module

    asked: list[str] = []

    def fake_pipeline_ask(rt: Any, question: str, **kw: Any) -> AskResult:
        asked.append(question)
        raise TeacherError("the teacher is away")

    monkeypatch.setattr(chat_module.pipeline, "ask", fake_pipeline_ask)
    app = DragApp(settings_from(), warm=False)
    async with app.run_test(size=(140, 40)) as pilot:
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        box = chat.query_one("#question", Input)
        box.post_message(events.Paste("Correct this email:\nDear Anna,\r\nthe invoice is late."))
        await pilot.pause()
        assert box.value == "Correct this email:␤Dear Anna,␤the invoice is late."
        await pilot.press("enter")
        await wait_for(pilot, lambda: chat.pending is None and "✗" in chat.query(Turn).last().note)
        assert asked == ["Correct this email:\nDear Anna,\nthe invoice is late."]
        assert box.value == "Correct this email:␤Dear Anna,␤the invoice is late."


def test_a_paste_loses_its_escape_characters_and_nothing_else() -> None:
    """Pure logic: between a paste's markers the escape characters go, across reads (an
    end marker cut in two is held); outside a paste nothing is held, a lone Escape key
    included."""
    from assistant.tui.paste import END, START, PasteFilter

    pasted = PasteFilter()
    assert pasted("\x1b") == "\x1b"  # the Escape key, at once
    assert pasted(f"{START}P1 \x1b[2J P2\nP3{END}x") == f"{START}P1 [2J P2\nP3{END}x"
    cut = PasteFilter()
    shown = [cut(f"{START}a\x1b[31mb"), cut("\x1b[20"), cut("1~rest"), cut("\x1b")]
    assert shown == [f"{START}a[31mb", "", f"{END}rest", "\x1b"]
    held = PasteFilter()
    assert held(f"{START}a\x1b[20") == f"{START}a" and held.flush() == "\x1b[20"
    # The start marker cut by a read (a review of the filter): held from "ESC [ 2" on.
    split = PasteFilter()
    shown = [split("ab\x1b[2"), split(f"00~P1 \x1b[2J P2\rP3{END}")]
    assert shown == ["ab", f"{START}P1 [2J P2\rP3{END}"]
    assert [PasteFilter()("\x1b["), PasteFilter()("x\x1b")] == ["\x1b[", "x\x1b"]  # alt+[


async def test_a_kill_ends_the_app_as_quitting_does() -> None:
    """SIGTERM killed the app at once (the terminal left in its screen, the question
    lost: tests/test_tui_tmux.py shows both, and a closed terminal's SIGHUP); it ends
    the app as quitting does, status 143, and the handlers before are put back."""
    import os
    import signal

    number = signal.SIGTERM

    def before(_signum: int, _frame: object) -> None:
        raise AssertionError("the handler before the app ran")

    kept = signal.signal(number, before)
    try:
        app = DragApp(settings_from(), warm=False)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            os.kill(os.getpid(), number)
            deadline = time.monotonic() + 30
            while app.is_running and time.monotonic() < deadline:
                await pilot.pause()
        assert app.return_code == 128 + number
        assert signal.getsignal(number) is before
    finally:
        signal.signal(number, kept)
