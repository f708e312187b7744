"""Bad input: one-line error, non-zero exit, no traceback, nothing typed lost.

These run the real `drag` command in a subprocess, as a user would.
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import json
import os
import re
import select
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from assistant.core import drafts
from assistant.models.localserver import free_port
from tests.conftest import silent_teacher
from tests.fakes import completion, fake_teacher_server


def drag(
    *args: str, stdin: bytes = b"", env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    full_env = {**os.environ, "DRAG_TEACHER_MAX_RETRIES": "0", **(env or {})}
    if cwd is not None:  # run from elsewhere: the package from this checkout all the same
        full_env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    return subprocess.run(
        [sys.executable, "-m", "assistant", *args],
        input=stdin,
        capture_output=True,
        env=full_env,
        timeout=120,
        check=False,
        cwd=cwd,
    )


def one_line_error(proc: subprocess.CompletedProcess[bytes]) -> str:
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode != 0, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("drag: error: ")
    return lines[0]


def kept(message: str) -> dict[str, Any]:
    """The kept question the message names, opened; its file is owner-only and sealed."""
    match = re.search(r"kept in drag drafts as (\S+?)\)?$", message)
    assert match, message
    path = drafts.unsent_dir() / (match.group(1) + drafts.SUFFIX)
    assert path.is_file() and path.stat().st_mode & 0o077 == 0  # owner-only
    record = drafts.read(match.group(1))
    assert record["question"][:12].encode() not in path.read_bytes()  # sealed
    return record


def remote(url: str) -> dict[str, str]:
    return {"DRAG_TEACHER_ENDPOINT": url, "DRAG_TEACHER_MODEL": "m"}


def test_empty_question() -> None:
    for proc in (drag("ask", ""), drag("ask", stdin=b"  \n\t ")):
        assert "the question is empty" in one_line_error(proc)
        assert proc.returncode == 2


def test_100kb_question_is_refused_and_kept() -> None:
    question = ("Why is the sky blue? " * 5000)[:100_000]
    proc = drag("ask", stdin=question.encode())
    message = one_line_error(proc)
    assert proc.returncode == 2 and "limit is 8,000" in message
    assert kept(message)["question"] == question


def test_invalid_utf8_on_stdin_is_kept_byte_for_byte() -> None:
    raw = b"What does \xff\xfe mean?\n"
    proc = drag("ask", stdin=raw)
    message = one_line_error(proc)
    assert proc.returncode == 2 and "not valid UTF-8 (byte 0xff at offset 10)" in message
    assert base64.b64decode(kept(message)["question_base64"]) == raw


def test_teacher_down() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    proc = drag("ask", "What is the capital of France?", env=remote(url))
    message = one_line_error(proc)
    assert proc.returncode == 3 and f"cannot reach the teacher at {url}" in message
    assert kept(message)["question"] == "What is the capital of France?"
    # A server of this machine: start the one it names (drag's own with its port); one
    # elsewhere: `drag teacher serve` could never serve it.
    port = url.split(":")[2].split("/")[0]
    assert f"start the server it names (`drag teacher serve --port {port}`" in message


@pytest.mark.parametrize(
    ("url", "hint"),
    [
        ("http://127.0.0.1:8080/v1", "(`drag teacher serve --port 8080` runs drag's own)"),
        ("http://localhost/v1", "(`drag teacher serve --port 80` runs drag's own)"),
        # drag's own listens on 127.0.0.1 over HTTP: for these, only the server named.
        ("http://[::1]:9/v1", "start the server it names"),
        ("https://localhost:8443/v1", "start the server it names"),
        # Elsewhere `drag teacher serve` could never be the answer.
        ("https://api.example.com/v1", "check the address and the network"),
        ("http://10.0.0.5:8000/v1", "check the address and the network"),
    ],
)
def test_an_unreachable_teacher_s_advice_fits_where_it_is(url: str, hint: str) -> None:
    from assistant.net.egress import unreachable_hint

    said = unreachable_hint(url)
    assert said.endswith(hint) and ("drag teacher serve" in said) == ("drag's own" in hint)


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (b"<html>502 Bad Gateway</html>", "text/html", "did not answer with an OpenAI-style JSON"),
        (b'{"id": "x", "choices": [{"mess', "application/json", "sent a broken reply"),
        (
            completion('{"evidence": ["Paris is the cap', "length"),
            "application/json",
            "held no usable evidence (the reply was cut off at teacher.max_tokens)",
        ),
        (completion('{"evidence": []}'), "application/json", "held no usable evidence"),
        (b'{"choices": [{"message": null}]}', "application/json", "holds no message text"),
        (b'{"choices": [1]}', "application/json", "holds no message text"),
        (
            b'{"choices": [{"message": {"content": {"text": 1}}}]}',
            "application/json",
            "holds no message text",
        ),
    ],
)
def test_fake_teacher_bad_replies(body: bytes, content_type: str, expected: str) -> None:
    with fake_teacher_server(body, content_type) as url:
        proc = drag("ask", "Name a prime number.", env=remote(url))
    message = one_line_error(proc)
    assert proc.returncode == 3 and expected in message
    record = kept(message)
    assert record["question"] == "Name a prime number."
    if b"evidence" in body:  # what the teacher returned is kept too
        assert record["teacher_reply"] == json.loads(body)["choices"][0]["message"]["content"]


def test_bad_config_is_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[pipeline]\nk = 'lots'\n")
    proc = drag("--config", str(cfg), "config", "show")
    assert "pipeline.k (file): 'lots' is not a whole number" in one_line_error(proc)
    assert proc.returncode == 78
    proc = drag("ask", "x", env={"DRAG_PIPELINE_MODE": "telepathy"})
    assert "is not one of evidence, graph, combined, none" in one_line_error(proc)


def test_a_negative_config_value_is_a_value_not_an_option(tmp_path: Path) -> None:
    cfg = str(tmp_path / "config.toml")
    proc = drag("--config", cfg, "config", "set", "teacher.keep_alive", "-1")
    assert "teacher.keep_alive (new value): -1.0 is below the minimum 0" in one_line_error(proc)
    assert proc.returncode == 78


def test_config_set_says_what_it_wrote_and_what_overrides_it(tmp_path: Path) -> None:
    """With DRAG_PIPELINE_K=7 set, `config set pipeline.k 3` said "pipeline.k = 7" (the
    value in effect, not the one written) and nothing of why."""
    cfg = str(tmp_path / "config.toml")
    proc = drag("--config", cfg, "config", "set", "pipeline.k", "3", env={"DRAG_PIPELINE_K": "7"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().strip() == (
        f"pipeline.k = 3 in {cfg}; DRAG_PIPELINE_K in your environment overrides it (7)"
    )
    plain = drag("--config", cfg, "config", "set", "pipeline.k", "4")
    assert plain.stdout.decode().strip() == f"pipeline.k = 4 in {cfg}"
    # Letters as written, in what it says and in `config show` (it wrote "Zo\u00eb").
    named = drag("--config", cfg, "config", "set", "privacy.allow", "Zoë,名字")
    assert named.stdout.decode().strip() == f'privacy.allow = ["Zoë", "名字"] in {cfg}'
    shown = drag("--config", cfg, "config", "show").stdout.decode()
    assert 'privacy.allow               = ["Zoë", "名字"]' in shown
    # A model file whose name does not end in .gguf is a model all the same (drag reads
    # it by its first bytes), where a made-up name is refused.
    weights = tmp_path / "student.bin"
    weights.write_bytes(b"GGUF" + bytes(60))
    assert drag("--config", cfg, "config", "set", "student.model", str(weights)).returncode == 0


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("privacy.categories", "LOCATION=bogus", "the entity must be one of the policy's"),
        ("privacy.categories", "PLANET=strict", "the entity must be one of the policy's"),
        ("student.threads", "-5", "is below the minimum 0"),
        # A typo past any model's context: llama.cpp allocated until the system killed it.
        ("student.n_ctx", "99999999999999999999", "is above the maximum 262144"),
        ("teacher.n_ctx", "300000", "is above the maximum 262144"),
        # Written, then every question failed on it.
        ("student.model", "nosuchmodel", "unknown model 'nosuchmodel': give a path to a .gguf"),
    ],
)
def test_config_set_refuses_what_drag_would_refuse_later(
    tmp_path: Path, key: str, value: str, said: str
) -> None:
    """`config set` says "validated": a value every question would then fail on (exit 5
    of a privacy error, before) is refused when it is set, and nothing is written."""
    cfg = tmp_path / "config.toml"
    proc = drag("--config", str(cfg), "config", "set", key, value)
    assert said in one_line_error(proc) and proc.returncode == 78
    assert not cfg.exists()


def test_serve_refuses_to_start_on_categories_written_by_hand(tmp_path: Path) -> None:
    """privacy.categories written into the file by hand, not through `config set`: drag
    serve started and answered every request with an HTTP 500; it says so at its start,
    and listens on nothing."""
    cfg = tmp_path / "config.toml"
    cfg.write_text('[privacy]\ncategories = ["LOCATION=bogus"]\n')
    proc = drag("--config", str(cfg), "serve", "--port", str(free_port()))
    assert "the entity must be one of the policy's" in one_line_error(proc)
    assert proc.returncode == 78


def test_remote_teacher_without_model_says_what_to_set() -> None:
    proc = drag("ask", "hello", env={"DRAG_TEACHER_ENDPOINT": "http://127.0.0.1:9/v1"})
    assert "teacher.model is not set" in one_line_error(proc)


def test_config_show_reports_sources() -> None:
    proc = drag("config", "show", "--json", env={"DRAG_PIPELINE_K": "4"})
    assert proc.returncode == 0, proc.stderr
    rows = {r["key"]: r for r in json.loads(proc.stdout)["settings"]}
    assert rows["pipeline.k"]["value"] == 4 and rows["pipeline.k"]["source"] == "env"
    assert rows["pipeline.n"]["source"] == "default"


def test_interrupt_keeps_the_question() -> None:
    from assistant.base.errors import Interrupted
    from assistant.cli.common import kept as keep

    error = keep("What is 2+2?", KeyboardInterrupt())
    assert isinstance(error, Interrupted) and error.exit_code == 130
    assert kept(str(error))["question"] == "What is 2+2?"


def test_drag_bench_without_the_benchmarks_installed_says_how(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The benchmarks are not in the app's wheel: without them, one line that says how
    to install them, exit 2."""
    import sys

    from assistant.cli import main

    for name in [m for m in sys.modules if m == "drag_bench" or m.startswith("drag_bench.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "drag_bench", None)  # import drag_bench: not found
    with pytest.raises(SystemExit) as exited:
        main(["bench", "privacy", "--no-teacher"])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install -e ./bench" in err[0], err


def test_a_model_privacy_or_database_error_exits_with_its_own_code(tmp_path: Path) -> None:
    """The README's exit codes 4 (model), 5 (privacy: nothing was sent) and 6 (the local
    database), each with one line and the question kept where there is one."""
    model = drag("ask", "--mode", "none", "--student", str(tmp_path / "absent.gguf"), "Name one.")
    assert "model file" in one_line_error(model) and model.returncode == 4
    assert kept(one_line_error(model))["question"] == "Name one."
    question = "My SSN is 536-22-8471, which tax form do I need?"
    privacy = drag("ask", question)  # a review is needed and there is no terminal to ask on
    assert "needs your review" in one_line_error(privacy) and privacy.returncode == 5
    assert kept(one_line_error(privacy))["question"] == question
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database, only text long enough to fill a header" * 4)
    store = drag("audit", "list", env={"DRAG_STORE_DATABASE": str(bad)})
    assert "file is not a database" in one_line_error(store) and store.returncode == 6


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["ask", "--mode", "bogus", "x"], "Invalid value for '--mode'"),
        (["ask", "--bogus"], "No such option '--bogus'"),
        (["audit", "show", str(2**63)], "Invalid value for 'UPLOAD_ID'"),  # past SQLite's
        (["audit", "verify", "--head", "bogus"], "is not ID:HASH"),  # a typo, not a broken ledger
        (["nosuch"], "No such command 'nosuch'"),
        # A mistyped config path ran on the defaults without a word.
        (["--config", "/nonexistent/drag.toml", "ask", "--offline", "x"], "no such file"),
        (["teacher", "serve", "--port", "70000"], "Invalid value for '--port'"),  # no model loads
        (["config", "set-key"], "no key on standard input"),  # was a getpass warning
        (["ask", "--offline", "--k", "-1", "x"], "pipeline.k (flag): -1 is below the minimum"),
        # Said twice (skipped, then an error saying "the rest was indexed"): once.
        (["index", "/nonexistent/x.txt"], "no such file or folder: /nonexistent/x.txt (nothing"),
        # A review asked for was skipped: the question went out with --yes (the README:
        # "never with --review").
        (["ask", "--review", "--yes", "x"], "--yes sends without asking: choose one"),
    ],
)
def test_a_command_line_mistake_is_one_line_and_exit_2(args: list[str], said: str) -> None:
    proc = drag(*args)
    assert proc.returncode == 2 and said in one_line_error(proc)


