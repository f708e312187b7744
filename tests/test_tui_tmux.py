"""Smoke test: the real `drag` app in a real terminal (tmux), against the real local
teacher server, driven by keystrokes only: ask, review, read the answer, quit."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import silent_teacher

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[1]


class Tmux:
    """One tmux server of our own (-L), one window running ``command``."""

    def __init__(self, command: str, env: dict[str, str]) -> None:
        self.socket = f"drag-test-{os.getpid()}"
        assigned = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # -u: a LINES/COLUMNS inherited from the test run would fix the app's size.
        shell = f"env -u LINES -u COLUMNS {assigned} {command}"
        self.run("new-session", "-d", "-s", "drag", "-x", "150", "-y", "45", shell)
        self.run("resize-window", "-t", "drag", "-x", "150", "-y", "45")

    def run(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30
        )
        return out.stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "drag")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "drag", *keys)

    def type(self, text: str) -> None:
        self.run("send-keys", "-t", "drag", "-l", text)

    def wait(self, condition: Callable[[str], bool], what: str, seconds: float = 180) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            shown = self.screen()
            if condition(shown):
                return shown
            time.sleep(0.5)
        raise AssertionError(f"waited {seconds:g} s for {what}; the screen shows:\n{self.screen()}")

    def alive(self) -> bool:
        return "drag" in self.run("list-sessions", "-F", "#{session_name}")

    def close(self) -> None:
        self.run("kill-server")


@pytest.fixture
def tmux_bin() -> str:
    found = shutil.which("tmux")
    if found is None:
        if os.environ.get("DRAG_REQUIRE_TMUX"):  # CI installs it: there, missing is a failure
            pytest.fail("tmux is required here (DRAG_REQUIRE_TMUX) but not installed")
        pytest.skip("tmux is not installed")
    return found


def drag_env(teacher_env: dict[str, str], folder: Path, **settings: str) -> dict[str, str]:
    """The environment of a drag run in tmux: this run's drag settings, the teacher's,
    a config and a store in ``folder``, then ``settings``."""
    return {
        **{k: v for k, v in os.environ.items() if k.startswith(("DRAG_", "HF_", "ORT_"))},
        **teacher_env,
        "DRAG_CONFIG": str(folder / "config.toml"),
        "DRAG_STORE_DATABASE": str(folder / "drag.db"),
        "TERM": "xterm-256color",
        "PYTHONPATH": str(ROOT),
        **settings,
    }


@pytest.fixture
def app_in_tmux(
    tmux_bin: str, teacher_env: dict[str, str], tmp_path: Path
) -> Iterator[tuple[Tmux, Path]]:
    database = tmp_path / "drag.db"
    env = drag_env(
        teacher_env,
        tmp_path,
        DRAG_PIPELINE_N="4",
        DRAG_PIPELINE_K="3",
        DRAG_PIPELINE_MODE="evidence",
        DRAG_PRIVACY_REVIEW="always",
    )
    tmux = Tmux(f"{shlex.quote(sys.executable)} -m assistant", env)
    try:
        yield tmux, database
    finally:
        tmux.close()


def test_ask_review_and_answer_in_a_real_terminal(
    app_in_tmux: tuple[Tmux, Path], teacher_server: str
) -> None:
    tmux, database = app_in_tmux
    tmux.wait(lambda s: "Ask a question" in s, "the first paint", 60)
    tmux.wait(lambda s: "ready ·" in s, "the models to load")
    tmux.type("What does glutamine do in the body?")
    tmux.keys("Enter")
    tmux.wait(lambda s: "Review before upload" in s, "the review")
    tmux.keys("y")
    shown = tmux.wait(
        lambda s: "▲ teacher" in s and "answering" not in s and "ready ·" in s,
        "the answer",
        400,  # the student on two busy cores can take minutes
    )
    assert "What does glutamine do in the body?" in shown
    # The context panel, and whether the confidence gate let the answer use it.
    alone = "answered alone (gate)" in shown
    assert ("Evidence offered, not used" if alone else "Evidence used") in shown
    tmux.keys("C-q")
    deadline = time.monotonic() + 30
    while tmux.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not tmux.alive(), "ctrl+q did not quit"
    with sqlite3.connect(database) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT count(*) FROM uploads").fetchone()[0] >= 1
        assert db.execute("SELECT count(*) FROM questions").fetchone()[0] == 1


def test_startup_bench_times_a_first_paint(tmux_bin: str, tmp_path: Path) -> None:
    """The figure is the time until the mark shows: no sooner than a program that shows
    it half a second after it starts (a lower bound, which a slower machine only
    raises), and the bare app's mark is seen."""
    from drag_bench import startup

    late = tmp_path / "late.py"
    late.write_text("import time\ntime.sleep(0.5)\nprint('late mark')\ntime.sleep(30)\n", "utf-8")
    assert startup.first_paint([sys.executable, str(late)], "late mark") >= 0.5
    bare = tmp_path / "bare_app.py"
    bare.write_text(startup.BARE_APP, "utf-8")
    assert startup.first_paint([sys.executable, str(bare)], startup.BARE_MARK) > 0
    with pytest.raises(TimeoutError, match="never shown"):
        startup.first_paint([sys.executable, str(bare)], "never shown", timeout=2)


