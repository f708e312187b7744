"""The local store on real SQLite files: schema upgrades, the ledger's hash chain,
encryption at rest, crash safety and the cache."""

from __future__ import annotations

import datetime as dt
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from assistant.base.errors import StoreError
from assistant.net import listeners
from assistant.net.upload import Upload
from assistant.store import Store, cache, db, journal, ledger, lifelock
from assistant.store.sealing import Sealer


def upload(i: int = 0, **kw: object) -> Upload:
    fields: dict[str, object] = {
        "endpoint": "http://127.0.0.1:8080/v1",
        "model": "teacher-model",
        "purpose": "evidence",
        "prompt_version": "evidence-v1",
        "request": b'{"messages": [{"content": "question %d about <PERSON_1>"}]}' % i,
        "reply": f'{{"evidence": ["fact {i}"]}}',
        "redaction": {"PERSON": 1},
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "seconds": 0.25,
    }
    fields.update(kw)
    return Upload(**fields)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "drag.db", key="file")


def test_new_database_is_private_wal_and_current(store: Store) -> None:
    assert db.version(store.db) == db.SCHEMA_VERSION == len(db.MIGRATIONS)
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.path.stat().st_mode & 0o777 == 0o600
    store.record_upload(upload())
    for side in ("-wal", "-shm"):
        extra = store.path.with_name(store.path.name + side)
        if extra.exists():
            assert extra.stat().st_mode & 0o777 == 0o600