def test_a_group_named_alone_shows_its_help_as_written() -> None:
    proc = drag("audit")
    help_text = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in help_text
    assert "\nCommands:\n" in help_text and "\n  verify " in help_text


def test_forget_takes_one_path_and_never_indexes_the_next(tmp_path: Path) -> None:
    """`drag index --forget a b` read b as a path to index: the file the user wanted
    gone was added.  Refused, and nothing is indexed."""
    secret = tmp_path / "secret.txt"
    secret.write_text("Priya's notes on the Zenlytics offer.\n", "utf-8")
    proc = drag("index", "--forget", str(tmp_path / "old.txt"), str(secret))
    assert proc.returncode == 2 and "--forget takes one path" in one_line_error(proc)
    listed = drag("index", "--list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout)["files"] == []


def test_an_empty_path_is_an_error_not_the_folder_it_runs_in(tmp_path: Path) -> None:
    """`drag index --forget "$F"` with F unset forgot every indexed file under the folder
    it ran in (Path("") is "."), and `drag index ""` indexed that folder: each empty
    path is refused, and the index is as it was."""
    notes = tmp_path / "notes.md"
    notes.write_text("Priya's notes on the Zenlytics offer.\n", "utf-8")
    assert drag("index", str(notes), cwd=tmp_path).returncode == 0
    (tmp_path / "more.md").write_text("Not to be indexed.\n", "utf-8")
    for args in (["index", "--forget", ""], ["index", " "], ["--config", "", "doctor"]):
        proc = drag(*args, cwd=tmp_path)
        assert proc.returncode == 2 and "the path is empty" in one_line_error(proc), args
    listed = drag("index", "--list", "--json", cwd=tmp_path)
    assert [Path(f["path"]).name for f in json.loads(listed.stdout)["files"]] == ["notes.md"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_output_that_cannot_be_written_is_one_line_not_an_internal_error(tmp_path: Path) -> None:
    """A full disk under standard output, an export into a folder that is not there:
    each was "drag: internal error" (exit 70), and the export made the folder."""
    for args in (["--help"], ["config", "show"]):
        with Path("/dev/full").open("wb") as full:
            proc = subprocess.run(
                [sys.executable, "-m", "assistant", *args],
                stdout=full,
                stderr=subprocess.PIPE,
                timeout=120,
                check=False,
            )
        err = proc.stderr.decode()
        assert proc.returncode == 1 and err.splitlines() == [
            "drag: error: writing standard output failed: No space left on device"
        ], err
    # DRAG_DEBUG=1 shows the traceback instead, as the one-line errors say.
    with Path("/dev/full").open("wb") as full:
        debug = subprocess.run(
            [sys.executable, "-m", "assistant", "--help"],
            stdout=full,
            stderr=subprocess.PIPE,
            env={**os.environ, "DRAG_DEBUG": "1"},
            timeout=120,
            check=False,
        )
    assert b"Traceback" in debug.stderr and b"OSError: [Errno 28]" in debug.stderr
    target = tmp_path / "nosuch" / "ledger.jsonl"
    proc = drag("audit", "export", "-o", str(target))
    said = one_line_error(proc)
    assert proc.returncode == 1 and f"cannot write {target}: No such file or directory" in said
    assert not target.parent.exists()


def test_an_export_to_a_pipe_or_device_leaves_its_mode_alone(tmp_path: Path) -> None:
    """`drag audit export -o /dev/full` as root made the device 0600 (the export's file
    is made private; a device or pipe named is not the export's to change)."""
    fifo = tmp_path / "ledger.pipe"
    os.mkfifo(fifo, 0o644)
    fifo.chmod(0o644)  # whatever the umask
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = drag("audit", "export", "-o", str(fifo))
    reader.join(timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert got == [b""] and stat.S_IMODE(fifo.stat().st_mode) == 0o644


def test_piped_text_is_read_before_the_words_when_asked_with_a_dash() -> None:
    """`git diff | drag ask - "explain this"`: the piped text, then the typed words
    (here offline with an empty cache: the question is kept whole as a draft, which
    shows what was asked)."""
    proc = drag("ask", "--offline", "-", "explain this", stdin=b"diff --git a/notes.md\n+Priya\n")
    record = kept(one_line_error(proc))
    assert record["question"] == "diff --git a/notes.md\n+Priya\n\nexplain this"


def test_a_dash_with_nothing_piped_says_so() -> None:
    """`drag ask - "why?"` typed in a terminal said "no question: give it as an argument
    … or on standard input", though the words were there."""
    import pty

    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "assistant", "ask", "--offline", "-", "why?"],
            stdin=follower,
            capture_output=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert "nothing is piped" in one_line_error(proc) and proc.returncode == 2


def _asked_beside(stdin: int) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "assistant", "ask", "--offline", "explain this"],
        stdin=stdin,
        capture_output=True,
        env={**os.environ, "DRAG_TEACHER_MAX_RETRIES": "0"},
        timeout=120,
        check=False,
    )


