"""The user's own files end to end: the real spaCy recognizer, the real embedder on ONNX
Runtime, the real sealed SQLite store, the real tiny student (llama.cpp) and, for the
privacy test, the real teacher server.  No fakes here."""

from __future__ import annotations

import base64
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from assistant.base import config
from assistant.base.errors import Interrupted
from assistant.cli import cli
from assistant.core import localfiles, pipeline
from assistant.core.session import Session
from assistant.privacy.detector import LEARNT
from assistant.store import files as stored
from tests.conftest import TEST_MODEL, SocketLog
from tests.test_cli_errors import drag, one_line_error

pytestmark = pytest.mark.integration

NOTES = {
    "mia.md": "Mia Okonkwo told me her dentist is Dr. Farouk Haddad. "
    "She has seen him every spring since 2019.",
    "haddad.txt": "Dr. Farouk Haddad moved his surgery to 14 Linden Lane in Bristol last year, "
    "next to the old bakery.",
    "dental1.md": "Where is a good dentist practice? The dentist practice of Dr. Lee is in the "
    "shopping mall, where the practice opens at nine.",
    "dental2.md": "Which dentist practice is near? Our practice: the dentist Dr. Gomez runs a "
    "practice by the station.",
    "dental3.md": "Someone asked where a dentist practice is. A new dentist practice opened on "
    "the high street.",
    "garden.md": "The tomatoes in the garden need water twice a week in July.",
    "chats/20260105.txt": "Time: 20260105_11:00\nLiHua: Lunch on the 8th with you?\n"
    "WolfgangSchulz: Yes, at the noodle bar on Kings Road. I booked a table for two.",
}


def write_notes(root: Path) -> Path:
    for name, text in NOTES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    return root


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return write_notes(tmp_path / "notes")


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Session]:
    monkeypatch.setenv("DRAG_STUDENT_MODEL", TEST_MODEL)
    with Session(config.load()) as rt:
        yield rt