def test_upgrade_from_the_first_schema_keeps_the_ledger(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = db.connect(path)
    assert db.upgrade(old, target=1) == 1  # a database as version 1 of drag made it
    ids = [ledger.append(old, upload(i)) for i in range(3)]
    old.close()

    store = Store(path, key="file")
    assert db.version(store.db) == db.SCHEMA_VERSION
    assert [r["id"] for r in ledger.select(store.db)] == ids
    assert ledger.verify(store.db).ok
    assert {"cache_entries", "cache_triples", "questions", "conversations"} <= set(
        store.db.table_names()
    )
    store.record_upload(upload(9))  # and it works at the new version
    assert ledger.verify(store.db).ok


def test_a_newer_schema_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {db.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer than this drag"):
        Store(path)


def test_ledger_chain_verifies_and_names_the_tampered_row(store: Store) -> None:
    for i in range(5):
        store.record_upload(upload(i))
    assert ledger.verify(store.db).to_dict() == {
        "ok": True,
        "rows": 5,
        "tombstones": 0,
        "bad_id": None,
        "reason": "",
    }
    # The request bytes changed behind the app's back.
    store.db.execute("UPDATE uploads SET request = CAST('{}' AS BLOB) WHERE id = 3")
    verdict = ledger.verify(store.db)
    assert not verdict.ok and verdict.bad_id == 3 and "request or reply" in verdict.reason


@pytest.mark.parametrize(
    ("sql", "bad_id", "reason"),
    [
        ("UPDATE uploads SET model = 'other' WHERE id = 2", 2, "fields were changed"),
        ("UPDATE uploads SET redaction = '{}' WHERE id = 4", 4, "fields were changed"),
        ("UPDATE uploads SET reply = 'forged' WHERE id = 1", 1, "request or reply"),
        ("DELETE FROM uploads WHERE id = 3", 4, "row 3 is missing"),
        ("UPDATE uploads SET hash = prev_hash WHERE id = 2", 2, "fields were changed"),
    ],
)
def test_each_kind_of_tampering_is_caught(store: Store, sql: str, bad_id: int, reason: str) -> None:
    for i in range(5):
        store.record_upload(upload(i))
    store.db.execute(sql)
    verdict = ledger.verify(store.db)
    assert (verdict.ok, verdict.bad_id) == (False, bad_id)
    assert reason in verdict.reason


def test_removing_payloads_leaves_a_verifiable_chain(store: Store) -> None:
    for i in range(4):
        store.record_upload(upload(i))
    future = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    assert ledger.tombstone_older_than(store.db, future) == 4
    rows = ledger.select(store.db)
    assert all(r["request"] is None and r["reply"] is None and r["deleted"] for r in rows)
    verdict = ledger.verify(store.db)
    assert verdict.ok and verdict.tombstones == 4
    # The summary survives; the payload does not.
    assert ledger.summary(rows[0])["redaction"] == {"PERSON": 1}
    store.db.execute("UPDATE uploads SET purpose = 'x' WHERE id = 2")
    assert ledger.verify(store.db).bad_id == 2


def test_search_and_since(store: Store) -> None:
    store.record_upload(upload(1, reply="about photosynthesis"))
    store.record_upload(upload(2, reply="about volcanoes"))
    assert [r["id"] for r in ledger.select(store.db, search="PHOTOSYNTHESIS")] == [1]
    assert [r["id"] for r in ledger.select(store.db, search="question 2")] == [2]
    later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)
    assert ledger.select(store.db, since=later) == []


@pytest.mark.parametrize("hours", [5, -10])
def test_a_time_given_in_another_zone_is_that_moment(store: Store, hours: int) -> None:
    """`--since 2026-12-07T20:00:00+05:00`: the rows are stored in UTC, and the time is
    compared as the same moment (it was compared as text: east of UTC found nothing
    that was there, west found what was not yet written)."""
    store.record_upload(upload(1))
    zone = dt.timezone(dt.timedelta(hours=hours))
    now = dt.datetime.now(zone)
    assert [r["id"] for r in ledger.select(store.db, since=now - dt.timedelta(minutes=5))] == [1]
    assert ledger.select(store.db, since=now + dt.timedelta(minutes=5)) == []


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from assistant.net.upload import Upload
    from assistant.store import Store
    store = Store(Path(sys.argv[1]), key="file")
    i = 0
    print("ready", flush=True)
    while True:
        i += 1
        store.record_upload(Upload("http://x/v1", "m", "evidence", "v1",
                                          b"x" * 20000 + str(i).encode(), "reply " * 500))
        print(i, flush=True)  # one line per upload written
    """
)


def test_kill_9_during_writes_leaves_a_whole_database(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    Store(path, key="file").close()
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    while int(proc.stdout.readline()) < 20:  # twenty uploads written, the next under way
        pass
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    store = Store(path, key="file")
    assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = ledger.select(store.db)
    assert len(rows) >= 20  # it was writing
    verdict = ledger.verify(store.db)  # every row whole: payload matches its hash
    assert verdict.ok, verdict
    store.record_upload(upload())  # and the chain goes on
    assert ledger.verify(store.db).ok


def test_originals_answers_and_vaults_are_sealed_at_rest(store: Store) -> None:
    secret = "Amelia Thompson lives at 42 Wallaby Way"
    conversation = store.new_conversation(title=secret)
    store.save_question(
        conversation_id=conversation,
        original=secret,
        sanitized="<PERSON_1> lives at <ADDRESS_1>",
        answer="Hello Amelia Thompson",
        mode="evidence",
        source="teacher",
        entry_id=None,
        uploads=[],
        record={"question": secret},
    )
    store.save_vault(conversation, {"values": {"<PERSON_1>": ["PERSON", "Amelia Thompson"]}})
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = store.path.read_bytes()
    assert b"Amelia" not in raw and b"Wallaby" not in raw
    assert b"<PERSON_1> lives at" in raw  # what was sent anyway is stored as sent
    [row] = store.questions(conversation)
    assert row["question"] == secret and row["answer"] == "Hello Amelia Thompson"
    assert store.load_vault(conversation) == {
        "values": {"<PERSON_1>": ["PERSON", "Amelia Thompson"]}
    }
    assert "key file" in store.key_where
    key_file = Path(store.key_where.removeprefix("key file "))
    assert key_file.stat().st_mode & 0o777 == 0o600


def test_a_wrong_key_is_a_clear_error(store: Store, tmp_path: Path) -> None:
    store.save_question(
        conversation_id=None,
        original="x",
        sanitized="x",
        answer="y",
        mode="none",
        source="none",
        entry_id=None,
        uploads=[],
        record=None,
    )
    store._sealer = None
    store.db.execute("UPDATE meta SET value = 'not-this-key' WHERE key = 'key_check'")
    with pytest.raises(StoreError, match="not the key this database was sealed with"):
        store.questions()


def test_a_sealed_value_only_opens_in_its_own_column() -> None:
    sealer = Sealer(b"k" * 32)
    blob = sealer.seal("private", "questions.original")
    assert sealer.open(blob, "questions.original") == "private"
    with pytest.raises(StoreError, match="does not open"):
        sealer.open(blob, "questions.answer")
    with pytest.raises(StoreError, match="does not open"):
        sealer.open(blob[:-1] + bytes([blob[-1] ^ 1]), "questions.original")


def unit(seed: int, dim: int = 384) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return np.asarray(v / np.linalg.norm(v), dtype=np.float32)


def entry(space: str, question: str, model: str = "m", seed: int = 0) -> cache.NewEntry:
    return cache.NewEntry(
        space=space,
        question=question,
        teacher_model=model,
        prompt_versions={"evidence": "evidence-v1", "graph": "graph-v1"},
        n=3,
        embedding=unit(seed),
        evidence=[("fact one", 1), ("fact two", 2)],
        evidence_embeddings=np.stack([unit(seed + 1), unit(seed + 2)]),
        evidence_upload=1,
        triples=[cache.NewTriple("Oxygen", "plants", "plants release oxygen", "x", (1,))],
        triple_embeddings=np.stack([unit(seed + 3)]),
        entity_embeddings={"Oxygen": unit(seed + 4), "plants": unit(seed + 5)},
        graph_upload=2,
        has_graph=True,
    )


def test_cache_is_keyed_by_question_model_and_prompt_version(store: Store) -> None:
    prompts = {"evidence": "evidence-v1", "graph": "graph-v1"}
    space = cache.space_of("m", prompts)
    entry_id = store.put_cache(entry(space, "What do plants release?"))
    found = cache.find(store.db, cache.key_of(space, "What  do plants release?"))
    assert found is not None and found.id == entry_id
    assert [e.text for e in found.evidence] == ["fact one", "fact two"]
    assert [(t.entity1, t.entity2) for t in found.triples] == [("Oxygen", "plants")]
    assert found.uploads == (1, 2)
    # Another model or another prompt version is another space: nothing stale is served.
    other_model = cache.space_of("other", prompts)
    other_prompt = cache.space_of("m", {**prompts, "evidence": "evidence-v2"})
    assert len({space, other_model, other_prompt}) == 3
    assert cache.find(store.db, cache.key_of(other_model, "What do plants release?")) is None
    assert cache.find(store.db, cache.key_of(other_prompt, "What do plants release?")) is None


def test_a_merged_graph_keeps_both_of_its_uploads(store: Store) -> None:
    """Evidence (1), extraction (2), merge (3): a cached answer names all three uploads,
    whether the entry is found by its question or its triples are recalled alone."""
    space = cache.space_of("m", {})
    merged = entry(space, "What do plants release?")
    merged.graph_upload, merged.extract_upload = 3, 2
    entry_id = store.put_cache(merged)
    found = cache.load_entry(store.db, entry_id)
    assert found is not None and found.uploads == (1, 2, 3)
    (triple,) = cache.triples_where(store.db, "WHERE t.entry_id = ?", [entry_id])
    assert triple.upload_ids == (3, 2)
    assert cache.uploads_of([], [triple]) == (2, 3)
    # Without a merge the extraction is the graph's only upload.
    plain = cache.load_entry(store.db, store.put_cache(entry(space, "q2", seed=20)))
    assert plain is not None and plain.uploads == (1, 2)


def test_replacing_an_entry_drops_its_old_items_and_unused_entities(store: Store) -> None:
    space = cache.space_of("m", {})
    store.put_cache(entry(space, "q"))
    replacement = entry(space, "q")
    replacement.triples = [cache.NewTriple("Carbon", "plants", "plants absorb carbon", "y", ())]
    replacement.entity_embeddings = {"Carbon": unit(7), "plants": unit(8)}
    store.put_cache(replacement)
    stats = cache.stats(store.db)
    assert (stats["questions"], stats["evidence"], stats["triples"]) == (1, 2, 1)
    names = {r[0] for r in store.db.execute("SELECT name FROM cache_entities").fetchall()}
    assert names == {"Carbon", "plants"}


def test_purge_by_model(store: Store) -> None:
    store.put_cache(entry(cache.space_of("a", {}), "q1", model="a"))
    store.put_cache(entry(cache.space_of("b", {}), "q2", model="b", seed=10))
    assert cache.purge(store.db, "a") == 1
    stats = cache.stats(store.db)
    assert stats["questions"] == 1 and [s["teacher_model"] for s in stats["spaces"]] == ["b"]
    assert stats["entities"] == 2  # a's entities went with it
    assert cache.purge(store.db) == 1 and cache.stats(store.db)["entities"] == 0


def test_index_sees_rows_written_by_another_connection(store: Store, tmp_path: Path) -> None:
    space = cache.space_of("m", {})
    index = store.index(space).refresh(store.db)
    assert index.empty
    other = Store(store.path, key="file")  # the TUI and the CLI at once
    other.put_cache(entry(space, "q1"))
    assert len(index.refresh(store.db).entries.ids) == 1
    other.put_cache(entry(space, "q2", seed=20))
    assert len(index.refresh(store.db).entries.ids) == 2
    cache.purge(other.db)
    assert index.refresh(store.db).empty
    assert store.index(space).entries.nearest(unit(0)[None, :], 1, -1.0) == [[]]


def test_audit_commands(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from assistant.base.errors import InputError
    from assistant.cli import cli

    path = Path(os.environ["DRAG_STORE_DATABASE"])
    with Store(path, key="file") as store:
        for i in range(3):
            store.record_upload(upload(i))
    runner = CliRunner()
    listed = json.loads(runner.invoke(cli, ["audit", "list", "--json"]).stdout)
    assert [r["id"] for r in listed] == [1, 2, 3] and listed[0]["redaction"] == {"PERSON": 1}
    assert "question 1" not in json.dumps(listed)  # lists carry no payload
    assert runner.invoke(cli, ["audit", "verify"]).exit_code == 0
    lines = runner.invoke(cli, ["audit", "export", "--format", "jsonl"]).stdout.splitlines()
    assert [json.loads(ln)["request"] for ln in lines][1] == upload(1).request.decode()
    md = runner.invoke(cli, ["audit", "export", "--format", "md"]).stdout
    assert md.count("## Upload ") == 3 and "chain verified" in md

    with Store(path, key="file") as store:
        store.db.execute("UPDATE uploads SET reply = 'forged' WHERE id = 2")
    broken = runner.invoke(cli, ["audit", "verify"])
    assert broken.exit_code == 1 and "#2" in broken.output

    bad = runner.invoke(cli, ["audit", "rm", "--older-than", "soon", "-y"])
    assert isinstance(bad.exception, InputError)
    gone = runner.invoke(cli, ["audit", "rm", "--older-than", "0d", "-y"])
    assert gone.exit_code == 0 and "3 uploads" in gone.output
    shown = runner.invoke(cli, ["audit", "show", "1"]).output
    assert "payload removed" not in shown and "request and reply removed" in shown


def test_the_markdown_export_shows_a_reply_holding_a_fence_as_text(tmp_path: Path) -> None:
    """A reply that closes the code block it is shown in would be read as Markdown: an
    image fetched from the teacher's server, an upload forged.  Judged by markdown-it's
    CommonMark reading of the exported file."""
    from click.testing import CliRunner
    from markdown_it import MarkdownIt

    from assistant.base.safetext import plain
    from assistant.cli import cli

    hostile = (
        "fine\n```\n\n![](https://evil.example/b.png?u=1)\n\n## Upload 9 · forged\n````\n~~~\n```"
    )
    # Backticks that make a fence once shown (a control or a zero-width space between).
    sneaky = "`\u200b``\n\n![x](https://evil.example/p.png)\n\n## Upload 8\n``\x1b[0m`"
    with Store(Path(os.environ["DRAG_STORE_DATABASE"]), key="file") as store:
        store.record_upload(upload(0, reply=hostile))
        store.record_upload(upload(1, request=b'{"q": "```\\n# forged"}'))
        store.record_upload(upload(2, reply=sneaky))
    md = CliRunner().invoke(cli, ["audit", "export", "--format", "md"]).stdout
    tokens = MarkdownIt("commonmark").parse(md)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert [h.split(" · ")[0] for h in headings if h.startswith("Upload")] == [
        "Upload 1",
        "Upload 2",
        "Upload 3",
    ]
    inline = [c for t in tokens if t.type == "inline" for c in t.children or []]
    assert not [c for c in inline if c.type in ("image", "link_open")]
    blocks = [t.content for t in tokens if t.type == "fence"]
    assert hostile + "\n" in blocks and plain(sneaky) + "\n" in blocks  # whole, as shown


def test_conversations_list_search_rename_delete(store: Store) -> None:
    first = store.new_conversation(title="Glutamine for Amelia")
    second = store.new_conversation(title="Volcanoes")
    for cid, question in ((first, "Is glutamine an amino acid?"), (second, "Why do they erupt?")):
        store.save_question(
            conversation_id=cid,
            original=question,
            sanitized=question,
            answer="yes",
            mode="evidence",
            source="teacher",
            entry_id=None,
            uploads=[],
            record=None,
        )
    assert [c["id"] for c in store.conversations()] == [second, first]
    assert [c["id"] for c in store.conversations("ERUPT")] == [second]  # in a sealed question
    assert [c["id"] for c in store.conversations("amelia")] == [first]  # in a sealed title
    store.rename_conversation(second, "Geology")
    assert store.conversations("geology")[0]["title"] == "Geology"
    store.delete_conversation(first)
    assert [c["id"] for c in store.conversations()] == [second]
    assert [q["conversation_id"] for q in store.questions()] == [second]  # its questions went too


def test_deleted_content_is_overwritten_even_where_sqlite_keeps_it_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This machine's SQLite overwrites deleted content by default (SECURE_DELETE); many
    builds do not.  A connection that starts with it off gets it on."""
    real = sqlite3.connect

    def keeps_deleted_bytes(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real(*args, **kwargs)
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(db.sqlite3, "connect", keeps_deleted_bytes)
    opened = db.connect(tmp_path / "drag.db")
    assert opened.execute("PRAGMA secure_delete").fetchone()[0] == 1


# --- the note of an upload under way (a process killed mid-request) ---------------------


def test_an_upload_noted_and_then_recorded_leaves_no_note(store: Store) -> None:
    begun = store.begin_upload(upload(1))
    assert store.db.execute("SELECT count(*) FROM upload_journal").fetchone()[0] == 1
    store.record_upload(upload(1), begun)
    assert store.db.execute("SELECT count(*) FROM upload_journal").fetchone()[0] == 0
    assert [r["status"] for r in ledger.select(store.db)] == ["ok"]


def test_an_uploads_row_has_the_time_it_left_not_the_time_of_its_reply(store: Store) -> None:
    """The ledger listed an upload at its reply's time (an exploratory test of the app);
    the row's time is when the request left: its measured seconds before the reply."""
    sent = upload(1, seconds=90.0)
    before = dt.datetime.now(dt.UTC)
    store.record_upload(sent, store.begin_upload(sent))
    after = dt.datetime.now(dt.UTC)
    created = dt.datetime.fromisoformat(next(iter(ledger.select(store.db)))["created"])
    ninety = dt.timedelta(seconds=90)
    assert before - ninety <= created <= after - ninety


def gone_note(store: Store, sent: Upload) -> int:
    """The note of an upload that a process which is not there left."""
    return journal.begin(store.db, sent, listeners.process_tag(999999999), store.sealer.mac_key)


def test_a_note_left_by_a_stopped_process_becomes_a_row_with_no_reply(store: Store) -> None:
    store.record_upload(upload(0))
    sent = upload(1)
    assert gone_note(store, sent)
    noted = store.db.execute("SELECT created FROM upload_journal").fetchone()[0]
    assert store.settle_uploads() == 1
    rows = ledger.select(store.db)
    assert len(rows) == 2
    last = ledger.detail(rows[-1])
    assert last["request"] == sent.request.decode() and last["reply"] is None
    assert last["status"] == "error" and "may have reached the teacher" in last["error"]
    assert last["created"] == noted and last["redaction"] == {"PERSON": 1}
    assert store.verify_ledger().ok
    assert store.settle_uploads() == 0  # recorded once


def test_a_copy_of_a_recorded_note_put_back_is_never_recorded_twice(store: Store) -> None:
    """A note's MAC holds on a copy of it too: one put back into the journal after its
    row was written (by its process, or by settling) is not a second upload."""
    cursor = store.db.execute("SELECT * FROM upload_journal WHERE 0")
    names = ", ".join(d[0] for d in cursor.description)
    kept = []
    for n, settled in ((1, False), (2, True)):
        begun = gone_note(store, upload(n))
        kept.append(store.db.execute(f"SELECT {names} FROM upload_journal WHERE id = ?", [begun]))
        kept[-1] = kept[-1].fetchone()
        if settled:
            assert store.settle_uploads() == 1
        else:
            store.record_upload(upload(n), begun)
    assert kept[0][0] == kept[1][0]  # the first note's id was given again
    for row in kept:
        marks = ", ".join("?" * len(row))
        store.db.execute(f"INSERT INTO upload_journal ({names}) VALUES ({marks})", list(row))
        assert store.settle_uploads() == 0
        assert len(ledger.select(store.db)) == 2
        verdict = store.verify_ledger()
        assert not verdict.ok and "is a copy of one already recorded" in verdict.reason
        store.db.execute("DELETE FROM upload_journal")
    assert store.verify_ledger().ok


def test_the_row_of_a_note_keeps_its_mac_under_the_chain(store: Store) -> None:
    """Issue 50: what tells a copy of a recorded note is the note's MAC in its ledger row,
    under the row's hash and MAC: nothing outside the chain (an emptied table) lets the
    copy be recorded again, and removing the MAC from the row is a changed row."""
    cursor = store.db.execute("SELECT * FROM upload_journal WHERE 0")
    names = ", ".join(d[0] for d in cursor.description)
    begun = gone_note(store, upload(1))
    note = store.db.execute(f"SELECT {names} FROM upload_journal WHERE id = ?", [begun]).fetchone()
    assert store.settle_uploads() == 1
    [row] = store.db.execute("SELECT note FROM uploads").fetchall()
    assert row[0] == note[names.split(", ").index("mac")]
    assert store.db.execute("SELECT count(*) FROM spent_notes").fetchone()[0] == 0
    marks = ", ".join("?" * len(note))
    store.db.execute(f"INSERT INTO upload_journal ({names}) VALUES ({marks})", list(note))
    assert store.settle_uploads() == 0
    assert len(ledger.select(store.db)) == 1
    store.db.execute("DELETE FROM upload_journal")
    assert store.verify_ledger().ok
    # Its payload removed, the row (a tombstone MAC'd anew) still verifies with its note.
    assert store.remove_payloads(dt.datetime.now(dt.UTC) + dt.timedelta(days=1)) == 1
    assert store.verify_ledger().ok
    store.db.execute("UPDATE uploads SET note = NULL")
    verdict = store.verify_ledger()
    assert not verdict.ok and verdict.bad_id == 1 and "changed" in verdict.reason


def test_a_note_recorded_before_rows_kept_their_notes_is_still_known(store: Store) -> None:
    """A store of schema 9 kept the MACs of recorded notes in spent_notes: a copy of one
    of those is still never recorded."""
    begun = gone_note(store, upload(1))
    mac = store.db.execute("SELECT mac FROM upload_journal WHERE id = ?", [begun]).fetchone()[0]
    store.db.execute("INSERT INTO spent_notes (mac) VALUES (?)", [mac])
    assert store.settle_uploads() == 0
    assert journal.replayed(store.db) == [begun]


def test_a_note_of_a_process_still_running_is_left_to_it(store: Store) -> None:
    store.begin_upload(upload(1))  # this process's: under way
    assert store.settle_uploads() == 0
    assert store.verify_ledger().ok and ledger.select(store.db) == []
    tag = listeners.process_tag()
    assert listeners.running(tag)
    machine, _, proc = tag.rpartition("|")
    host, boot, pidns = machine.split("|")
    assert not listeners.running(f"{machine}|{proc}0")  # a later process given its pid
    assert not listeners.running(f"{host}|an-earlier-boot|{pidns}|{proc}")
    assert listeners.running(f"another-host|{boot}|{pidns}|99999999:1")  # cannot be seen
    assert listeners.running(f"{host}|{boot}|pid:[1]|99999999:1")  # nor in another container


HOLDER = """
import sys
from pathlib import Path
from assistant.store import lifelock
assert lifelock.hold(Path(sys.argv[1]), sys.argv[2])
print("held", flush=True)
sys.stdin.read()
"""


def test_a_note_of_another_host_is_settled_once_its_process_lets_go_of_its_lock(
    store: Store,
) -> None:
    """A process this machine cannot see (another host name, another container) held a
    lock file beside the database while it ran: its note is left to it while the lock is
    held, and settled once the process is killed (the kernel lets go of the lock).  A
    note of such a process with no lock file (an older drag) is left as before."""
    tag = "another-host|its-boot|pid:[4026531836]|4242:777"
    older = "another-host|its-boot|pid:[4026531836]|4343:888"
    journal.begin(store.db, upload(1), tag, store.sealer.mac_key)
    journal.begin(store.db, upload(2), older, store.sealer.mac_key)
    where = lifelock.folder(store.path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store.path), tag],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert store.settle_uploads() == 0  # it runs, as far as its lock says
        holder.kill()
        holder.wait(60)
    finally:
        holder.kill()
    assert store.settle_uploads() == 1
    (row,) = [ledger.detail(r) for r in ledger.select(store.db)]
    assert row["request"] == upload(1).request.decode() and "may have reached" in row["error"]
    assert journal.owners(store.db) == {older}  # no lock file: left to its process
    assert list(where.iterdir()) == []  # the stopped process's lock file is gone too
    assert store.verify_ledger().ok


def test_a_lock_file_left_by_a_process_killed_with_no_note_goes_at_the_next_settling(
    store: Store,
) -> None:
    """A process killed after its last note was recorded leaves its lock file: the next
    settling removes it, and keeps a running process's and another database's."""
    tags = {n: f"another-host|its-boot|pid:[4026531836]|{n}:1" for n in ("runs", "killed")}
    beside = store.path.with_name("another.db")
    held = [(store.path, tags["runs"]), (store.path, tags["killed"]), (beside, tags["killed"])]
    holders = [
        subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(database), tag],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for database, tag in held
    ]
    try:
        for holder in holders:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        for holder in holders[1:]:
            holder.kill()
            holder.wait(60)
        where = lifelock.folder(store.path)
        names = [lifelock._path(database, tag).name for database, tag in held]
        assert sorted(p.name for p in where.iterdir()) == sorted(names)
        assert store.settle_uploads() == 0
        assert sorted(p.name for p in where.iterdir()) == sorted([names[0], names[2]])
        assert not lifelock.released(store.path, tags["runs"])
    finally:
        for holder in holders:
            holder.kill()
            holder.wait(60)