def test_words_beside_piped_text_leave_it_unread_and_say_so() -> None:
    """A script fed to a shell on standard input, or a loop's list: the rest of it is
    not the question (it would be sent), and is left for the script; a note says how to
    read it."""
    reader, writer = os.pipe()
    os.write(writer, b"export SECRET_TOKEN=abc123\nnext command\n")
    try:
        proc = _asked_beside(reader)
        left = os.read(reader, 100)  # still there for the shell
    finally:
        os.close(reader)
        os.close(writer)
    err = proc.stderr.decode()
    assert "the text piped in was not read" in err and "Traceback" not in err
    assert kept(err.splitlines()[-1])["question"] == "explain this"
    assert left == b"export SECRET_TOKEN=abc123\nnext command\n"


def test_words_beside_a_file_on_standard_input_leave_it_unread(tmp_path: Path) -> None:
    """`while read q; do drag ask "$q"; done < questions.txt`: each call asks its own
    words and leaves the file where the loop reads it."""
    listed = tmp_path / "questions.txt"
    listed.write_bytes(b"second question\nthird question\n")
    with listed.open("rb") as handle:
        proc = _asked_beside(handle.fileno())
        assert handle.read() == b"second question\nthird question\n"
    assert kept(one_line_error(proc))["question"] == "explain this"