def test_a_first_answer_byte_is_timed_on_a_terminal_of_its_own() -> None:
    from drag_bench import startup

    speak = (
        "import sys, time; time.sleep(0.3); print('answer'); sys.stdout.flush(); time.sleep(0.3)"
    )
    first, ended = startup.first_answer_byte([sys.executable, "-c", speak])
    assert 0.3 <= first < ended and ended >= 0.6
    with pytest.raises(RuntimeError, match="exited 3 without an answer"):
        startup.first_answer_byte([sys.executable, "-c", "raise SystemExit(3)"])


def test_the_offline_start_bench_needs_a_cached_question(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from drag_bench import startup

    assert startup.main(["--ask-offline", "--runs", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds no question" in err[0]


def test_drag_ask_review_shows_both_sides_and_sends_nothing_on_no(
    tmux_bin: str, teacher_env: dict[str, str], tmp_path: Path
) -> None:
    """The README's `drag ask --review`: in a real terminal, the question and the exact
    text to be sent side by side, and nothing goes out until you say yes."""
    database = tmp_path / "drag.db"
    env = drag_env(teacher_env, tmp_path, DRAG_PRIVACY_REWRITE="never")
    question = "My SSN is 536-22-8471: which tax form do I file?"
    ask = shlex.join([sys.executable, "-m", "assistant", "ask", "--review", question])
    tmux = Tmux("sh -c " + shlex.quote(f"{ask}; echo EXIT=$?; sleep 300"), env)
    try:
        shown = tmux.wait(lambda s: "[y/N]" in s, "the review's question", 120)
        assert "YOUR QUESTION (stays here)" in shown and "SENT TO THE TEACHER" in shown
        row = next(ln for ln in shown.splitlines() if "536-22-8471" in ln)
        left, right = row.split("│", 1)
        assert "536-22-8471" in left and "536-22-8471" not in right and "<" in right
        assert "detected: US_SSN ×1" in shown
        tmux.type("n")
        tmux.keys("Enter")
        shown = tmux.wait(lambda s: "EXIT=" in s, "drag to end")
        assert "EXIT=5" in shown and "kept in drag drafts" in shown
    finally:
        tmux.close()
    with contextlib.closing(sqlite3.connect(database)) as db:  # the ledger: no upload
        assert db.execute("SELECT count(*) FROM uploads").fetchone()[0] == 0


def test_a_paste_with_an_escape_and_a_line_break_asks_nothing(
    app_in_tmux: tuple[Tmux, Path],
) -> None:
    """An exploratory test: pasted text holding an escape character and a line break was
    replayed as key presses by Textual's parser, reordered, and its line break asked the
    question ("^[2J P2P3P1" went to the teacher, no key pressed).  Pasted text stays in
    the box, in its order, its line break shown as ␤; nothing is asked."""
    tmux, _database = app_in_tmux
    tmux.wait(lambda s: "Ask a question" in s, "the first paint", 60)
    tmux.run("set-buffer", "P1 \x1b[2J P2\nP3")
    tmux.run("paste-buffer", "-p", "-t", "drag")  # -p: as a terminal pastes (bracketed)
    shown = tmux.wait(lambda s: "P1 [2J P2␤P3" in s, "the pasted text in the question box", 30)
    assert "Ask anything in the box below" in shown  # the welcome: no question was asked


@pytest.mark.parametrize("how", ["kill", "terminal closed"])
def test_a_kill_or_a_closed_terminal_ends_the_app_and_keeps_its_question(
    how: str, tmux_bin: str, teacher_env: dict[str, str], tmp_path: Path
) -> None:
    """SIGTERM (`kill`, a logout) killed the app at once: the terminal left in the app's
    screen, the question waiting on its review lost; so did closing the terminal
    (SIGHUP).  A kill ends it as Ctrl+Q does, status 143, the terminal given back; a
    closed terminal ends it too.  Either way the question is kept in drag drafts."""
    (tmp_path / "home").mkdir()  # drafts of this test's own
    env = drag_env(
        teacher_env, tmp_path, DRAG_PRIVACY_REVIEW="always", DRAG_HOME=str(tmp_path / "home")
    )
    shell_pid = tmp_path / "shell.pid"
    app = shlex.join([sys.executable, "-m", "assistant"])
    script = f"echo $$ > {shlex.quote(str(shell_pid))}; {app}; echo EXIT=$?; sleep 300"
    tmux = Tmux("sh -c " + shlex.quote(script), env)
    try:
        tmux.wait(lambda s: "ready ·" in s, "the models to load")
        tmux.type("What does glutamine do in the body?")
        tmux.keys("Enter")
        tmux.wait(lambda s: "Review before upload" in s, "the review")
        assert tmux.run("display-message", "-p", "-t", "drag", "#{alternate_on}").strip() == "1"
        shell = shell_pid.read_text().strip()
        (pid,) = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
        if how == "kill":
            os.kill(int(pid), signal.SIGTERM)
            shown = tmux.wait(lambda s: "EXIT=" in s, "the app to end", 60)
            assert "EXIT=143" in shown
            on = tmux.run("display-message", "-p", "-t", "drag", "#{alternate_on}").strip()
            assert on == "0"
        else:
            tmux.close()  # the terminal goes: SIGHUP
            deadline = time.monotonic() + 60
            while _running(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not _running(pid), "the app outlived its terminal"
    finally:
        tmux.close()
    assert kept_times(env, "What does glutamine do in the body?") == 1


def kept_times(env: dict[str, str], question: str) -> int:
    """How many times `drag drafts list`, run with ``env``, lists ``question``."""
    listed = subprocess.run(
        [sys.executable, "-m", "assistant", "drafts", "list"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    return listed.stdout.count(question)


def _running(pid: str) -> bool:
    """Whether process ``pid`` runs (ended and not yet reaped counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_quitting_while_the_teacher_is_asked_ends_the_app_at_once(
    tmux_bin: str, tmp_path: Path
) -> None:
    """An exploratory test: Ctrl+Q while the teacher was asked left a blank screen until
    teacher.timeout (300 s by default): the app's worker stayed in the HTTP read, and
    the process waited for it.  Here the teacher takes the request and never answers,
    teacher.timeout is 600 s: quitting gives the request up, the app ends, the question
    is kept once, and the ledger's row says the request was given up."""
    (tmp_path / "home").mkdir()  # drafts of this test's own
    question = "Why do leaves change colour in autumn?"
    silent = silent_teacher(DRAG_TEACHER_TIMEOUT="600", DRAG_PRIVACY_REVIEW="never")
    with silent as (teacher, settings):
        env = drag_env(settings, tmp_path, DRAG_HOME=str(tmp_path / "home"))
        app = shlex.join([sys.executable, "-m", "assistant"])
        tmux = Tmux("sh -c " + shlex.quote(f"{app}; echo EXIT=$?; sleep 300"), env)
        try:
            tmux.wait(lambda s: "ready ·" in s, "the models to load")
            tmux.type(question)
            tmux.keys("Enter")
            connection, _ = teacher.accept()  # the question is with the teacher
            with connection:
                tmux.keys("C-q")
                shown = tmux.wait(lambda s: "EXIT=" in s, "the app to end", 60)
            assert "EXIT=0" in shown
        finally:
            tmux.close()
    assert kept_times(env, question) == 1
    with contextlib.closing(sqlite3.connect(tmp_path / "drag.db")) as db:
        rows = db.execute("SELECT status, error FROM uploads").fetchall()
    assert len(rows) == 1 and rows[0][0] == "error" and "given up" in rows[0][1], rows


def test_quitting_while_files_are_indexed_ends_the_app_after_the_file_being_read(
    tmux_bin: str, tmp_path: Path
) -> None:
    """Quitting while a folder was indexed left the process running until the whole
    folder was read (the app gone from the screen, minutes for a large folder).  It
    ends after the file being read; what was read stays indexed."""
    notes = tmp_path / "notes"
    notes.mkdir()
    total = 3000
    for n in range(total):
        (notes / f"note-{n:04}.md").write_text(f"Note {n}: Marta Nowicka waters window {n}.\n")
    env = drag_env({}, tmp_path, DRAG_STORE_OFFLINE="1")
    app = shlex.join([sys.executable, "-m", "assistant"])
    tmux = Tmux("sh -c " + shlex.quote(f"{app}; echo EXIT=$?; sleep 300"), env)
    try:
        tmux.wait(lambda s: "Ask a question" in s, "the first paint", 60)
        tmux.keys("C-p")
        tmux.type("Index files")
        tmux.wait(lambda s: "Add your own files to the index" in s, "the palette's command", 30)
        tmux.keys("Enter")
        tmux.wait(lambda s: "Files or folders to index" in s, "the prompt", 30)
        tmux.type(str(notes))
        tmux.keys("Enter")
        tmux.wait(lambda s: "indexing " in s, "the indexing to begin", 120)
        tmux.keys("C-q")
        shown = tmux.wait(lambda s: "EXIT=" in s, "the app to end", 120)
        assert "EXIT=0" in shown
    finally:
        tmux.close()
    with contextlib.closing(sqlite3.connect(tmp_path / "drag.db")) as db:
        indexed = db.execute("SELECT count(*) FROM file_sources").fetchone()[0]
        learnt = db.execute("SELECT count(*) FROM meta WHERE key = 'files_learnt'").fetchone()
    assert 0 < indexed < total, indexed
    assert learnt == (1,)  # what was read: stored, and its names taught