def test_the_sweep_reads_the_notes_once_the_lock_file_is_its_own(tmp_path: Path) -> None:
    """A process may note an upload and be killed while the sweep looks: the notes are
    read once the sweep holds the file (its process gone), and a file whose process
    left a note then is kept for the settling."""
    import fcntl

    database, tag = tmp_path / "drag.db", "another-host|its-boot|pid:[4026531836]|77:1"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(database), tag],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    finally:
        holder.kill()
        holder.wait(60)
    path = lifelock._path(database, tag)
    locked_then: list[bool] = []

    def noted() -> set[str]:
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            locked_then.append(False)
        except OSError:
            locked_then.append(True)  # the sweep holds it
        finally:
            os.close(fd)
        return {tag}

    assert lifelock.sweep(database, noted) == 0
    assert path.exists() and locked_then == [True]
    assert lifelock.sweep(database, set) == 1 and not path.exists()


def test_this_processs_lock_file_is_held_while_it_has_a_note_and_let_go_after(
    store: Store,
) -> None:
    tag = listeners.process_tag()
    begun = store.begin_upload(upload(1))
    where = lifelock.folder(store.path)
    (held,) = where.iterdir()
    assert not lifelock.released(where, tag)
    store.record_upload(upload(1), begun)
    store.close()
    assert not held.exists()