def test_serve_help_names_the_models_it_answers() -> None:
    """`drag serve --help` said "any other model: the teacher"; a request for another
    model is refused (the README: teacher.model, "local-teacher" for the embedded one)."""
    helped = " ".join(drag("serve", "--help").stdout.decode().split())
    assert 'model "drag": the DRAG pipeline; model teacher.model, or "local-teacher"' in helped
    assert "any other model" not in helped


@pytest.mark.parametrize(
    ("closed", "args", "code", "said"),
    [
        (1, ["audit", "list"], 2, "drag: error: standard output is closed: nothing was done"),
        (0, ["config", "set-key"], 2, "drag: error: no key on standard input"),
        (0, ["chat", "--plain"], 0, ""),
    ],
    ids=["output", "input-key", "input-chat"],
)
def test_a_closed_standard_stream_is_said_or_read_as_empty(
    closed: int, args: list[str], code: int, said: str
) -> None:
    """`drag … >&-`, `drag … <&-`: output closed is a one-line error before anything is
    done (it was an internal error, or exit 0 with nothing written); input closed reads
    as empty.  The closed descriptor is opened on the null device first, so that no file
    drag opens (the database) takes its number."""
    proc = subprocess.run(
        [sys.executable, "-m", "assistant", *args],
        capture_output=True,
        preexec_fn=lambda: os.close(closed),
        timeout=120,
        check=False,
    )
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == code, err
    assert "Traceback" not in err and "internal error" not in err
    assert err.strip().startswith(said)


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["audit", "list"], {"DRAG_CONFIG": "~nouser-of-drag/config.toml"}),
        (["audit", "list"], {"DRAG_STORE_DATABASE": "~nouser-of-drag/drag.db"}),
        (["config", "set", "student.model", "~nouser-of-drag/model.gguf"], {}),
    ],
    ids=["config", "database", "model"],
)
def test_a_home_of_a_user_this_system_does_not_know_is_one_line(
    args: list[str], env: dict[str, str]
) -> None:
    """`~someone/…` for a user with no home here: pathlib raises RuntimeError, which was
    an internal error (exit 70); it is a one-line error that names the user."""
    proc = drag(*args, env=env)
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2, err
    assert err.startswith("drag: error: '~nouser-of-drag/") and "no home folder is known" in err


