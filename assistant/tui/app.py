"""The Textual app: a thin skin over assistant.core.pipeline and assistant.store.

Models load in a background worker (status line above the footer); every
question runs in a worker thread; the UI thread never does model or network
work.  The app talks to the database through its own connection (WAL), so a
`drag audit` in another terminal works at the same time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.reactive import reactive
from textual.screen import Screen

from assistant.base import calloff, config, safetext, signals
from assistant.base.config import Settings
from assistant.base.errors import DragError
from assistant.core.session import Session
from assistant.serve import client
from assistant.store import Store
from assistant.tui import paste
from assistant.tui.audit import AuditScreen
from assistant.tui.bench import BenchScreen
from assistant.tui.chat import ChatScreen
from assistant.tui.drafts import DraftsScreen
from assistant.tui.settings import SettingsScreen


class DragApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "drag"
    SUB_TITLE = "private assistant"
    MODES = {
        "chat": ChatScreen,
        "audit": AuditScreen,
        "bench": BenchScreen,
        "settings": SettingsScreen,
        "drafts": DraftsScreen,
    }
    DEFAULT_MODE = "chat"
    BINDINGS = [
        Binding("f1", "switch_mode('chat')", "Chat"),
        Binding("f2", "switch_mode('audit')", "Audit"),
        Binding("f3", "switch_mode('bench')", "Benchmark"),
        Binding("f4", "switch_mode('settings')", "Settings"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    status: reactive[str] = reactive("starting…")

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every notice as plain text: messages quote errors, titles and paths, which may
        hold "[/]" or a teacher's words (never markup, whatever a caller asks)."""
        super().notify(
            safetext.plain(message),
            title=safetext.one_line(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    def action_help_quit(self) -> None:
        """ctrl+c where nothing is copied: Textual's own notice, written as plain text
        (its "[b]ctrl+q[/b]" showed as written, every notice here being plain)."""
        self.notify("Press ctrl+q to quit the app", title="Do you want to quit?")

    def __init__(
        self,
        settings: Settings,
        *,
        warm: bool = True,
        base: Settings | None = None,
        flags: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.warm = warm
        # The settings before the command line's options, and those options apart: a
        # running drag serve answers when it runs with ``base`` (client.serving).
        self.base = settings if base is None else base
        self.flags = (
            {} if base is None else {k: v for k, v in (flags or {}).items() if v is not None}
        )
        self.served: dict[str, Any] | None = None  # that server's record, found at start
        self.runtime_lock = threading.RLock()
        self._signals_before: dict[int, Any] = {}  # the handlers _end_on_signals replaced
        # Set as the app ends: the files being indexed and a benchmark stop (calloff).
        self.closing = calloff.CallOff()
        # Held while files are indexed: the end waits for it before it closes the models
        # and the store that indexing uses (it stops after the file being read).
        self.indexing = threading.Lock()
        self.runtime = Session(settings, status=self.report)
        s = settings.store
        self.ui_store = Store.configured(s.database, s.key)

    # -- status ---------------------------------------------------------------------------

    class Status(Message):
        """A status line from another thread."""

        def __init__(self, line: str) -> None:
            super().__init__()
            self.line = line

    def report(self, message: str) -> None:
        """Status from any thread (the pipeline reports from workers).  From another
        thread it is posted, not waited for: the app closing joins the model loaders, and
        a loader waiting on the app for its status line (call_from_thread) hung the quit.
        Once the app closes, nothing is posted (no one to tell)."""
        if threading.get_ident() == self._thread_id:
            self.status = message
        else:
            self.post_message(self.Status(message))

    def on_drag_app_status(self, message: Status) -> None:
        self.status = message.line

    def ready_line(self) -> str:
        s = self.settings
        mode = "OFFLINE: cache only" if s.store.offline else f"teacher {s.teacher.endpoint}"
        line = f"ready · student {s.student.model} · {mode} · review {s.privacy.review}"
        if self.served is not None:
            return f"{line} · answered by drag serve (pid {self.served['pid']})"
        return line

    def on_load(self) -> None:  # before the terminal is taken over
        self._end_on_signals()

    def on_mount(self) -> None:
        self.tidy()
        if self.warm:
            self.warm_up()
        else:
            self.status = self.ready_line()

    @work(thread=True, group="tidy")
    def tidy(self) -> None:
        """The keeping settings, once, as `drag ask` and `drag chat` apply them; in a
        thread (another drag process may hold the store), a failure told, not fatal."""
        try:
            with self.runtime_lock:
                self.runtime.tidy()
        except DragError as exc:
            self.call_from_thread(
                self.notify, f"the keeping settings were not applied: {exc}", severity="error"
            )

    @work(thread=True, exclusive=True, group="warm")
    def warm_up(self) -> None:
        """Load the parts a question needs, one by one, while the user types; none where
        a running drag serve with these settings answers (they load here only when a
        question is worked in-process: a review, the user's files, the server gone)."""
        self.served = client.serving(self.base, self.flags)
        if self.served is not None:
            self.report(self.ready_line())
            return
        parts = ["detector", "embedder", "student"]
        self.runtime.preload("embedder", "student")  # side by side with the detector
        if not self.runtime.offline and self.runtime.teacher_is_local:
            parts.append("teacher")
        for part in parts:
            try:
                with self.runtime_lock:
                    getattr(self.runtime, part)
            except DragError as exc:
                self.report(f"✗ {part}: {exc}")
                return
        with self.runtime_lock:
            self.runtime.prime_student()
        self.report(self.ready_line())

    # -- settings -------------------------------------------------------------------------

    def set_flags(self, flags: dict[str, Any]) -> None:
        """A change for this session only (the offline switch)."""
        self.flags = {**self.flags, **flags}
        self.settings = self.settings.with_flags(flags)
        self.runtime.settings = self.settings
        self.status = self.ready_line()

    def reload_settings(self) -> None:
        """After the settings screen saved: new settings, and new parts where they changed."""
        new = config.load(config_file=self.settings.config_file)
        models = ("student.model", "teacher.endpoint", "teacher.model", "embedder.model")
        self.base, self.flags = new, {}
        if any(new.get(k) != self.settings.get(k) for k in models):
            self._rebuild(new)
        else:
            self.served = client.serving(new, {})
            self.settings = new
            self.runtime.settings = new
            self.status = self.ready_line()

    @work(thread=True, exclusive=True, group="warm")
    def _rebuild(self, new: Settings) -> None:
        with self.runtime_lock:
            self.runtime.close()
            self.settings = new
            self.runtime = Session(new, status=self.report)
        self.report("settings changed: loading the models again…")
        self.warm_up()

    # -- commands -------------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        chat = self._chat()
        yield SystemCommand("Chat", "Ask questions (F1)", lambda: self.switch_mode("chat"))
        yield SystemCommand(
            "Audit", "What left this machine (F2)", lambda: self.switch_mode("audit")
        )
        yield SystemCommand(
            "Benchmark", "Privacy-leakage benchmark (F3)", lambda: self.switch_mode("bench")
        )
        yield SystemCommand(
            "Settings", "Teacher, student, review… (F4)", lambda: self.switch_mode("settings")
        )
        yield SystemCommand(
            "Drafts",
            "What was not sent: show, release a program's request once, drop",
            lambda: self.switch_mode("drafts"),
        )
        if chat is not None:
            yield SystemCommand(
                "New conversation", "Start afresh (ctrl+n)", chat.action_new_conversation
            )
            yield SystemCommand("Rename conversation", "(ctrl+r)", chat.action_rename_conversation)
            yield SystemCommand("Delete conversation", "(ctrl+d)", chat.action_delete_conversation)
            yield SystemCommand("Copy the last answer", "(ctrl+y)", chat.action_copy_answer)
            yield SystemCommand(
                "Toggle offline", "Answer from the cache only (ctrl+o)", chat.action_toggle_offline
            )
            yield SystemCommand(
                "Index files or folders", "Add your own files to the index", chat.index_files
            )
            yield SystemCommand(
                "Toggle answers from your files",
                "Answer from your indexed files, nothing sent (ctrl+l)",
                chat.action_toggle_files,
            )
        yield SystemCommand("Verify the ledger", "Recompute the hash chain", self._verify_ledger)

    def _chat(self) -> ChatScreen | None:
        for screen in self.screen_stack:
            if isinstance(screen, ChatScreen):
                return screen
        return None

    def _verify_ledger(self) -> None:
        try:
            verdict = self.ui_store.verify_ledger()
        except DragError as exc:
            self.notify(str(exc), severity="error")
            return
        if verdict.ok:
            self.notify(f"ledger ok: {verdict.rows} uploads, chain intact")
        else:
            self.notify(f"ledger BROKEN at #{verdict.bad_id}: {verdict.reason}", severity="error")

    # -- leaving ----------------------------------------------------------------------------

    async def action_quit(self) -> None:
        self._leave()

    def _leave(self, code: int = 0) -> None:
        self._keep_pending()
        self.closing.set()
        self.exit(return_code=code)

    def _keep_pending(self) -> None:
        chat = self._chat()
        if chat is not None:
            chat.cancel_pending()  # the question is kept (once); the student stops

    def _end_on_signals(self) -> None:
        """SIGTERM (`kill`, a logout) ends the app as quitting does, its status 143:
        the question being answered is kept and the terminal given back; SIGHUP (the
        terminal closed) keeps the question and ends the process at once, status 129.
        By default both killed the app, the question lost (and the terminal left drawn
        over).  One ignored stays ignored (nohup); the handlers before are put back
        when the app ends."""
        import asyncio
        import os
        import signal

        loop = asyncio.get_running_loop()
        hangup = getattr(signal, "SIGHUP", None)

        def ended(signum: int, _frame: object) -> None:
            code = signals.status(signum)
            if signum == hangup:
                # The terminal is gone: nothing can be drawn, and a close would write to
                # it (Textual's writer stops at its first failed write; the app would then
                # wait on it for good).  The question is kept, here, and the process ends.
                self._keep_pending()
                os._exit(code)
            loop.call_soon_threadsafe(self._leave, code)

        # Not in the main thread (a runner of the app's own): none is taken.
        self._signals_before = signals.take(ended, (signal.SIGTERM, hangup))

    def _signals_back(self) -> None:
        signals.put_back(self._signals_before)

    def on_unmount(self) -> None:
        self._signals_back()
        self.closing.set()
        chat = self._chat()
        if chat is not None:
            chat.cancel_pending()  # a worker waiting on a review lets go of the runtime
        if self.indexing.acquire(timeout=60):  # what was read is stored, names relearnt
            self.indexing.release()
        if self.runtime_lock.acquire(timeout=30):
            try:
                self.runtime.close()
            finally:
                self.runtime_lock.release()
        self.ui_store.close()


def run(settings: Settings, *, base: Settings, flags: dict[str, Any]) -> int:
    """``settings``: ``base`` with the command line's ``flags``; the app's exit status
    (not 0 when it ended on an error of its own, whose traceback Textual has printed)."""
    paste.install()  # pasted text stays text (assistant.tui.paste)
    app = DragApp(settings, base=base, flags=flags)
    try:
        app.run()
    finally:
        app._signals_back()  # where the app ended before its unmount
    return app.return_code or 0
