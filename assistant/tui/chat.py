"""The chat screen: conversations, streamed answers, the context used and where it came from."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import (
    Footer,
    Header,
    Input,
    ListItem,
    ListView,
)

from assistant.base import calloff
from assistant.base.errors import Declined, DragError, Interrupted, PrivacyError, one_line
from assistant.base.paths import expand
from assistant.core import drafts, localfiles, pipeline
from assistant.core.conversation import Asked, Offer, Queue
from assistant.core.results import AskResult
from assistant.drag import gate
from assistant.serve import client
from assistant.tui.dialogs import Confirm, NotSent, TextPrompt
from assistant.tui.review import ReviewModal, Verdict
from assistant.tui.widgets import DragScreen, Plain, PlainLabel, StatusBar

if TYPE_CHECKING:
    from assistant.privacy.sanitize import Sanitized


def _passages(result: AskResult) -> str:
    read = len(result.passages)
    return f"{read} passage{'s' * (read != 1)}"


def badge(result: AskResult) -> str:
    """Where the answer's context came from, whether the answer used it, and whether it
    was cut off before its end (the panel's warning says why)."""
    cut = " · cut off before its end" if result.student.get("finished") is False else ""
    return _source(result) + cut


def _source(result: AskResult) -> str:
    p = result.provenance
    uploads = " ".join(f"#{u}" for u in p.get("uploads") or [])
    # Alone: the gate's choice, "auto" with the embedded teacher, or the setting "never".
    g = result.gate or {}
    ran = g.get("ran", "gate")  # a record before issue 49: the gate ran ("auto")
    why = "embedded teacher" if g.get("why") else "gate" if ran in ("gate", "auto") else ran
    used = "" if result.context_used else f" · ○ answered alone ({why})"
    if result.source == "cache":
        how = f"{p.get('how')} {p.get('score', 0):.2f}"
        return f"◆ from cache · {how} · uploads {uploads} · nothing sent{used}"
    if result.source == "teacher":
        calls = len(result.teacher.get("calls", []))
        return f"▲ teacher · {calls} calls · uploads {uploads}{used}"
    if result.source == "files":
        unread = ", the answer is not in them" if result.held_back else ""
        return f"■ from your files · {_passages(result)}{unread} · nothing sent"
    return "● student only · nothing sent"


def context_text(result: AskResult) -> str:
    lines = [badge(result), ""]
    if result.privacy:
        counts = result.privacy.get("entities") or {}
        found = ", ".join(f"{k}×{v}" for k, v in sorted(counts.items())) or "none"
        what = "sent" if result.source == "teacher" else "sanitized, not sent"
        lines += [
            f"Personal data detected: {found}",
            f"Question as {what}:",
            f"  {result.privacy.get('sent_question', '')}",
            "",
        ]
    if result.passages:
        lines.append(f"Sources (your files, {_passages(result)}, best first):")
        for p in result.passages:
            lines += [f"{p.rank:>2}. {p.label}", *(f"    {t}" for t in p.text.splitlines()), ""]
    if result.gate:
        lines += [f"Gate: {gate.describe(result.gate)}", ""]
    if result.used_evidence:
        verb = "used" if result.context_used else "offered, not used"
        lines.append(f"Evidence {verb} ({len(result.used_evidence)} of {len(result.evidence)}):")
        lines += [
            f"{e.rank:>2}. [{e.score:.3f} cos {e.similarity:+.2f}] {e.text}"
            for e in result.used_evidence
        ]
        lines.append("")
    if result.used_triples:
        verb = "used" if result.context_used else "offered, not used"
        lines.append(f"Triples {verb} ({len(result.used_triples)} of {len(result.triples)}):")
        lines += [
            f"{t.rank:>2}. [{t.score:.3f} cos {t.similarity:+.2f}] ({t.entity1}; {t.entity2}) "
            f"{t.relation}"
            for t in result.used_triples
        ]
    lines += [f"warning: {w}" for w in result.warnings]
    return "\n".join(lines)


WELCOME = (
    "Ask anything in the box below.\n\n"
    "• Your question is checked for personal data here, on this machine; only a "
    "sanitized version can go to the teacher, and you see it first when something "
    "was found.\n"
    "• The teacher sends back evidence; the local student writes the answer. Answers "
    "say where their evidence came from: ▲ teacher, ◆ the local cache, ■ your files, "
    "● none (the student only).\n"
    "• F2 lists every byte that ever left (the audit ledger). ctrl+o: offline, answers "
    "from the cache only. ctrl+l: answers from your own indexed files (index them from "
    "the command palette, ctrl+p), nothing sent."
)


# A line break pasted into the one-line question box, as the box shows it.
LINE_BREAK = "\u2424"  # ␤
ASK_TEACHER = "Ask a question (Enter sends)"
ASK_FILES = "Ask your files: nothing is sent (Enter asks; ctrl+l: back to the teacher)"
CONTEXT_HINT = "Evidence and triples used for the answer appear here."


class QuestionBox(Input):
    """The question box: one line, so a pasted text's line breaks are shown as ␤, and
    asked as line breaks (Textual's Input kept a paste's first line only: the rest of a
    pasted e-mail was lost, and with it the lines the detector reads a form or a
    letter by)."""

    def _on_paste(self, event: events.Paste) -> None:
        event.prevent_default()  # not Input's own, which inserts the first line again
        if event.text:
            shown = LINE_BREAK.join(event.text.splitlines())
            if self.selection.is_empty:
                self.insert_text_at_cursor(shown)
            else:
                self.replace(shown, *self.selection)
        event.stop()


class Turn(Vertical):
    """One question and its answer."""

    def __init__(
        self, question: str, answer: str = "", note: str = "", *, from_files: bool = False
    ) -> None:
        super().__init__(classes="turn")
        self.question = question
        self.answer = answer
        self.note = note
        # Answered from the user's files: fixed when the question is asked (ctrl+l while
        # it waits its turn does not send it to the teacher).
        self.from_files = from_files
        self.result: AskResult | None = None

    def compose(self) -> ComposeResult:
        # Plain text, never Markdown or markup: a model's reply is data (a link in it is
        # shown with its full target, not made clickable; see assistant.base.safetext).
        yield Plain(self.question, classes="question")
        yield Plain(self.note, classes="badge")
        yield Plain(self.answer, classes="answer")

    def set_note(self, note: str, error: bool = False) -> None:
        with self._kept_at_end():
            self._show_note(note, error)

    def add_text(self, piece: str) -> None:
        with self._kept_at_end():
            self.answer += piece
            self.query_one(".answer", Plain).update(self.answer)

    def finish(self, result: AskResult) -> None:
        with self._kept_at_end():
            self.result = result
            self.answer = result.answer  # placeholders restored
            self.query_one(".answer", Plain).update(result.answer)
            self._show_note(badge(result))

    def _show_note(self, note: str, error: bool = False) -> None:
        self.note = note
        widget = self.query_one(".badge", Plain)
        widget.update(note)
        widget.set_class(error, "error")

    @contextlib.contextmanager
    def _kept_at_end(self) -> Iterator[None]:
        """The chat follows what is written at its end (an answer, its notes, an error)
        while the view is there; a user who scrolled up to read is left where they are."""
        box = self.parent
        at_end = isinstance(box, VerticalScroll) and box.scroll_y >= box.max_scroll_y - 1
        yield
        if at_end and isinstance(box, VerticalScroll):
            box.scroll_end(animate=False)


class ChatScreen(DragScreen):
    BINDINGS = [
        Binding("ctrl+n", "new_conversation", "New"),
        # Rename and copy are in the command palette (ctrl+p), not the footer: with
        # them it had no room for f4 Settings at 120 columns.
        Binding("ctrl+r", "rename_conversation", "Rename", show=False),
        # Before the question box's own ctrl+d (delete the character right: the Delete
        # key does that), which took it while the box had the focus.
        Binding("ctrl+d", "delete_conversation", "Delete", priority=True),
        Binding("ctrl+y", "copy_answer", "Copy answer", show=False),
        Binding("ctrl+o", "toggle_offline", "Offline"),
        Binding("ctrl+l", "toggle_files", "Your files"),
        Binding("ctrl+f", "focus_search", "Search", show=False),
    ]
    # Under 100 columns the side panels narrow (app.tcss), so the chat keeps its room.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    # The streamed answer is drawn at most this often (seconds): a redraw per token
    # would cost the student time on a small machine.
    STREAM_INTERVAL = 0.1

    def __init__(self) -> None:
        super().__init__()
        self.questions: Queue[Turn] = Queue()  # one at a time; the next one may wait
        self._cancel = calloff.CallOff()  # the app closed: the worker's waits end
        # Answer from the user's indexed files (ctrl+l): nothing is sent.
        self.from_files = False

    @property
    def pending(self) -> str | None:
        """The question being answered."""
        current = self.questions.current
        return current.question if current is not None else None

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="chat"):
            with Vertical(id="sidebar"):
                yield Input(placeholder="search conversations", id="search")
                yield ListView(id="conversations")
            with Vertical(id="main"):
                with VerticalScroll(id="messages"):
                    yield Plain(WELCOME, classes="welcome")
                yield QuestionBox(placeholder=ASK_TEACHER, id="question")
            with VerticalScroll(id="context"):
                yield Plain(CONTEXT_HINT, id="context-body")
        yield StatusBar()
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_conversations()
        self.query_one("#question", Input).focus()
        self.watch(self.app, "status", self._follow_status, init=False)

    def _follow_status(self, status: str) -> None:
        """Until its context is ready, the question's own line says what is being done
        (the status line's words), not only the first step."""
        current = self.questions.current
        turn = current.view if current is not None else None
        if turn is not None and turn.note.startswith("…"):
            turn.set_note(f"… {status}")

    # -- conversations ------------------------------------------------------------------

    def refresh_conversations(self, search: str = "") -> None:
        listing = self.query_one("#conversations", ListView)
        listing.clear()
        try:
            rows = self.drag.ui_store.conversations(search)
        except DragError as exc:
            self.notify(str(exc), severity="error")
            return
        for row in rows:
            item = ListItem(PlainLabel(row["title"][:40] or f"conversation {row['id']}"))
            item.conversation_id = row["id"]  # type: ignore[attr-defined]
            listing.append(item)

    @on(Input.Changed, "#search")
    def search_changed(self, event: Input.Changed) -> None:
        self.refresh_conversations(event.value.strip())

    @on(ListView.Selected, "#conversations")
    def open_conversation(self, event: ListView.Selected) -> None:
        cid = getattr(event.item, "conversation_id", None)
        if cid is None or self.questions.busy:
            return
        messages = self.query_one("#messages", VerticalScroll)
        messages.remove_children()  # the welcome too
        # The panel showed the last answer's context, of another conversation.
        self.query_one("#context-body", Plain).update(CONTEXT_HINT)
        for q in self.drag.ui_store.questions(cid):
            messages.mount(Turn(q["question"] or "", q["answer"] or "", f"◇ {q['source']}"))
        messages.scroll_end(animate=False)  # at its last answer, where it was left
        self.resume(cid)

    @work(thread=True, group="runtime")
    def resume(self, conversation_id: int) -> None:
        with self.drag.runtime_lock:
            self.drag.runtime.resume(conversation_id)

    def action_new_conversation(self) -> None:
        if self.questions.busy:
            self.notify("wait for the answer first", severity="warning")
            return
        messages = self.query_one("#messages", VerticalScroll)
        # Removing is done after this handler returns: the welcome is known by its class,
        # not an id, so the new one never meets the old one still there (ctrl+n twice).
        messages.remove_children()
        messages.mount(Plain(WELCOME, classes="welcome"))
        self.query_one("#context-body", Plain).update(CONTEXT_HINT)
        self.drag.runtime.new_conversation()
        self.query_one("#question", Input).focus()

    def _current(self) -> int | None:
        return self.drag.runtime.conversation_id

    def action_rename_conversation(self) -> None:
        cid = self._current()
        if cid is None:
            self.notify("nothing to rename yet: ask a question first", severity="warning")
            return

        def done(title: str | None) -> None:
            if title:
                self.drag.ui_store.rename_conversation(cid, title)
                self.refresh_conversations()

        self.app.push_screen(TextPrompt("New name for this conversation:"), done)

    def action_delete_conversation(self) -> None:
        search = self.query_one("#search", Input)
        if self.focused is search:  # ctrl+d there deletes a character, as it did
            search.action_delete_right()
            return
        cid = self._current()
        if cid is None:
            self.notify("nothing to delete yet: no answer in this one", severity="warning")
            return
        if self.questions.busy:
            self.notify("wait for the answer first", severity="warning")
            return

        def done(yes: bool | None) -> None:
            if yes:
                self.drag.ui_store.delete_conversation(cid)
                self.action_new_conversation()
                self.refresh_conversations()

        self.app.push_screen(Confirm("Delete this conversation and its answers?"), done)

    def action_copy_answer(self) -> None:
        turns = list(self.query(Turn))
        if turns and turns[-1].answer:
            self.app.copy_to_clipboard(turns[-1].answer)
            self.notify("answer copied")

    def action_toggle_offline(self) -> None:
        offline = not self.drag.runtime.offline
        self.drag.set_flags({"store.offline": offline})
        self.notify("offline: answers from the cache only" if offline else "online")

    def action_toggle_files(self) -> None:
        self.from_files = not self.from_files
        # Said for as long as it lasts, where the question is typed, not only in a notice.
        box = self.query_one("#question", Input)
        box.placeholder = ASK_FILES if self.from_files else ASK_TEACHER
        box.set_class(self.from_files, "files-mode")
        self.notify(
            "answers from your indexed files: nothing is sent"
            if self.from_files
            else "answers with the teacher's evidence"
        )

    def index_files(self) -> None:
        """Ask for files or folders (separated by ;) and add them to the index."""

        def done(text: str | None) -> None:
            try:  # typed here, no shell expands "~": this does
                paths = [expand(p.strip()) for p in (text or "").split(";") if p.strip()]
            except DragError as exc:
                self.notify(f"not indexed: {exc}", severity="error")
                return
            if paths:
                self._index(paths)

        self.app.push_screen(TextPrompt("Files or folders to index (separate with ;):"), done)

    @work(thread=True, group="runtime")
    def _index(self, paths: list[Path]) -> None:
        app = self.drag
        shown = [0.0]  # when the status line last changed

        def progress(done: int, total: int, path: str) -> None:
            # The first file, the last and at most four a second between.
            now = time.monotonic()
            if path and (done in (0, total - 1) or now - shown[0] >= 0.25):
                shown[0] = now
                app.report(f"indexing {done + 1}/{total}: {Path(path).name}")

        # Not under the app's runtime lock: a question asked while the files are read is
        # answered meanwhile (the index holds the session's lock step by step).
        try:
            try:
                # The app ends: after the file being read (its end waits for that).
                with app.indexing, calloff.scope(app.closing):
                    report = localfiles.index(app.runtime, paths, progress=progress)
            finally:  # a question under way says what it does, and "ready" when it ends
                if not self.questions.busy:
                    app.report(app.ready_line())
        except DragError as exc:
            app.call_from_thread(self.notify, f"not indexed: {exc}", severity="error")
            return
        except Exception as exc:  # a fault of ours: said, and the app goes on
            why = f"internal error: {type(exc).__name__}: {one_line(str(exc), 200)}"
            app.call_from_thread(self.notify, f"not indexed: {why}", severity="error")
            return
        told = report.line()
        told_lines = [c.line() for c in report.cut] + [s.line() for s in report.skipped]
        reasons = told_lines[:3]
        app.call_from_thread(
            self.notify,
            "\n".join([told, *reasons]),
            severity="warning" if reasons else "information",
        )

    def action_focus_search(self) -> None:
        self.query_one("#search", Input).focus()

    # -- asking -------------------------------------------------------------------------

    @on(Input.Submitted, "#question")
    def submit(self, event: Input.Submitted) -> None:
        question = event.value.replace(LINE_BREAK, "\n")
        if not question.strip():
            return
        offer = self.questions.offer(question)
        if offer is Offer.BUSY:
            self.notify("one question at a time: wait for the answer", severity="warning")
            return
        event.input.value = ""
        self.query(".welcome").remove()
        where = " (from your files)" if self.from_files else ""
        turn = Turn(
            question,
            note=f"… asked{where} once the last answer's graph is in the cache"
            if offer is Offer.WAIT
            else "… working",
            from_files=self.from_files,
        )
        messages = self.query_one("#messages", VerticalScroll)
        messages.mount(turn)
        messages.scroll_end(animate=False)  # asked: the chat goes to its end, and follows
        now = self.questions.add(question, turn)
        if now is not None:
            self._start(now)

    def _start(self, asked: Asked[Turn]) -> None:
        self._cancel.clear()
        self.ask(asked.question, asked.view)

    def review_from_worker(self, sanitized: Sanitized) -> Verdict:
        """Called in the worker: show the modal on the UI thread, wait for the answer."""
        decided = threading.Event()
        box: dict[str, Verdict] = {}

        def done(verdict: Verdict) -> None:
            box["ok"] = verdict
            decided.set()

        with self._cancel.waking(decided.set):
            self.app.call_from_thread(self.app.push_screen, ReviewModal(sanitized, done))
            decided.wait()
        return box.get("ok", False)  # False: the app closed first

    def cancel_pending(self) -> None:
        """Quit while answering: keep the question (and one asked meanwhile), stop the
        student."""
        if self.questions.close():
            self._cancel.set()

    @work(thread=True, group="ask")  # one at a time: submit() queues, _done() starts
    def ask(self, question: str, turn: Turn) -> None:
        app = self.drag
        buffer: list[str] = []
        last = [time.monotonic()]

        def flush() -> None:
            if buffer:
                app.call_from_thread(turn.add_text, "".join(buffer))
                buffer.clear()

        def on_text(piece: str) -> None:
            if self._cancel.is_set():
                raise Interrupted("the app was closed")
            buffer.append(piece)
            if time.monotonic() - last[0] > self.STREAM_INTERVAL:
                last[0] = time.monotonic()
                flush()

        def progress(stage: str, result: AskResult) -> None:
            if stage == "context":
                app.call_from_thread(turn.set_note, badge(result) + " · answering…")
            elif stage == "answered":  # the last words before the result replaces the stream
                flush()
            else:  # the graph, built after the answer for later questions
                app.call_from_thread(self._answer_complete, turn, result)

        try:
            with calloff.scope(self._cancel), app.runtime_lock:
                rt = app.runtime
                if turn.from_files:
                    app.call_from_thread(turn.set_note, "… looking in your files")
                    result = localfiles.ask_files(rt, question, on_text=on_text)
                    flush()
                else:
                    served = self._served(question, turn, on_text)
                    if served is not None:
                        flush()
                        result = served
                    else:  # worked here (a review, no server, other settings)
                        if rt.conversation_id is not None:  # as the history has it now: the
                            rt.resume(rt.conversation_id)  # server's turns may have added
                        app.call_from_thread(turn.set_note, "… checking for personal data")
                        result = pipeline.ask(
                            rt,
                            question,
                            review=self.review_from_worker,
                            on_text=on_text,
                            progress=progress,
                        )
        except (DragError, KeyboardInterrupt) as exc:
            error = drafts.kept_error(question, exc) if not self._cancel.is_set() else exc
            app.call_from_thread(turn.set_note, f"✗ {error}", True)
            app.call_from_thread(self._put_back, question)
            if isinstance(exc, PrivacyError) and not isinstance(exc, Declined):
                app.call_from_thread(app.push_screen, NotSent(str(error)))
        except Exception as exc:  # a fault of ours: said on the turn, the app goes on
            fault = DragError(f"internal error: {type(exc).__name__}: {one_line(str(exc), 200)}")
            # While the app closes, closing keeps the question (questions.close).
            error = drafts.kept_error(question, fault) if not self._cancel.is_set() else fault
            app.call_from_thread(turn.set_note, f"✗ {error}", True)
            app.call_from_thread(self._put_back, question)
        else:
            app.call_from_thread(self.show_result, turn, result)
        finally:
            app.call_from_thread(self._done)

    def _served(self, question: str, turn: Turn, on_text: Any) -> AskResult | None:
        """The answer of a running drag serve with the app's settings (its models are
        loaded there), or None: the question is worked here, where the review is shown.
        The app goes on in the conversation the server answered in."""
        app = self.drag
        if app.served is not None:
            app.call_from_thread(turn.set_note, "… asked drag serve")
        asked_in = app.runtime.conversation_id
        result = client.ask(
            app.base, question, app.flags, yes=False, on_text=on_text, conversation=asked_in
        )
        if result is not None and result.conversation_id is not None:
            app.runtime.resume(result.conversation_id)
        elif result is None and app.served is not None:  # the status line says who answers
            app.served = client.serving(app.base, app.flags)
        return result

    def _put_back(self, question: str) -> None:
        """A question that was declined, refused or failed goes back in the question box
        to be edited and asked again; not one whose answer was written (the graph after
        it failed), nor while another is typed or waits its turn."""
        box = self.query_one("#question", Input)
        q = self.questions
        if not box.value and not self._cancel.is_set() and not q.answered and q.next is None:
            box.value = LINE_BREAK.join(question.splitlines())
            box.cursor_position = len(box.value)

    def show_result(self, turn: Turn, result: AskResult) -> None:
        turn.finish(result)
        self.query_one("#context-body", Plain).update(context_text(result))
        self.refresh_conversations(self.query_one("#search", Input).value.strip())

    def _answer_complete(self, turn: Turn, result: AskResult) -> None:
        """The answer is written; the next question may be asked (it waits for the graph)."""
        turn.set_note(badge(result) + " · answered; building the graph for the cache…")
        self.questions.answer_complete()

    def _done(self) -> None:
        self.drag.status = self.drag.ready_line()
        waiting = self.questions.done()
        if waiting is not None:
            self._start(waiting)

    def last_result(self) -> Any:
        turns = list(self.query(Turn))
        return turns[-1].result if turns else None