@pytest.mark.parametrize("args", [["drafts", "show"], ["drafts", "rm"], ["index"]])
def test_a_name_too_long_for_the_file_system_is_no_such_thing(
    args: list[str], tmp_path: Path
) -> None:
    """A 300-character name: Python 3.11's is_file() raises 'File name too long', which
    was an internal error (exit 70); it is named as not there."""
    long = "a" * 300 if args[0] == "drafts" else str(tmp_path / ("a" * 300))
    proc = drag(*args, long)
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2, err
    assert err.startswith(("drag: error: no kept question", "drag: error: no such file or folder"))


@pytest.mark.parametrize("sent", ["SIGTERM", "SIGHUP"])
def test_a_question_ended_by_a_signal_is_kept_as_for_ctrl_c(sent: str) -> None:
    """`timeout 60 drag ask …` (SIGTERM), a terminal closed (SIGHUP) while the teacher
    is asked: the question is kept, as Ctrl+C keeps it (it was lost)."""
    import signal

    question = "Why do leaves change colour in autumn?"
    with silent_teacher() as (teacher, settings):
        asking = subprocess.Popen(
            [sys.executable, "-m", "assistant", "ask", "--yes", question],
            env={**os.environ, **settings},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # As a terminal starts it: the tests may run under nohup (SIGHUP ignored),
            # and an ignored signal stays ignored (the next test).
            preexec_fn=lambda: signal.signal(getattr(signal, sent), signal.SIG_DFL),
        )
        try:
            connection, _ = teacher.accept()  # the question is with the teacher
            with connection:
                asking.send_signal(getattr(signal, sent))
                _out, err = asking.communicate(timeout=60)
        finally:
            if asking.poll() is None:
                asking.kill()
                asking.wait()
    said = err.decode("utf-8", "replace").strip()
    assert asking.returncode == 128 + getattr(signal, sent), said  # as a shell counts it
    assert kept(said)["question"] == question