def test_a_note_not_written_by_drag_is_never_signed_into_the_ledger(store: Store) -> None:
    store.record_upload(upload(0))
    forged = gone_note(store, upload(1, request=b'{"q": "forged"}'))
    store.db.execute("UPDATE upload_journal SET created = '2020-01-01' WHERE id = ?", [forged])
    assert store.settle_uploads() == 0 and len(ledger.select(store.db)) == 1
    verdict = store.verify_ledger()
    assert not verdict.ok and "not written by drag" in verdict.reason


def test_nothing_is_settled_onto_a_ledger_whose_newest_row_was_removed(store: Store) -> None:
    for i in range(2):
        store.record_upload(upload(i))
    store.db.execute("DELETE FROM uploads WHERE id = 2")
    gone_note(store, upload(5))
    assert store.settle_uploads() == 0  # nothing written over the gap
    assert [r["id"] for r in ledger.select(store.db)] == [1]
    verdict = store.verify_ledger()
    assert not verdict.ok and "newest rows were removed" in verdict.reason


def test_a_ledger_row_is_written_even_when_left_notes_cannot_be_settled(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone_note(store, upload(1))

    def locked(*_args: object) -> int:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(journal, "settle", locked)
    assert store.record_upload(upload(2)) == 1
    assert [r["request"] for r in ledger.select(store.db)] == [upload(2).request]


def test_the_next_upload_does_not_hide_a_removed_newest_row(store: Store) -> None:
    for i in range(2):
        store.record_upload(upload(i))
    store.db.execute("DELETE FROM uploads WHERE id = 2")
    store.record_upload(upload(7))  # takes the removed row's place in the chain
    verdict = store.verify_ledger()
    assert not verdict.ok and "head record names" in verdict.reason


def test_a_note_with_values_no_note_of_drags_holds_is_named_not_a_crash(store: Store) -> None:
    gone_note(store, upload(1))
    store.db.execute("UPDATE upload_journal SET endpoint = X'00'")  # bytes, not text
    assert store.settle_uploads() == 0
    verdict = store.verify_ledger()
    assert not verdict.ok and "not written by drag" in verdict.reason


def test_the_lock_file_stays_while_another_store_of_this_process_may_note(tmp_path: Path) -> None:
    """Two stores of one database in one process (the app's two connections): the
    first closing does not take the lock file from the second, whose next note is still
    covered; the last one closing removes it.  Another database has its own."""
    path = tmp_path / "drag.db"
    first, second = Store(path, key="file"), Store(path, key="file")
    other = Store(tmp_path / "other.db", key="file")
    try:
        for store in (first, second, other):
            store.record_upload(upload(1), store.begin_upload(upload(1)))
        assert len(list(lifelock.folder(path).iterdir())) == 2  # one per database
        first.close()
        begun = second.begin_upload(upload(2))
        assert len(list(lifelock.folder(path).iterdir())) == 2
        assert not lifelock.released(path, listeners.process_tag())
        second.record_upload(upload(2), begun)
    finally:
        for store in (first, second, other):
            store.close()
    assert list(lifelock.folder(path).iterdir()) == []


def test_an_exported_ledger_can_be_checked_without_drag(tmp_path: Path) -> None:
    """`drag audit export` (jsonl) holds every field a row's hash covers, so a copy of the
    ledger can be checked by anyone: each row's hash recomputed here from the export
    alone, as docs/store.md describes it (BLAKE2b-256 of the canonical JSON), not with
    drag's own code, and each row chained to the one before.  Rows sent through drag
    carry the MAC of their note of the upload under way (`note`), which the hash covers."""
    import hashlib
    import json

    from click.testing import CliRunner

    from assistant.cli import cli

    def blake(data: bytes) -> str:
        return hashlib.blake2b(data, digest_size=32).hexdigest()

    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as s:
        s.record_upload(upload(1))  # with no note
        sent = upload(2, redaction={"PERSON": 1, "EMAIL_ADDRESS": 2})
        s.record_upload(sent, s.begin_upload(sent))  # as drag sends: noted first
    out = tmp_path / "ledger.jsonl"
    done = CliRunner().invoke(cli, ["audit", "export", "-o", str(out)])
    assert done.exit_code == 0, done.output
    rows = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    assert [("note" in r) for r in rows] == [False, True]
    previous = "0" * 64
    for r in rows:
        content = blake(r["request"].encode("utf-8")) + ":" + blake(r["reply"].encode("utf-8"))
        covered = {
            **{name: r[name] for name in ("id", "created", "endpoint", "model", "purpose")},
            **{name: r[name] for name in ("prompt_version", "status", "error", "attempts")},
            **{name: r[name] for name in ("prompt_tokens", "completion_tokens", "seconds")},
            "redaction": json.dumps(dict(sorted(r["redaction"].items()))),
            "content_hash": content,
            "prev_hash": previous,
            **({"note": r["note"]} if "note" in r else {}),
        }
        canonical = json.dumps(covered, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        assert r["content_hash"] == content and r["prev_hash"] == previous
        assert blake(canonical.encode("utf-8")) == r["hash"], r["id"]
        previous = r["hash"]


@pytest.mark.parametrize("kind", ["folder", "device"])
def test_a_database_path_that_is_no_file_is_refused_and_left_as_it_is(
    tmp_path: Path, kind: str
) -> None:
    """store.database naming a folder or a device: a one-line error, and its mode is not
    touched (it was made 0600: a folder the user could no longer list, /dev/null for
    every user, / itself when run as root)."""
    if kind == "folder":
        target = tmp_path / "notes"
        target.mkdir(mode=0o755)
        target.chmod(0o755)
    else:
        target = Path("/dev/null")
    before = target.stat().st_mode
    try:
        with pytest.raises(StoreError, match="is not a file"):
            Store(target, key="file")
        assert target.stat().st_mode == before
    finally:  # a failing version leaves the device as it found it
        if target.stat().st_mode != before:
            target.chmod(before & 0o7777)