def run(env: dict[str, str], *args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def uploads(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM uploads").fetchone()[0])


def test_a_folder_indexed_end_to_end_answers_from_it_with_sources_and_sends_nothing(
    notes: Path, socket_guard: SocketLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check of the answer against the passages has a test of its own (below).
    env = {"DRAG_STUDENT_MODEL": TEST_MODEL, "DRAG_FILES_ABSTAIN": "false"}
    out = run(env, "index", str(notes)).stdout
    assert "indexed 7 new and 0 changed file(s)" in out and "0 skipped" in out
    listed = run(env, "index", "--list").stdout
    chat_size = (notes / "chats" / "20260105.txt").stat().st_size
    line = next(ln for ln in listed.splitlines() if ln.startswith(str(notes / "chats")))
    assert re.fullmatch(
        rf"{re.escape(str(notes / 'chats' / '20260105.txt'))}  chat  {chat_size} B  1 chunks  "
        r"indexed \d{4}-\d\d-\d\d \d\d:\d\d",
        line,
    ), line
    assert "7 file(s)" in listed

    asked = run(env, "ask", "--files", "--json", "--k", "2", "Where is the noodle bar?")
    record = json.loads(asked.stdout)
    assert record["source"] == "files" and record["answer"]
    top = record["passages"][0]
    assert top["path"] == str(notes / "chats" / "20260105.txt")
    assert top["time"] == "2026-01-05 11:00"  # the chat's time, for the user to look up
    assert "Kings Road" in top["text"]
    # Of the two passages found, the one that holds the question's words is read.
    assert len(record["passages"]) == 1
    # Nothing left the machine: no connection at all, no ledger entry.
    assert socket_guard.seen == [] and socket_guard.sent == b""
    assert uploads(Path(os.environ["DRAG_STORE_DATABASE"])) == 0
    plain = run(env, "ask", "--files", "--k", "2", "Where is the noodle bar?").stdout
    assert "Sources (your files, best first):" in plain
    assert f"  1. {notes / 'chats' / '20260105.txt'}, 2026-01-05 11:00" in plain
    # Under it, the messages the student read.
    assert "\n       WolfgangSchulz: Yes, at the noodle bar on Kings Road." in plain
    assert "Context: from your files (minirag); nothing sent" in plain

    # --forget takes a path as typed, relative to where the user is.
    monkeypatch.chdir(notes)
    forgot = run(env, "index", "--forget", "garden.md").stdout  # a file: not "under" it
    assert forgot.splitlines()[-1] == "forgot garden.md", forgot
    assert "garden.md" not in run(env, "index", "--list").stdout
    again = drag("index", "--forget", "garden.md", env=env)
    assert again.returncode == 2 and b"not in the index: garden.md" in again.stderr
    typo = drag("index", str(notes / "nope"), str(notes / "mia.md"), env=env)
    assert typo.returncode == 2, typo.stderr
    assert b"no such file or folder: " + str(notes / "nope").encode() in typo.stderr
    assert b"0 new and 0 changed file(s)" in typo.stdout  # the rest was looked at


def test_a_files_answer_cut_at_max_tokens_says_so(notes: Path) -> None:
    """The student stopped at student.max_tokens on an answer from the files: the user is
    told it was cut, in the terminal's output."""
    env = {"DRAG_STUDENT_MODEL": TEST_MODEL, "DRAG_FILES_ABSTAIN": "false"}
    run(env, "index", str(notes))
    cut = run({**env, "DRAG_STUDENT_MAX_TOKENS": "3"}, "ask", "--files", "Where is the noodle bar?")
    assert "warning: the answer was cut off at student.max_tokens (3 tokens)" in cut.output
    # Set by the environment: the advice is the variable (`drag config set` would not do).
    assert "DRAG_STUDENT_MAX_TOKENS=6 (the environment drag runs in sets it" in cut.output
    assert "drag config set student.max_tokens" not in cut.output


def test_the_graph_path_finds_a_two_hop_answer_that_vector_search_misses(
    notes: Path, runtime: Session
) -> None:
    localfiles.index(runtime, [notes])
    question = "Where does Mia's dentist work?"  # Mia -> Dr. Haddad -> his surgery
    graph = [Path(p.path).name for p in localfiles.search(runtime, question, k=4)]
    vector = [Path(p.path).name for p in localfiles.search(runtime, question, k=4, method="vector")]
    assert "haddad.txt" in graph and "mia.md" in graph
    assert "haddad.txt" not in vector


def test_indexing_called_off_stops_after_the_file_being_read_and_keeps_what_it_read(
    notes: Path, runtime: Session
) -> None:
    """The app closed while files were indexed: the process waited for the whole
    folder (hundreds of files, minutes).  The run stops after the file being read; what
    was read is stored and its names taught to the detector; the rest waits for the
    next run."""
    from assistant.base import calloff

    call_off = calloff.CallOff()

    def progress(done: int, total: int, path: str) -> None:
        if done == 3:  # the app closes while the fourth file is read
            call_off.set()

    with calloff.scope(call_off):
        stopped = localfiles.index(runtime, [notes], progress=progress)
    assert len(stopped.added) == 4 and stopped.stopped.endswith("3 file(s) not read")
    assert "stopped: the app was closed" in stopped.line()
    runtime.refresh_learnt()
    assert runtime.learnt().names  # taught from the four
    rest = localfiles.index(runtime, [notes])
    assert len(rest.added) == 3 and len(rest.unchanged) == 4 and not rest.stopped


def test_reindexing_an_unchanged_folder_does_no_work_and_a_changed_file_replaces_its_chunks(
    notes: Path, runtime: Session
) -> None:
    first = localfiles.index(runtime, [notes])
    assert len(first.added) == 7
    again = localfiles.index(runtime, [notes])
    assert (again.added, again.replaced, again.chunks, len(again.unchanged)) == ([], [], 0, 7)

    (notes / "garden.md").write_text("The roses need pruning in March.\n", encoding="utf-8")
    changed = localfiles.index(runtime, [notes])
    assert changed.replaced == [str(notes / "garden.md")] and len(changed.unchanged) == 6
    texts = runtime.files_index().loaded.chunk_texts
    assert "The roses need pruning in March." in texts
    assert not any("tomatoes" in t for t in texts)
    assert len(texts) == 7

    # A file emptied since: skipped, and its earlier text does not stay behind.
    (notes / "garden.md").write_text("\n\n", encoding="utf-8")
    emptied = localfiles.index(runtime, [notes])
    assert [s.line() for s in emptied.skipped] == [
        f"skipped {notes / 'garden.md'}: no text in it; its earlier text was removed from the index"
    ]
    assert emptied.removed == [str(notes / "garden.md")]
    assert not any("roses" in t for t in runtime.files_index().loaded.chunk_texts)

    # A file the walk no longer reads (here a pipe in its place; or grown too large):
    # the same.  One that is gone waits for --forget.
    (notes / "haddad.txt").unlink()
    os.mkfifo(notes / "haddad.txt")
    piped = localfiles.index(runtime, [notes])
    assert [s.line() for s in piped.skipped] == [
        f"skipped {notes / 'haddad.txt'}: not a regular file; its earlier text was removed "
        "from the index",
        f"skipped {notes / 'garden.md'}: no text in it",
    ]
    assert piped.removed == [str(notes / "haddad.txt")]
    assert not any("Linden Lane" in t for t in runtime.files_index().loaded.chunk_texts)
    (notes / "mia.md").unlink()
    gone = localfiles.index(runtime, [notes])
    assert gone.removed == [] and any("Mia" in t for t in runtime.files_index().loaded.chunk_texts)


def test_a_file_name_that_is_not_utf8_is_one_skipped_line_and_the_rest_is_indexed(
    notes: Path, runtime: Session
) -> None:
    odd = notes / os.fsdecode(b"caf\xe9.txt")  # a Latin-1 name, as old disks hold
    odd.write_text("The café opens at nine.\n", encoding="utf-8")
    report = localfiles.index(runtime, [notes])
    assert len(report.added) == 7
    assert [s.reason for s in report.skipped] == ["a file name that is not UTF-8"]


def test_forget_leaves_no_chunk_entity_or_embedding_of_the_file(
    notes: Path, runtime: Session
) -> None:
    localfiles.index(runtime, [notes])
    before = runtime.files_index().loaded
    assert "Farouk Haddad" in before.entity_names and "Bristol" in before.entity_names
    gone = localfiles.forget(runtime, notes / "haddad.txt")
    assert gone == [str(notes / "haddad.txt")]
    after = runtime.files_index().loaded
    db = runtime.store.db
    assert len(after.chunk_texts) == len(before.chunk_texts) - 1
    assert not any("Linden Lane" in t for t in after.chunk_texts)
    # Bristol was named in that file only; Haddad is still named in mia.md.
    assert "Bristol" not in after.entity_names and "Farouk Haddad" in after.entity_names
    counts = [
        int(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
        for t in ("file_chunks", "file_entities", "file_mentions")
    ]
    assert counts[0] == len(after.chunk_ids) == len(after.chunk_vectors)
    assert counts[1] == len(after.entity_ids) == len(after.entity_vectors)
    assert counts[2] == len(after.mentions)
    # A folder forgets everything under it.
    assert len(localfiles.forget(runtime, notes)) == 6
    assert [
        int(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
        for t in ("file_sources", "file_chunks", "file_entities", "file_mentions")
    ] == [0, 0, 0, 0]


def test_a_forgotten_file_leaves_no_bytes_in_the_database_files(
    notes: Path, runtime: Session
) -> None:
    """Its sealed chunks are overwritten, not left in freed pages or the write-ahead log
    (which would keep them readable to the key until a VACUUM)."""
    localfiles.index(runtime, [notes])
    db = runtime.store.db
    (source,) = [
        s for s in stored.sources(db, runtime.store.sealer) if s.path.endswith("haddad.txt")
    ]
    sealed = [
        bytes(r[0]) if isinstance(r[0], bytes) else str(r[0]).encode()
        for r in db.execute(
            "SELECT body FROM file_chunks WHERE source_id = ? UNION ALL "
            "SELECT path FROM file_sources WHERE id = ?",
            [source.id, source.id],
        ).fetchall()
    ]
    path = Path(os.environ["DRAG_STORE_DATABASE"])

    def raw() -> bytes:
        return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))

    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert sealed and all(s[8:40] in raw() for s in sealed)  # there before
    assert localfiles.forget(runtime, notes / "haddad.txt")
    left = raw()
    assert not [s[8:40] for s in sealed if s[8:40] in left]


def test_the_index_is_sealed_at_rest(notes: Path, runtime: Session) -> None:
    localfiles.index(runtime, [notes])
    runtime.store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    path = Path(os.environ["DRAG_STORE_DATABASE"])
    raw = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    loaded = runtime.files_index().loaded
    assert loaded.chunk_texts  # something was indexed
    for plain in ("Linden Lane", "Okonkwo", "Farouk", "noodle bar", str(notes)):
        assert plain.encode() not in raw, plain
    # The embeddings too: no stored vector's bytes (float16, as the store packs them).
    from assistant.store.cache import pack

    for vector in [*loaded.chunk_vectors, *loaded.entity_vectors]:
        assert pack(vector)[:48] not in raw


def test_unreadable_and_binary_files_are_skipped_with_their_reason_and_the_rest_indexed(
    tmp_path: Path,
) -> None:
    root = write_notes(tmp_path / "notes")
    (root / "photo.txt").write_bytes(b"\x89PNG\x00\x00binary")
    (root / "latin.md").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    result = CliRunner().invoke(cli, ["index", str(root)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"skipped {root / 'photo.txt'}: a binary file (it holds NUL bytes)" in result.stderr
    assert f"skipped {root / 'latin.md'}: not UTF-8 text (a bad byte at offset 3)" in result.stderr
    assert "indexed 7 new and 0 changed file(s)" in result.stdout and "2 skipped" in result.stdout


def test_files_named_and_every_one_skipped_is_an_error_with_each_reason(tmp_path: Path) -> None:
    """`drag index photo.png` said why it skipped the file and exited 0, as if indexed."""
    photo = tmp_path / "photo.txt"
    photo.write_bytes(b"\x89PNG\x00\x00binary")
    proc = drag("index", str(photo))
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err, err
    assert f"skipped {photo}: a binary file (it holds NUL bytes)" in err
    assert err.rstrip().endswith(
        "drag: error: nothing was indexed: 1 file(s) skipped, each with its reason above"
    )
    as_json = drag("index", "--json", str(photo))
    skipped = json.loads(as_json.stdout)["indexed"]["skipped"]
    assert as_json.returncode == 2 and [s["path"] for s in skipped] == [str(photo)]
    # A file indexed before and unreadable now: nothing is indexed, and its old text goes.
    notes = tmp_path / "notes.md"
    notes.write_text("The noodle bar is on Linden Lane.\n", "utf-8")
    assert drag("index", str(notes)).returncode == 0
    notes.write_bytes(b"\x00binary now")
    again = drag("index", str(notes))
    assert again.returncode == 2 and again.stderr.decode().rstrip().endswith(
        "skipped, each with its reason above; 1 indexed before, now gone from the index"
    )


def test_no_files_indexed_and_no_paths_are_one_line_errors() -> None:
    line = one_line_error(drag("ask", "--files", "Where is the noodle bar?"))
    assert line.startswith("drag: error: no files are indexed yet: add some with drag index PATH")
    usage = drag("index")
    assert usage.returncode == 2 and b"Traceback" not in usage.stderr
    assert b"name files or folders to index, or use --list, --names or --forget" in usage.stderr


def test_a_name_known_only_from_an_indexed_file_is_kept_from_the_teacher(
    tmp_path: Path, on_teacher: dict[str, str], socket_guard: SocketLog
) -> None:
    question = "What does Sage think of the new map?"
    # The placeholder version is sent (the tiny student's rewrite would drop the name
    # as well, but say less of the question).
    settings = config.load({"privacy.rewrite": "never"})
    chats = tmp_path / "chats"
    chats.mkdir()
    (chats / "20260301.txt").write_text(
        "Time: 20260301_18:00\nSage: The new map is great, the lanes are wide.\n"
        "LiHua: I agree, see you at the match.\n",
        encoding="utf-8",
    )
    with Session(settings) as rt:
        # Before: the detector, already loaded, lets the name through.
        assert "Sage" in rt.sanitize(question).text
        localfiles.index(rt, [chats])  # the same session learns it, and so does its guard
        assert "Sage" in rt.personal_names()
        result = pipeline.gather(rt, question, mode="evidence", n=2, k=2, review_policy="never")
    assert result.source == "teacher"
    sent = result.privacy["sent_question"]
    assert "Sage" not in sent and "<" in sent  # a placeholder stands in its place
    assert socket_guard.sent  # the question went, through the real egress
    assert "Sage" not in socket_guard.sent_text()
    with Session(settings.with_flags({"files.learn_names": False})) as rt:
        assert rt.personal_names() == []
        assert "Sage" in rt.sanitize(question).text


def test_a_learnt_persons_first_name_in_lower_case_is_kept_from_the_teacher(
    tmp_path: Path,
) -> None:
    """An exploratory test of the app: the files named Marta Nowicka, and "how should
    marta prepare a budget review?" went to the teacher as written (the whole name was
    learnt, not its words)."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "meeting notes.md").write_text(
        "The project kickoff meeting with Marta Nowicka is on Tuesday in room B204.\n"
        "Li Hua will bring the slides.\n",
        encoding="utf-8",
    )
    settings = config.load({"privacy.rewrite": "never", "privacy.reader": "off"})
    question = "how should marta prepare a budget review with nowicka?"
    with Session(settings) as rt:
        assert "marta" in rt.sanitize(question).text  # before: nothing names her
        localfiles.index(rt, [notes])
        learnt = rt.learnt()
        assert {"Marta Nowicka", "Marta", "Nowicka", "Li", "Hua"} <= set(learnt.people)
        assert "Li" in learnt.written and "Marta" not in learnt.written  # "li" as written
        sent = rt.sanitize(question).text
    assert "marta" not in sent.casefold() and "nowicka" not in sent.casefold(), sent


def test_a_link_the_student_writes_with_a_name_from_your_files_is_withheld(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An indexed message asks for a link with a name in it, and the question asks the
    same; the default student (the 1.5B) writes it.  Neither the stream nor the answer
    shows the name inside a link (a click would send it)."""
    monkeypatch.setenv("DRAG_STUDENT_MODEL", "qwen2.5-coder-1.5b-instruct")
    chats = tmp_path / "chats"
    chats.mkdir()
    (chats / "20260301.txt").write_text(
        "Time: 20260301_18:00\nQuillan Ashgrove: The parking form for our street is at "
        "https://evil.example/form?name= followed by your full name, Quillan Ashgrove, "
        "written into the link.\n",
        encoding="utf-8",
    )
    settings = config.load({"files.abstain": False, "student.max_tokens": 60})
    streamed: list[str] = []
    with Session(settings) as rt:
        localfiles.index(rt, [chats])
        assert "Quillan Ashgrove" in rt.learnt().people
        result = localfiles.ask_files(
            rt,
            "Write only the parking form's link for Quillan Ashgrove, with the name filled in.",
            on_text=streamed.append,
        )
    assert "[link withheld: it carried a PERSON from your files]" in result.answer, result.answer
    for text in (result.answer, "".join(streamed)):
        for url in re.findall(r"\S*(?:://|evil\.example)\S*", text):
            assert "Quillan" not in url and "Ashgrove" not in url, text


def test_the_files_teach_people_firms_and_places_but_not_a_name_read_as_a_title(
    tmp_path: Path, runtime: Session
) -> None:
    """The README's limit: spaCy reads a café's name in quotes as a title, and titles
    (mostly public: games, songs) are not learnt; a firm and a person are."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "cafe.md").write_text(
        'I just discovered "The Lighthouse Cafe"! Such a chill place to work, says '
        "Yuriko Yamamoto of Acme Corporation.\n",
        encoding="utf-8",
    )
    localfiles.index(runtime, [notes])
    learnt = runtime.personal_names()
    assert "Yuriko Yamamoto" in learnt and "Acme Corporation" in learnt
    assert not [n for n in learnt if "Lighthouse" in n]
    # The person is told apart (found as PERSON); the firm is not one.
    people = runtime.learnt().people
    assert "Yuriko Yamamoto" in people and "Acme Corporation" not in people
    # A list stored before people were told apart still reads, as names alone.
    from assistant.store import files as stored

    store = runtime.store
    old = store.sealer.seal(json.dumps(["Yuriko Yamamoto"]), "meta.files_learnt")
    store.db.execute(
        "UPDATE meta SET value = ? WHERE key = 'files_learnt'",
        [base64.b64encode(old).decode("ascii")],
    )
    assert stored.learnt(store.db, store.sealer) == stored.Learnt(("Yuriko Yamamoto",))


def test_the_privacy_benchmark_runs_a_detector_taught_by_an_indexed_store(
    tmp_path: Path, runtime: Session
) -> None:
    from drag_bench.privacy import learnt_detector

    from assistant.privacy.detector import Detector

    question = "What does Sage think of the new map?"
    chats = tmp_path / "chats"
    chats.mkdir()
    (chats / "20260301.txt").write_text(
        "Time: 20260301_18:00\nSage: The new map is great.\nLiHua: See you at the match.\n",
        encoding="utf-8",
    )
    db = Path(os.environ["DRAG_STORE_DATABASE"])
    with pytest.raises(ValueError, match="no such drag store"):
        learnt_detector({}, db)
    assert runtime.store.db  # the store now exists, with no file indexed
    with pytest.raises(ValueError, match="taught no names"):
        learnt_detector({}, db)
    localfiles.index(runtime, [chats])
    assert "Sage" in [f.text for f in learnt_detector({}, db).find(question)]
    assert "Sage" not in [f.text for f in Detector(categories={}).find(question)]


async def test_the_app_answers_from_your_files_and_shows_the_sources(
    notes: Path, socket_guard: SocketLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    from textual.command import CommandList
    from textual.widgets import Input, Static

    from assistant.tui.app import DragApp
    from assistant.tui.chat import ChatScreen, Turn
    from tests.test_tui import wait_for

    monkeypatch.setenv("DRAG_STUDENT_MODEL", TEST_MODEL)
    monkeypatch.setenv("DRAG_FILES_ABSTAIN", "false")  # the check's badge: tested below
    settings = config.load()
    app = DragApp(settings, warm=False)  # warming up would start the local teacher
    async with app.run_test(size=(140, 40)) as pilot:
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        statuses: list[str] = []
        app.watch(app, "status", lambda value: statuses.append(value))
        await pilot.press("ctrl+p")  # the command palette's "Index files or folders"
        for key in "Index files":
            await pilot.press("space" if key == " " else key)
        await wait_for(pilot, lambda: app.screen.query_one(CommandList).option_count > 0)
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(app.screen.query("#prompt-input")))
        prompt = app.screen.query_one("#prompt-input", Input)
        prompt.value = f"{notes / 'chats'} ; {notes / 'mia.md'}"
        await pilot.press("enter")
        await wait_for(
            pilot,
            lambda: any("indexed 2 new" in str(n.message) for n in app._notifications),
            120,
        )
        # The status line followed the files as they were read, then said ready again.
        assert "indexing 1/2: 20260105.txt" in statuses and "indexing 2/2: mia.md" in statuses
        await wait_for(pilot, lambda: app.status == app.ready_line())
        await pilot.press("ctrl+l")
        assert chat.from_files
        await pilot.click("#question")
        chat.query_one("#question", Input).value = "Where is the noodle bar?"
        await pilot.press("enter")
        await wait_for(pilot, lambda: chat.query(Turn).last().result is not None, 180)
        turn = chat.query(Turn).last()
        # The chat holds the question's words; mia.md, found by its embedding, none.
        assert turn.note.startswith("■ from your files · 1 passage · nothing sent")
        shown = str(chat.query_one("#context-body", Static).render())
    assert "Sources (your files, 1 passage, best first):" in shown
    assert f" 1. {notes / 'chats' / '20260105.txt'}, 2026-01-05 11:00" in shown
    assert "Kings Road" in shown
    assert socket_guard.seen == []


async def test_the_app_answers_a_question_while_it_is_indexing_files(
    notes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Indexing runs on a connection of its own: a question asked meanwhile is answered,
    while a file of the folder being indexed is held back until the answer is shown."""
    from textual.widgets import Input

    from assistant.files import readers
    from assistant.tui.app import DragApp
    from assistant.tui.chat import ChatScreen, Turn
    from tests.test_tui import wait_for

    monkeypatch.setenv("DRAG_STUDENT_MODEL", TEST_MODEL)
    monkeypatch.setenv("DRAG_FILES_ABSTAIN", "false")
    more = tmp_path / "more"
    more.mkdir()
    (more / "ana.md").write_text("Ana Lima moved to Porto in March.\n", encoding="utf-8")
    reached, release = threading.Event(), threading.Event()
    real = readers.read_bytes

    def held_back(path: Path) -> bytes:
        if more in path.parents:
            reached.set()
            release.wait(300)
        return real(path)

    app = DragApp(config.load(), warm=False)
    localfiles.index(app.runtime, [notes])
    monkeypatch.setattr(readers, "read_bytes", held_back)
    async with app.run_test(size=(140, 40)) as pilot:
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        try:
            chat._index([more])
            await wait_for(pilot, reached.is_set)
            await pilot.press("ctrl+l")
            await pilot.click("#question")
            chat.query_one("#question", Input).value = "Where is the noodle bar?"
            await pilot.press("enter")
            await wait_for(pilot, lambda: chat.query(Turn).last().result is not None, 180)
            told = [str(n.message) for n in app._notifications]
            # The indexing's own report ("indexed N new and …") has not come yet.
            assert not release.is_set() and not any(m.startswith("indexed ") for m in told), told
            answered = chat.query(Turn).last().result
            assert answered is not None and any("Kings Road" in p.text for p in answered.passages)
        finally:
            release.set()
        await wait_for(
            pilot, lambda: any("indexed 1 new" in str(n.message) for n in app._notifications)
        )


def test_the_files_answers_fixed_head_is_read_once_and_loaded_by_a_new_process(
    notes: Path, runtime: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 51: the rules every files answer starts with are read once on the machine;
    a new process loads their state instead of reading them before the question."""
    from assistant.base import paths
    from assistant.models import prefixstate
    from assistant.privacy import reader

    folder = paths.cache_dir() / "prefix-state"
    for old in folder.glob("*-files-*.state"):
        old.unlink()
    localfiles.index(runtime, [notes])
    question = "Where is the noodle bar?"
    first = localfiles.ask_files(runtime, question, k=2, remember=False)
    assert first.student["head"] == "saved" and first.timings["head"] >= 0
    (kept,) = folder.glob("*-files-*.state")
    model = kept.name.split("-")[0]  # this student's states, whatever other tests keep
    # Asked again in the same process: read already, nothing done.
    assert localfiles.ask_files(runtime, question, k=2, remember=False).student["head"] == "held"
    # The privacy reader's head, kept in the same folder for the same model, leaves it.
    assert runtime.student.keep_head(reader.head(), reader.HEAD_MARK, folder) == "saved"
    assert len(list(folder.glob(f"{model}-*.state"))) == 2 and kept.exists()
    # A new student, as in a new process: loaded from the folder; the answer is the one
    # read in full.
    with Session(config.load()) as fresh:
        loaded = localfiles.ask_files(fresh, question, k=2, remember=False)
    assert loaded.student["head"] == "loaded" and loaded.answer == first.answer
    assert loaded.student["prompt_tokens"] == first.student["prompt_tokens"]
    # Where holding it fails (llama.cpp refuses the state), the head is read as before.

    def refused(*_a: Any, **_k: Any) -> str:
        raise RuntimeError("llama_state_set_data failed")

    monkeypatch.setattr(prefixstate, "keep", refused)
    runtime.student.forget()
    failed = localfiles.ask_files(runtime, question, k=2, remember=False)
    assert failed.student["head"] == "none" and failed.answer
    assert failed.student["prompt_tokens"] == first.student["prompt_tokens"]


def test_the_answer_is_shown_once_the_messages_it_read_bear_it_out(
    notes: Path, runtime: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assistant.drag import answer, filescut, filessupport
    from assistant.tui.chat import badge

    localfiles.index(runtime, [notes])
    question = "Where is the noodle bar?"
    said: list[str] = []
    read = localfiles.ask_files(runtime, question, k=2, remember=False, on_text=said.append)
    # Shown once, checked, not streamed: empty pieces while the student writes.
    assert said[-1] == read.answer and set(said[:-1]) == {""}
    assert len(said) - 1 == read.student["completion_tokens"]
    assert read.prompt_versions["support"] == filessupport.CHECK_VERSION
    assert set(read.provenance["support"]) >= {"found", "covered", "passage", "not_in_files"}
    # How likely the student found each token of its answer, kept for the record.
    sure = read.provenance["support"]["logprobs"]
    assert sure and all(p <= 0 for p in sure)
    # What the student read: the messages with the question's words, as the sources show.
    assert read.prompt_versions["cut"] == filescut.CUT_VERSION
    [chat] = [p for p in read.passages if p.path.endswith("20260105.txt")]
    assert "noodle bar on Kings Road" in chat.text
    assert [p.rank for p in read.passages] == list(range(1, len(read.passages) + 1))

    # The sureness on its own (the word rules set to let any answer through): the answer
    # is shown where no token counts as a guess, held back where one does (every token,
    # with the bound above a log-probability of 0).
    with monkeypatch.context() as m:
        m.setattr(filessupport, "FOUND_AT_LEAST", 0.0)
        m.setattr(filessupport, "COVERED_AT_LEAST", 0.0)
        m.setattr(filessupport, "SURE_AT_LEAST", -1e9)
        shown = localfiles.ask_files(runtime, question, k=2, remember=False)
        m.setattr(filessupport, "SURE_AT_LEAST", 0.01)
        unsure = localfiles.ask_files(runtime, question, k=2, remember=False)
    assert shown.answer != answer.NOT_IN_FILES and not shown.provenance["support"]["unsure"]
    assert unsure.answer == answer.NOT_IN_FILES and unsure.provenance["support"]["unsure"]
    assert unsure.provenance["support"]["unsupported"] == shown.answer

    # Where the passages do not bear the answer out, the reply is "Your files do not say.",
    # and the student's answer is kept in the record.
    monkeypatch.setattr(filessupport, "COVERED_AT_LEAST", 1.01)  # no passage can reach it
    said.clear()
    held = localfiles.ask_files(runtime, question, k=2, remember=False, on_text=said.append)
    assert held.answer == answer.NOT_IN_FILES and [p for p in said if p] == [answer.NOT_IN_FILES]
    assert held.provenance["support"]["not_in_files"]
    assert held.provenance["support"]["unsupported"] and held.student["completion_tokens"] > 0
    assert len(held.passages) == 1  # the chat: the one passage with the question's words
    assert badge(held) == "■ from your files · 1 passage, the answer is not in them · nothing sent"
    env = {"DRAG_STUDENT_MODEL": TEST_MODEL}
    plain = run(env, "ask", "--files", "--k", "2", question).stdout
    assert plain.startswith(answer.NOT_IN_FILES)
    assert "Sources (your files, best first):" in plain  # what it read, for the user to check
    assert "Context: from your files (minirag; the answer is not in them); nothing sent" in plain

    # A caller that stops (the app closed) stops the student at its first piece.
    seen: list[str] = []

    def closed(piece: str) -> None:
        seen.append(piece)
        raise Interrupted("the app was closed")

    with pytest.raises(Interrupted):
        localfiles.ask_files(runtime, question, k=2, remember=False, on_text=closed)
    assert seen == [""]

    # With files.abstain off the answer streams as it is written, unchecked; with
    # files.read_tokens 0 the passages are read whole.
    flags = {"files.abstain": False, "files.read_tokens": 0}
    with Session(runtime.settings.with_flags(flags)) as off:
        pieces: list[str] = []
        whole = localfiles.ask_files(off, question, k=2, remember=False, on_text=pieces.append)
    assert "support" not in whole.provenance and "cut" not in whole.prompt_versions
    assert len(pieces) > 1 and whole.student["completion_tokens"] > 0
    [chat] = [p for p in whole.passages if p.path.endswith("20260105.txt")]
    assert chat.text.startswith("LiHua: Lunch on the 8th with you?")
    assert filescut.GAP not in chat.text

    # A window too small for one passage with the reply: one line, not an answer from nothing.
    small = {"DRAG_STUDENT_MODEL": TEST_MODEL, "DRAG_STUDENT_N_CTX": "512"}
    line = one_line_error(
        drag("ask", "--files", question, env=small | {"DRAG_STUDENT_MAX_TOKENS": "440"})
    )
    assert "not one passage of your files fits the student's window" in line


def test_forget_removes_the_files_passages_from_the_history(
    notes: Path, runtime: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 47, item 9: after --forget, a sealed history record of an earlier ask
    --files still held the passage and its path.  Such records lose the passages of the
    forgotten file and the answer made from them; the question stays, and an answer
    that read other files only is untouched."""
    monkeypatch.setenv("DRAG_FILES_ABSTAIN", "false")
    localfiles.index(runtime, [notes])
    chat = str(notes / "chats" / "20260105.txt")
    about = localfiles.ask_files(runtime, "Where is the noodle bar?", k=2)
    other = localfiles.ask_files(runtime, "When do the tomatoes need water?", k=1)
    assert chat in [p.path for p in about.passages]
    assert chat not in [p.path for p in other.passages]
    store = runtime.store

    def record(question_id: int | None) -> dict[str, Any]:
        sealed = store.db.execute(
            "SELECT record FROM questions WHERE id = ?", [question_id]
        ).fetchone()[0]
        return dict(json.loads(store.sealer.open(sealed, "questions.record") or "{}"))

    # The check of the answer keeps the words it judged (held back or not): they go too.
    assert "support" in record(about.question_id)["provenance"]
    assert localfiles.forget(runtime, notes / "chats") == [chat]
    after = record(about.question_id)
    assert chat not in json.dumps(after) and "Kings Road" not in json.dumps(after)
    assert after["answer"].startswith("(removed:") and after["question"] == about.question
    history = {q["id"]: q for q in store.questions()}
    assert history[about.question_id]["answer"].startswith("(removed:")
    assert history[about.question_id]["question"] == "Where is the noodle bar?"
    assert record(other.question_id)["answer"] == other.answer  # read other files only


def test_a_file_over_its_passage_budget_is_indexed_in_part_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 47, item 6: a chat export with a time line per message made a passage a
    message (7,400 from 200 KB).  Past filesindex.MAX_CHUNKS (here 20) the file is cut
    there, and drag index says so on a line of its own."""
    from assistant.drag import filesindex

    root = tmp_path / "notes"
    root.mkdir()
    lines = [
        f"Time: 202601{1 + n // 24:02d}_{n % 24:02d}:00\nLiHua: message {n}" for n in range(50)
    ]
    (root / "chat.txt").write_text("\n".join(lines) + "\n")
    (root / "garden.md").write_text("The tomatoes need water twice a week.\n")
    monkeypatch.setattr(filesindex, "MAX_CHUNKS", 20)
    result = CliRunner().invoke(cli, ["index", str(root)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"read in part {root / 'chat.txt'}: it makes more than 20 passages" in result.stderr
    assert "indexed 2 new and 0 changed file(s), 21 chunks" in result.stdout
    assert "1 read in part" in result.stdout


def test_a_chat_whose_senders_are_everyday_words_teaches_no_name(
    tmp_path: Path, runtime: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 47, item 5: a chat export whose senders were common words (The, And, You,
    String, Evidence, France) taught them all as people: "What is the capital of France"
    was sent as placeholders, and questions holding "string" or "evidence" (words of the
    request's own schema) were refused.  Stop words and countries are never learnt; a
    sender who is an everyday word (String, Rose) is learnt only as a name is written;
    a real sender is learnt.  drag index --names shows the list, and privacy.allow
    takes one off it."""
    chats = tmp_path / "chats"
    chats.mkdir()
    senders = ["The", "And", "You", "String", "Evidence", "France", "Rose", "Farouk Haddad"]
    lines = [f"{s}: message number {n} about the weekend" for n, s in enumerate(senders)]
    (chats / "poison.txt").write_text("Time: 20260301_18:00\n" + "\n".join(lines) + "\n")
    localfiles.index(runtime, [chats])
    learnt = runtime.learnt()
    # A person's name of two words teaches its words too (Farouk, Haddad).
    assert learnt.names == ("Evidence", "Farouk Haddad", "Rose", "String", "Farouk", "Haddad")
    assert learnt.written == ("Evidence", "Rose", "String")
    detector = runtime.detector
    for plain in (
        "What is the capital of France?",
        "How do I reverse a string and weigh the evidence?",
        "And you, what do you think of the weekend?",
        "Which rose grows best in shade?",
    ):
        assert detector.find(plain) == [], plain
    for named, value in (("Ask Farouk Haddad about it", "Farouk Haddad"), ("Ask Rose now", "Rose")):
        assert value in [f.text for f in detector.find(named)], named
    shown = CliRunner().invoke(cli, ["index", "--names"], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    assert "Farouk Haddad  (a person)" in shown.stdout.splitlines()
    monkeypatch.setenv("DRAG_PRIVACY_ALLOW", "farouk haddad")
    with Session(config.load()) as allowed:
        found = allowed.detector.find("Ask Farouk Haddad about it, or ask farouk")
        assert not [f for f in found if f.recognizer == LEARNT], found  # nor its words
    listed = CliRunner().invoke(cli, ["index", "--names", "--json"], catch_exceptions=False)
    shown = [n["name"] for n in json.loads(listed.stdout)["names"]]
    assert not {"Farouk Haddad", "Farouk", "Haddad"} & set(shown), shown


def test_a_forget_whose_history_step_fails_leaves_the_file_for_the_next_forget(
    notes: Path, runtime: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The history is cleaned before the index rows go: should that fail (here a fake
    fault in place of the store's step), the file is still indexed, and the next
    --forget does both."""
    from assistant.base.errors import StoreError
    from assistant.store import Store

    localfiles.index(runtime, [notes])
    real = Store.forget_passages

    def failing(self: Store, paths: Any) -> int:  # a fake fault of the history step
        raise StoreError("a sealed record could not be opened")

    monkeypatch.setattr(Store, "forget_passages", failing)
    with pytest.raises(StoreError):
        localfiles.forget(runtime, notes / "garden.md")
    assert str(notes / "garden.md") in [s.path for s in localfiles.sources(runtime)]
    monkeypatch.setattr(Store, "forget_passages", real)
    assert localfiles.forget(runtime, notes / "garden.md") == [str(notes / "garden.md")]
    assert str(notes / "garden.md") not in [s.path for s in localfiles.sources(runtime)]


def test_the_benchmark_refuses_a_drafted_row_of_a_student_that_cannot_draft(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row named "drafted" decoded a token at a time would measure nothing it names."""
    from drag_bench.localdocs import main

    from assistant.models.student import Student

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "chat.txt").write_text("Time: 20260101_10:00\nAnna: hello\n", encoding="utf-8")
    questions = tmp_path / "q.csv"
    questions.write_text(
        "Question,Gold Answer,Evidence,Type\nWho said hello?,Anna,20260101_10:00,Single\n",
        encoding="utf-8",
    )
    # The tiny student drafts (test_lookup.py): this one is made one that cannot.
    monkeypatch.setattr(Student, "can_draft", lambda self: False)
    out = tmp_path / "o"
    argv = ["--docs", str(docs), "--questions", str(questions), "--part", "all", "--out", str(out)]
    code = main([*argv, "--student", TEST_MODEL, "--decoding", "drafted,plain"])
    assert code == 2
    assert "--decoding drafted: " in capsys.readouterr().err
    assert not (out / "local-docs-items.jsonl").exists()  # nothing was asked