@pytest.mark.parametrize("sent", ["SIGTERM", "SIGHUP"])
def test_a_chat_ended_by_a_signal_keeps_its_question_and_ends(sent: str) -> None:
    """`drag chat --plain` stopped by SIGTERM or SIGHUP while a question was with the
    teacher died, the question lost.  It is kept, and the chat ends (where Ctrl+C goes
    on to the next question): the next line is not read."""
    import signal

    question = "Why do leaves change colour in autumn?"
    with silent_teacher(DRAG_PRIVACY_REVIEW="never") as (teacher, settings):
        reader, writer = os.pipe()
        chatting = subprocess.Popen(
            [sys.executable, "-m", "assistant", "chat", "--plain"],
            env={**os.environ, **settings},
            stdin=reader,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=lambda: signal.signal(getattr(signal, sent), signal.SIG_DFL),
        )
        os.close(reader)
        try:
            os.write(writer, f"{question}\nWhat is a leaf?\n".encode())
            connection, _ = teacher.accept()  # the first question is with the teacher
            with connection:
                chatting.send_signal(getattr(signal, sent))
                _out, err = chatting.communicate(timeout=60)
        finally:
            os.close(writer)
            if chatting.poll() is None:
                chatting.kill()
                chatting.wait()
    said = err.decode("utf-8", "replace")
    assert chatting.returncode == 128 + getattr(signal, sent), said
    (line,) = [ln for ln in said.splitlines() if "drag: error" in ln]  # said once
    assert kept(line)["question"] == question


def test_a_drag_home_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    """DRAG_HOME naming a file: `drag serve --token` was an internal error (exit 70)."""
    home = tmp_path / "home"
    home.write_text("not a folder")
    proc = drag("serve", "--token", env={"DRAG_HOME": str(home)})
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2 and err.startswith("drag: error: DRAG_HOME "), err
    assert "is not a folder" in err


def test_index_json_names_a_file_whose_name_is_not_utf8_in_valid_json(tmp_path: Path) -> None:
    """`drag index --json` wrote such a name's raw byte: the output was no UTF-8, and no
    JSON a script could load.  The byte is a \\u escape, and the name comes back whole."""
    folder = tmp_path / "notes"
    folder.mkdir()
    name = os.fsdecode(b"bad\xffname.md")
    (folder / name).write_text("Meet Marta in Berlin on Friday.")
    proc = drag("index", "--json", str(folder))
    assert proc.returncode in (0, 2), proc.stderr.decode("utf-8", "replace")
    out = json.loads(proc.stdout.decode("utf-8"))  # strict: no raw byte
    skipped = [os.fsencode(s["path"]) for s in out["indexed"]["skipped"]]
    assert os.fsencode(folder / name) in skipped


@pytest.mark.parametrize(("args", "refused"), [(["serve"], False), (["audit", "list"], True)])
def test_output_closed_stops_a_command_but_not_a_server(args: list[str], refused: bool) -> None:
    """`drag serve >&- 2>&- &` ran before output closed was refused, its announcements
    lost: a server's work is not its output, so it still runs; any other command stops."""
    code = (
        "import sys\n"
        "from assistant.cli.root import _standard_streams\n"
        f"_standard_streams({args!r})\n"
        "print('went on', file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        preexec_fn=lambda: os.close(1),
        timeout=120,
        check=False,
    )
    err = proc.stderr.decode("utf-8", "replace")
    if refused:
        assert proc.returncode != 0 and "standard output is closed" in err
    else:
        assert proc.returncode == 0 and err.strip() == "went on", err


def test_a_folder_holding_a_file_named_with_a_tilde_is_indexed(tmp_path: Path) -> None:
    """Word's lock file "~$report.docx" in a folder indexed as ".": its name was taken
    for a user's home ("~$report.docx"), and the whole run failed."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "~$report.docx").write_bytes(b"lock")
    (folder / "plan.md").write_text("Meet Marta in Berlin on Friday.")
    proc = drag("index", "--json", ".", cwd=folder)
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    assert [Path(p).name for p in json.loads(proc.stdout)["indexed"]["added"]] == ["plan.md"]


def test_a_signal_ignored_when_drag_ask_starts_stays_ignored() -> None:
    """`nohup drag ask …`: SIGHUP ignored, so that the answer outlives the terminal; the
    question-keeping handler took it over, and a logout stopped the answer."""
    import signal

    from assistant.base.signals import ended_as_interrupted

    seen: dict[str, Any] = {}

    @ended_as_interrupted
    def command() -> None:
        seen["hup"], seen["term"] = (
            signal.getsignal(signal.SIGHUP),
            signal.getsignal(signal.SIGTERM),
        )

    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        command()
        assert seen["hup"] == signal.SIG_IGN and callable(seen["term"])  # TERM: as Ctrl+C
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)


def test_a_second_signal_does_not_cut_short_what_the_first_began() -> None:
    """A closed terminal sends SIGHUP twice (the shell's, then the kernel's), systemd
    SIGTERM then SIGHUP: the second raised KeyboardInterrupt again, inside the keeping
    of the question the first had begun.  While a question is kept, a signal only
    counts."""
    import signal

    from assistant.base.signals import ending_as_interrupted, held

    with ending_as_interrupted() as got:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            deadline = time.monotonic() + 10  # the handler runs at the next instruction
            while time.monotonic() < deadline:
                time.sleep(0.001)
            raise AssertionError("SIGTERM did not interrupt")
        except KeyboardInterrupt:
            try:
                with held():  # as the question is kept
                    os.kill(os.getpid(), signal.SIGTERM)
                    deadline = time.monotonic() + 10
                    while len(got) < 2 and time.monotonic() < deadline:
                        time.sleep(0.001)
            except KeyboardInterrupt:
                raise AssertionError("the second signal interrupted the keeping") from None
    assert got == [signal.SIGTERM, signal.SIGTERM]


def test_a_signal_at_the_review_keeps_the_question() -> None:
    """`drag ask --review`, then `kill` at its y/N: click's prompt made the interrupt its
    own Abort ("drag: cancelled", status 130), which nothing kept the question for."""
    import pty
    import signal

    question = "My SSN is 536-22-8471: which tax form do I file?"
    leader, follower = pty.openpty()
    asking = subprocess.Popen(
        [sys.executable, "-m", "assistant", "ask", "--review", question],
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=follower,
        env={**os.environ, "DRAG_PRIVACY_REWRITE": "never"},
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL),
    )
    os.close(follower)
    shown = b""
    try:
        deadline = time.monotonic() + 180
        while b"[y/N]" not in shown and time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1)
            if ready:
                shown += os.read(leader, 65536)
        assert b"[y/N]" in shown, shown.decode("utf-8", "replace")
        asking.send_signal(signal.SIGTERM)
        # Read all along: a terminal that is not read holds a writer (the status lines
        # of a student model still loading, which the end waits for).
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if select.select([leader], [], [], 1)[0]:
                try:
                    shown += os.read(leader, 65536)
                    continue
                except OSError:  # the other end closed: all is read
                    break
            if asking.poll() is not None:
                break
        asking.wait(10)
    finally:
        os.close(leader)
        if asking.poll() is None:
            asking.kill()
            asking.wait()
    plain = re.sub(r"\x1b\[[0-9;]*m", "", shown.decode("utf-8", "replace"))  # its colours
    said = [ln.strip() for ln in plain.splitlines() if "drag: error" in ln]
    assert asking.returncode == 143 and len(said) == 1, plain
    assert kept(said[0])["question"] == question


@pytest.mark.timeout(60)  # the backstop: a wait the signal does not end
def test_a_signal_another_thread_took_ends_the_reviews_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`kill` at `drag ask --review`'s y/N was not seen until a key was pressed, in one
    try of three on a busy machine: the kernel gave the signal to another thread of drag
    (a model loader's), and Python, which runs the handler in the main thread only, did
    not wake it from the terminal's read.  Here the signal is sent to another thread on
    purpose; the wait ends with the interrupt (the caller keeps the question)."""
    import pty
    import signal
    import threading

    from assistant.base.signals import ending_as_interrupted
    from assistant.cli.review import confirm

    leader, follower = pty.openpty()  # a terminal nobody types in
    try:
        with open(follower, encoding="utf-8", closefd=False) as terminal:
            monkeypatch.setattr(sys, "stdin", terminal)

            main = threading.main_thread().native_id

            def takes_the_signal() -> None:
                """Once the main thread waits on the terminal (asleep 20 looks in a
                row), SIGTERM to this thread."""
                asleep = 0
                while asleep < 20:
                    stat = Path(f"/proc/self/task/{main}/stat").read_text()
                    asleep = asleep + 1 if stat.rpartition(")")[2].split()[0] == "S" else 0
                    time.sleep(0.005)
                signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

            with ending_as_interrupted() as got, pytest.raises(KeyboardInterrupt):
                threading.Thread(target=takes_the_signal).start()
                confirm("Send the sanitized question to the teacher?")
        assert got == [signal.SIGTERM]
    finally:
        os.close(leader)
        os.close(follower)


def _sigterm_taking_its_time(done: list[bool]) -> None:
    """SIGTERM to this process, then half a second of work before ``done`` is told."""
    import signal

    os.kill(os.getpid(), signal.SIGTERM)
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        pass
    done.append(True)


def _interrupted_after(start: Callable[[], object]) -> list[int]:
    """``start()`` inside signals.ending_as_interrupted, then a wait for the interrupt
    (it must come within 10 s); the signals that block got."""
    from assistant.base.signals import ending_as_interrupted

    with ending_as_interrupted() as got:
        try:
            start()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                time.sleep(0.001)
            raise AssertionError("SIGTERM never came")
        except KeyboardInterrupt:
            pass
    return got


def test_a_signal_inside_an_import_comes_once_the_import_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM while the models loaded hung `drag ask` for good (6 of 9 tries of an
    exploratory test): its KeyboardInterrupt, raised inside the import machinery, was
    thrown away by Python with an import lock still held, and the loaders waited on it.
    A signal that comes inside an import is taken once the import is done."""
    import signal

    (tmp_path / "drag_slow_import.py").write_text(
        "import os, signal, time\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "end = time.monotonic() + 0.5\n"
        "while time.monotonic() < end:  # an import that takes its time\n"
        "    pass\n"
        "DONE = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        got = _interrupted_after(lambda: importlib.import_module("drag_slow_import"))
        assert sys.modules["drag_slow_import"].DONE and got == [signal.SIGTERM]
    finally:
        sys.modules.pop("drag_slow_import", None)


@pytest.mark.parametrize("ends", ["well", "on an error"])
def test_a_signal_while_the_block_ends_only_counts(
    ends: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review (a helper): a signal while drag ask's block put its handlers back was
    raised there, the handlers left half put back, and drag ended as Ctrl+C does (130),
    not as the signal says.  At the block's end a signal only counts; a block that
    ended well sends it again once its handlers are back (drag ends as the signal
    says); one that ends on an error goes on to say so.  (The signal is sent from
    inside the putting back, which is otherwise the real one.)"""
    import signal

    from assistant.base import signals

    put_back = signals.put_back

    def signalled_then_put_back(before: dict[int, Any]) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # taken at once, in this frame
        put_back(before)

    after: list[int] = []
    monkeypatch.setattr(signals, "put_back", signalled_then_put_back)
    kept = signal.signal(signal.SIGTERM, lambda signum, _frame: after.append(signum))
    try:
        with contextlib.suppress(ValueError), signals.ending_as_interrupted() as got:
            if ends == "on an error":
                raise ValueError("the block's own error")
    except KeyboardInterrupt:
        raise AssertionError("the signal interrupted the block's end") from None
    finally:
        signal.signal(signal.SIGTERM, kept)
    assert got == [signal.SIGTERM]
    assert after == ([signal.SIGTERM] if ends == "well" else [])


def test_a_signal_inside_a_weakref_callback_comes_once_it_is_done() -> None:
    """A review (a helper): the interrupt of a signal that came inside a weak
    reference's callback (logging's, as a handler was freed) was thrown away by Python
    too, and that signal was lost.  What Python throws away comes again."""
    import signal
    import weakref

    done: list[bool] = []

    class Freed:
        pass

    def freed_at_once() -> weakref.ref[Freed]:
        return weakref.ref(Freed(), lambda _ref: _sigterm_taking_its_time(done))

    got = _interrupted_after(freed_at_once)
    assert done == [] and got[0] == signal.SIGTERM  # the callback was cut short


def test_a_signal_inside_a_finaliser_comes_once_it_is_done() -> None:
    """The same hang, where the signal came inside an object's __del__ (regex's, as
    spaCy's patterns were freed): Python throws away what __del__ raises."""
    import signal

    done: list[bool] = []

    class Freed:
        def __del__(self) -> None:
            _sigterm_taking_its_time(done)

    got = _interrupted_after(Freed)  # freed at once
    assert done == [True] and got == [signal.SIGTERM]
