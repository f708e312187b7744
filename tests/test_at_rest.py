"""Issue 14, items 12-16: nothing at rest is loose.  Real SQLite store, real files, the
real CLI.  Each ``test_item_*`` failed on the main branch before this change."""

from __future__ import annotations

import datetime as dt
import json
import os
import stat
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import keyring
import keyring.backend
import keyring.backends.fail
import keyring.errors
import pytest
from click.testing import CliRunner

from assistant.base import paths, secrets
from assistant.base.config import load
from assistant.base.errors import ConfigError, InputError, StoreError
from assistant.cli import cli
from assistant.core import drafts
from assistant.core.session import Session
from assistant.net.upload import Upload
from assistant.store import Store, ledger, sealing


def upload(i: int, request: bytes | None = None) -> Upload:
    body = request or json.dumps({"messages": [{"content": f"question {i}"}]}).encode()
    return Upload("http://t/v1", "m", "evidence", "v1", body, f"reply {i}")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "drag.db", key="file") as s:
        yield s


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- item 12: drafts sealed and purged ----------------------------------------------------


def test_item_12_a_kept_question_is_sealed_and_can_be_read_back() -> None:
    question = "My SSN is 536-22-8471; Dr. Amelia Thompson said what?"
    path = drafts.keep(question, "declined", "a reply")
    data = path.read_bytes()
    assert b"536-22-8471" not in data and b"Thompson" not in data and b"declined" not in data
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    record = drafts.read(path.stem)
    assert (record["question"], record["error"], record["teacher_reply"]) == (
        question,
        "declined",
        "a reply",
    )
    runner = CliRunner()
    listed = runner.invoke(cli, ["drafts", "list"])
    assert listed.exit_code == 0 and path.stem in listed.stdout
    # A question or a reason longer than its column ends in "…": it was cut silently.
    long = drafts.keep("Why " + "very " * 30 + "long?", "the teacher " + "said no " * 20)
    listed = runner.invoke(cli, ["drafts", "list"]).stdout.splitlines()
    at = next(i for i, line in enumerate(listed) if line.startswith(long.stem))
    assert listed[at].endswith("…") and listed[at + 1].endswith("…")
    assert len(listed[at + 1]) == 4 + 100
    drafts.remove(long.stem)
    shown = runner.invoke(cli, ["drafts", "show", path.stem])
    assert shown.exit_code == 0 and question in shown.stdout
    # A name given twice is removed once; a name not kept removes none of the others.
    refused = runner.invoke(cli, ["drafts", "rm", path.stem, "nosuch"])
    assert "no kept question 'nosuch'" in str(refused.exception)
    assert path.exists()
    twice = runner.invoke(cli, ["drafts", "rm", path.stem, path.stem, path.name])
    assert twice.exit_code == 0 and "removed 1 kept question\n" in twice.output
    assert not path.exists()
    assert runner.invoke(cli, ["drafts", "show", "../drag"]).exit_code != 0


def test_item_12_a_damaged_draft_is_listed_as_such_and_the_others_still_are() -> None:
    """One kept question's file damaged (a disk error, an edit): `drag drafts list` still
    lists every other one, names the damaged one and why, and `drafts rm --all` removes
    them all (both stopped at the first damaged file, naming none)."""
    good = drafts.keep("a question kept whole", "failed")
    bad = drafts.keep("a question whose file is damaged", "failed")
    bad.write_bytes(b"not a sealed draft")
    rows = {r["name"]: r for r in drafts.listing()}
    assert rows[good.stem]["question"] == "a question kept whole"
    assert rows[bad.stem]["damaged"] is True and "cannot be opened" in rows[bad.stem]["error"]
    runner = CliRunner()
    listed = runner.invoke(cli, ["drafts", "list"])
    assert listed.exit_code == 0 and good.stem in listed.stdout and bad.stem in listed.stdout
    kept = len(list(drafts.unsent_dir().glob("*" + drafts.SUFFIX)))  # others' too
    removed = runner.invoke(cli, ["drafts", "rm", "--all"])
    assert removed.exit_code == 0 and f"removed {kept} kept questions" in removed.stdout
    assert not good.exists() and not bad.exists()


def test_item_12_drafts_are_purged_and_old_plain_ones_sealed() -> None:
    old = drafts.keep("an old question", "failed")
    new = drafts.keep("a new question", "failed")
    month_ago = time.time() - 40 * 86400
    os.utime(old, (month_ago, month_ago))
    legacy = drafts.unsent_dir() / "20250101T000000-1.json"
    legacy.write_text(json.dumps({"question": "plain Thompson", "error": "x"}), "utf-8")
    assert drafts.purge(30) == 1  # the 40-day-old one; the legacy one is sealed, today's
    assert not old.exists() and new.exists()
    assert not legacy.exists()
    assert all(b"Thompson" not in p.read_bytes() for p in drafts.unsent_dir().iterdir())
    assert any(r["question"] == "plain Thompson" for r in drafts.listing())
    assert load().store.draft_days == 30  # the default


def _old_draft_and_upload(monkeypatch: pytest.MonkeyPatch) -> tuple[Path, int]:
    """A draft and a ledger payload, both 40 days old."""
    draft = drafts.keep("an old question", "failed")
    past = time.time() - 40 * 86400
    os.utime(draft, (past, past))
    then = dt.datetime.now(dt.UTC) - dt.timedelta(days=40)
    with monkeypatch.context() as patched:
        patched.setattr(ledger, "now", lambda: then.isoformat(timespec="microseconds"))
        with Store.configured(load().store.database, load().store.key) as store:
            row = store.record_upload(upload(1))
    return draft, row


def _payload(row: int) -> bytes | None:
    with Store.configured(load().store.database, load().store.key) as store:
        (found,) = [r for r in ledger.select(store.db) if r["id"] == row]
        request: bytes | None = found["request"]
        return request


def test_item_12_the_keeping_settings_apply_where_a_session_starts_not_when_the_store_opens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    draft, row = _old_draft_and_upload(monkeypatch)
    monkeypatch.setenv("DRAG_STORE_RETENTION_DAYS", "30")
    with Session(load()) as rt:
        _ = rt.store  # opening the store (drag doctor, the benchmarks) changes nothing
        assert draft.exists() and _payload(row)
        rt.tidy()
    assert not draft.exists()
    assert not _payload(row)


def test_item_12_drag_ask_applies_the_keeping_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    draft, row = _old_draft_and_upload(monkeypatch)
    monkeypatch.setenv("DRAG_STORE_RETENTION_DAYS", "30")
    # Offline with an empty cache: ask fails (no answer kept), after the session started.
    result = CliRunner().invoke(cli, ["ask", "--offline", "What is the boiling point?"])
    assert result.exit_code != 0
    assert not draft.exists()
    assert not _payload(row)


# -- item 13: permissions -----------------------------------------------------------------


def test_item_13_every_folder_drag_makes_is_0700(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        deep = paths.private_dir(tmp_path / "a" / "b" / "c")
        target = paths.write_private(tmp_path / "x" / "export.jsonl", "data")
    finally:
        os.umask(old)
    for folder in (tmp_path / "a", tmp_path / "a" / "b", deep, target.parent):
        assert mode(folder) == 0o700, folder
    assert mode(target) == 0o600


def test_item_13_exports_are_0600_even_over_a_0644_file(tmp_path: Path) -> None:
    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as s:
        s.record_upload(upload(1))
    out = tmp_path / "ledger.jsonl"
    out.write_text("old")
    out.chmod(0o644)
    old = os.umask(0o022)
    try:
        result = CliRunner().invoke(cli, ["audit", "export", "-o", str(out)])
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    assert mode(out) == 0o600 and "question 1" in out.read_text("utf-8")


async def test_item_13_the_app_export_is_0600() -> None:
    from assistant.tui.app import DragApp

    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as s:
        s.record_upload(upload(1))
    app = DragApp(load(env=dict(os.environ)), warm=False)
    old = os.umask(0o022)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("f2")
            await pilot.pause()
            await pilot.press("e")
            await pilot.pause()
    finally:
        os.umask(old)
    target = paths.data_dir() / "ledger-export.jsonl"
    assert mode(target) == 0o600


# -- item 14: one key, never a second -----------------------------------------------------


class LockedKeyring(keyring.backend.KeyringBackend):
    """A fake keyring that exists but is locked (a test double of the system keyring)."""

    priority = 1  # type: ignore[assignment]

    def get_password(self, service: str, username: str) -> str | None:
        raise keyring.errors.KeyringLocked("the keyring is locked")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise keyring.errors.KeyringLocked("the keyring is locked")

    def delete_password(self, service: str, username: str) -> None:
        raise keyring.errors.KeyringLocked("the keyring is locked")


class MemoryKeyring(LockedKeyring):
    """A fake working keyring, in memory."""

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.items.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.items[(service, username)] = password


@pytest.fixture
def use_keyring() -> Iterator[object]:
    before = keyring.get_keyring()

    def use(backend: keyring.backend.KeyringBackend) -> None:
        keyring.set_keyring(backend)

    yield use
    keyring.set_keyring(before)


def test_item_14_a_locked_keyring_never_mints_a_second_key(
    tmp_path: Path, use_keyring: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRAG_HOME", str(tmp_path / "home"))  # no key file from other tests
    memory = MemoryKeyring()
    use_keyring(memory)  # type: ignore[operator]
    path = tmp_path / "drag.db"
    with Store(path, key="auto") as s:
        s.new_conversation("sealed with the keyring key")
        assert s.key_where == "system keyring"
    assert not sealing.key_file().exists()
    use_keyring(LockedKeyring())  # type: ignore[operator]
    with Store(path, key="auto") as s, pytest.raises(StoreError) as error:
        _ = s.sealer
    assert "keyring" in str(error.value) and "second key" in str(error.value)
    assert not sealing.key_file().exists()  # no second key
    with Store(tmp_path / "new.db", key="auto") as s, pytest.raises(StoreError):
        _ = s.sealer  # not for a new database either: the keyring may hold the key
    assert not sealing.key_file().exists()
    use_keyring(memory)  # type: ignore[operator]
    with Store(path, key="auto") as s:
        assert s.conversations()[0]["title"] == "sealed with the keyring key"
        assert s.db.execute("SELECT value FROM meta WHERE key = 'key_source'").fetchone() == (
            "keyring",
        )


def test_a_kept_question_never_mints_a_second_store_key(
    tmp_path: Path, use_keyring: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30, item 6: with the keyring gone (over SSH without D-Bus), a failed
    question is not sealed under a new key file; when the keyring is back, every kept
    question opens with the store's one key."""
    from assistant.base.errors import TeacherError

    monkeypatch.setenv("DRAG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DRAG_STORE_KEY", "auto")  # a user's default (the tests use "file")
    memory = MemoryKeyring()
    use_keyring(memory)  # type: ignore[operator]
    settings = load().store
    with Store.configured(settings.database, settings.key) as s:  # as drag opens it
        s.new_conversation("sealed with the keyring key")
        assert s.key_where == "system keyring"
    use_keyring(keyring.backends.fail.Keyring())  # type: ignore[operator]
    error = drafts.kept_error("what my doctor said", TeacherError("the teacher failed"))
    assert "could not be kept" in str(error) and "the teacher failed" in str(error)
    assert not sealing.key_file().exists()  # no second key
    assert not list(drafts.unsent_dir().glob("*" + drafts.SUFFIX))  # nothing sealed under one
    use_keyring(memory)  # type: ignore[operator]
    kept = drafts.kept_error("what my doctor said", TeacherError("the teacher failed"))
    assert "is kept in drag drafts" in str(kept)
    assert [d["question"] for d in drafts.listing()] == ["what my doctor said"]


def test_item_14_the_api_key_lookup_reports_a_locked_keyring(
    use_keyring: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(secrets.ENV_VAR, raising=False)
    use_keyring(LockedKeyring())  # type: ignore[operator]
    with pytest.raises(ConfigError, match=r"keyring could not be read .*KeyringLocked"):
        secrets.api_key()
    monkeypatch.setenv(secrets.ENV_VAR, "sk-from-env")
    assert secrets.api_key() == "sk-from-env"


# -- item 15: the ledger's MAC and head ---------------------------------------------------


def _rechain(s: Store, start: int) -> None:
    """What an attacker without the key can do: fix every hash from ``start`` on."""
    rows = list(ledger._rows(s.db))
    prev = rows[start - 2]["hash"] if start > 1 else ledger.GENESIS
    for row in rows[start - 1 :]:
        row["prev_hash"] = prev
        row["hash"] = ledger.row_hash(row)
        s.db.execute(
            "UPDATE uploads SET prev_hash = ?, hash = ? WHERE id = ?",
            [row["prev_hash"], row["hash"], row["id"]],
        )
        prev = row["hash"]


def test_item_15_an_edited_and_rechained_row_is_caught(store: Store) -> None:
    for i in range(4):
        store.record_upload(upload(i))
    assert store.verify_ledger().ok
    store.db.execute("UPDATE uploads SET model = 'other' WHERE id = 2")
    _rechain(store, 2)
    assert ledger.verify(store.db).ok  # the keyless chain is fooled
    verdict = store.verify_ledger()
    assert (verdict.ok, verdict.bad_id) == (False, 2) and "MAC" in verdict.reason


def test_item_15_a_faked_tombstone_is_caught(store: Store) -> None:
    for i in range(3):
        store.record_upload(upload(i))
    store.db.execute(
        "UPDATE uploads SET request = NULL, reply = NULL, deleted = '2020-01-01' WHERE id = 2"
    )
    assert ledger.verify(store.db).ok  # the tombstone column was outside the hash
    verdict = store.verify_ledger()
    assert (verdict.ok, verdict.bad_id) == (False, 2)


def test_item_15_a_real_tombstone_verifies_and_a_backdated_one_does_not(store: Store) -> None:
    for i in range(3):
        store.record_upload(upload(i))
    cutoff = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    assert ledger.tombstone_older_than(store.db, cutoff, store.sealer.mac_key) == 3
    assert store.verify_ledger().ok
    store.db.execute("UPDATE uploads SET deleted = '2020-01-01T00:00:00' WHERE id = 1")
    verdict = store.verify_ledger()
    assert (verdict.ok, verdict.bad_id) == (False, 1)


def test_item_15_removing_the_newest_rows_shows(store: Store) -> None:
    for i in range(5):
        store.record_upload(upload(i))
    noted = ledger.head(store.db)
    assert noted["id"] == 5
    store.db.execute("DELETE FROM uploads WHERE id >= 4")
    assert ledger.verify(store.db).ok  # the keyless chain is fooled
    verdict = store.verify_ledger()
    assert not verdict.ok and "newest rows were removed" in verdict.reason
    # Even with the head record rolled back too, the head the user noted shows it.
    store.db.execute("DELETE FROM meta WHERE key = 'ledger_head'")
    assert not store.verify_ledger().ok
    verdict = store.verify_ledger(noted=f"{noted['id']}:{noted['hash']}")
    assert not verdict.ok and "gone" in verdict.reason


def test_item_15_audit_head_and_verify_head_on_the_cli() -> None:
    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as s:
        for i in range(2):
            s.record_upload(upload(i))
    runner = CliRunner()
    head = runner.invoke(cli, ["audit", "head"])
    assert head.exit_code == 0, head.output
    noted = head.stdout.strip()
    assert noted.startswith("2:") and len(noted) == 2 + 64
    assert runner.invoke(cli, ["audit", "verify", "--head", noted]).exit_code == 0
    wrong = noted[:-1] + ("0" if noted[-1] != "0" else "1")
    assert runner.invoke(cli, ["audit", "verify", "--head", wrong]).exit_code == 1
    typo = runner.invoke(cli, ["audit", "verify", "--head", "bogus"])  # not a broken ledger
    assert isinstance(typo.exception, InputError) and "is not ID:HASH" in str(typo.exception)


def test_item_15_blanked_macs_are_not_signed_again_when_the_store_opens(tmp_path: Path) -> None:
    """Without the key, an attacker edits a row, fixes the chain, and blanks the MACs
    and the head record so that the rows look written before MACs existed: the store
    must not sign them on its next opening."""
    path = tmp_path / "drag.db"
    with Store(path, key="file") as s:
        for i in range(3):
            s.record_upload(upload(i))
        s.db.execute("UPDATE uploads SET model = 'other' WHERE id = 2")
        _rechain(s, 2)
        s.db.execute("UPDATE uploads SET mac = NULL WHERE id >= 2")
        s.db.execute("DELETE FROM meta WHERE key = 'ledger_head'")
        assert ledger.verify(s.db).ok  # the keyless chain is fooled
    with Store(path, key="file") as s:
        verdict = s.verify_ledger()
        assert (verdict.ok, verdict.bad_id) == (False, 2) and "no MAC" in verdict.reason
        assert s.db.execute("SELECT count(*) FROM uploads WHERE mac IS NULL").fetchone()[0] == 2


def test_item_15_a_row_inserted_without_the_key_is_caught(store: Store) -> None:
    for i in range(2):
        store.record_upload(upload(i))
    ledger.append(store.db, upload(7))  # chained as the product would, but with no key
    assert ledger.verify(store.db).ok  # the keyless chain is fooled
    verdict = store.verify_ledger()
    assert (verdict.ok, verdict.bad_id) == (False, 3) and "no MAC" in verdict.reason
    store.db.execute("UPDATE uploads SET mac = ? WHERE id = 3", ["0" * 64])
    verdict = store.verify_ledger()
    assert (verdict.ok, verdict.bad_id) == (False, 3) and "does not match" in verdict.reason


def test_item_15_rows_from_before_macs_are_signed_when_the_user_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assistant.store import db

    path = tmp_path / "old.db"
    old = db.connect(path)
    db.upgrade(old, target=3)
    for i in range(3):
        ledger.append(old, upload(i))
    old.close()
    monkeypatch.setenv("DRAG_STORE_DATABASE", str(path))
    runner = CliRunner()
    before = runner.invoke(cli, ["audit", "verify"])
    assert before.exit_code == 1 and "#1" in before.output and "--adopt" in before.output
    adopted = runner.invoke(cli, ["audit", "verify", "--adopt"])
    assert adopted.exit_code == 0, adopted.output
    assert "signed 3 uploads" in adopted.output and "ledger ok: 3 uploads" in adopted.output
    with Store(path) as s:
        assert s.db.execute("SELECT count(*) FROM uploads WHERE mac IS NULL").fetchone()[0] == 0
        s.record_upload(upload(9))
        assert s.verify_ledger().ok
    # A chain that does not verify is not signed: the row that breaks it is named.
    with Store(path) as s:
        s.db.execute("UPDATE uploads SET mac = NULL")
        s.db.execute("UPDATE uploads SET model = 'other' WHERE id = 2")
    refused = runner.invoke(cli, ["audit", "verify", "--adopt"])
    assert refused.exit_code == 1 and "nothing was signed: upload #2" in refused.output
    assert "signed 3" not in refused.output


def test_item_15_adopting_never_signs_what_a_forger_could_have_made(store: Store) -> None:
    """Rows without a MAC after signed ones, or a ledger whose newest rows were removed,
    are not signed by --adopt: nothing is kept, and verify still names the damage."""
    for i in range(5):
        store.record_upload(upload(i))
    store.db.execute("UPDATE uploads SET mac = NULL WHERE id = 3")
    signed, why = store.adopt_ledger()
    assert (signed, why) == (0, "rows without a MAC follow signed rows: they were not "
                             "written before the ledger had MACs")  # fmt: skip
    store.db.execute("UPDATE uploads SET mac = NULL WHERE id <= 3")
    store.db.execute("DELETE FROM uploads WHERE id >= 4")  # and the newest rows removed
    signed, why = store.adopt_ledger()
    assert (signed, why) == (0, "the ledger's head record shows these rows were signed once")
    store.db.execute("UPDATE uploads SET mac = 'x' WHERE id = 3")  # one signed row left
    signed, why = store.adopt_ledger()
    assert signed == 0 and why is not None and "#3" in why
    store.db.execute("UPDATE uploads SET mac = NULL WHERE id = 3")
    nulls = store.db.execute("SELECT count(*) FROM uploads WHERE mac IS NULL").fetchone()[0]
    assert nulls == 3  # rolled back: nothing was signed
    assert not store.verify_ledger().ok


def test_item_15_retention_never_blanks_or_signs_a_row_changed_without_the_key(
    store: Store,
) -> None:
    """A forger edits a row, chains the rest again and backdates them past the retention
    cutoff: blanking old payloads must not sign them."""
    for i in range(3):
        store.record_upload(upload(i))
    store.db.execute("UPDATE uploads SET model = 'other', created = '2020-01-01' WHERE id >= 2")
    _rechain(store, 2)
    assert store.apply_retention(30) == 0  # rows 2 and 3 are older, but not genuine
    verdict = store.verify_ledger()
    assert (verdict.ok, verdict.bad_id) == (False, 2)
    row = store.db.execute("SELECT request, deleted FROM uploads WHERE id = 2").fetchone()
    assert row[0] is not None and row[1] is None  # left as it is, payload and all


def test_item_15_a_head_record_that_names_another_hash_is_caught(store: Store) -> None:
    for i in range(3):
        store.record_upload(upload(i))
    ledger._set_head(store.db, 3, "0" * 64, store.sealer.mac_key)  # MAC'd, wrong hash
    verdict = store.verify_ledger()
    assert (verdict.ok, verdict.bad_id) == (False, 3) and "head record names" in verdict.reason


# -- item 16: search with Unicode case folding --------------------------------------------


def test_item_16_search_folds_case_in_every_script(store: Store) -> None:
    store.record_upload(upload(1, json.dumps({"q": "Ádám Kovács"}, ensure_ascii=False).encode()))
    store.record_upload(upload(2, json.dumps({"q": "Straße"}, ensure_ascii=True).encode()))
    store.record_upload(upload(3))
    for needle in ("Ádám", "ádám", "ÁDÁM", unicodedata.normalize("NFD", "ádám"), "kovács"):
        assert [r["id"] for r in ledger.select(store.db, search=needle)] == [1], needle
    assert [r["id"] for r in ledger.select(store.db, search="STRASSE")] == [2]


def test_item_12_drafts_that_cannot_be_tidied_are_a_one_line_store_error() -> None:
    """A kept draft the keeping settings cannot read (here a folder where a draft should
    be) is a StoreError, which drag ask shows in one line and the app as a notice."""
    drafts.keep("an old question", "failed")
    unreadable = drafts.unsent_dir() / "20250101T000000-2.json"
    unreadable.mkdir()
    try:
        rt = Session(load())
        with rt, pytest.raises(StoreError, match="old drafts could not be removed"):
            rt.tidy()
        # drag ask warns and goes on: housekeeping never fails the question.
        result = CliRunner().invoke(cli, ["ask", "--offline", "What is the boiling point?"])
        assert "warning: the keeping settings were not applied" in result.stderr
        assert result.exit_code != 0 and not isinstance(result.exception, StoreError)
    finally:
        unreadable.rmdir()  # the drafts folder is shared by the whole test run


# -- issue 47, items 3 and 4: a ledger that cannot be emptied or refilled -----------------


def test_an_emptied_ledger_does_not_verify(store: Store) -> None:
    """``DELETE FROM uploads``: the MAC'd head still names the newest row, so the empty
    ledger is caught (it verified as "0 uploads")."""
    for i in range(4):
        store.record_upload(upload(i))
    store.db.execute("DELETE FROM uploads")
    verdict = store.verify_ledger()
    assert not verdict.ok and "reached #4, now it is empty" in verdict.reason, verdict


def test_an_emptied_ledger_without_its_head_record_is_named_by_the_history(
    store: Store,
) -> None:
    """Rows and head record both removed: the question history still names the uploads
    its questions made, and a ledger that lacks them does not verify.  A store that
    never sent anything verifies, empty."""
    assert store.verify_ledger().to_dict()["ok"] is True
    ids = [store.record_upload(upload(i)) for i in range(3)]
    store.save_question(
        conversation_id=None,
        original="q",
        sanitized="q",
        answer="a",
        mode="evidence",
        source="teacher",
        entry_id=None,
        uploads=ids,
        record=None,
    )
    store.db.execute("DELETE FROM uploads")
    store.db.execute("DELETE FROM meta WHERE key = 'ledger_head'")
    verdict = store.verify_ledger()
    assert not verdict.ok and "history names upload #3" in verdict.reason, verdict


def test_drag_audit_verify_fails_on_an_emptied_ledger() -> None:
    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as s:
        s.record_upload(upload(1))
        s.db.execute("DELETE FROM uploads")
    broken = CliRunner().invoke(cli, ["audit", "verify"])
    assert broken.exit_code == 1 and "now it is empty" in broken.stdout, broken.stdout


@pytest.mark.parametrize("column", ["request", "reply"])
def test_a_tombstone_refilled_with_bytes_does_not_verify(store: Store, column: str) -> None:
    """After ``drag audit rm`` a blanked row holds no payload: bytes written into it (that
    ``audit show`` would print as sent) fail verify, whichever column holds them."""
    for i in range(3):
        store.record_upload(upload(i))
    cutoff = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    assert store.remove_payloads(cutoff) == 3
    assert store.verify_ledger().ok
    forged = b'{"messages": [{"content": "forged"}]}' if column == "request" else "forged"
    store.db.execute(f"UPDATE uploads SET {column} = ? WHERE id = 2", [forged])
    verdict = store.verify_ledger()
    assert (verdict.ok, verdict.bad_id) == (False, 2) and "holds one" in verdict.reason


@pytest.mark.parametrize("loose", [0o644, 0o640, 0o602])
def test_a_store_key_file_others_can_read_or_change_is_refused(tmp_path: Path, loose: int) -> None:
    """Issue 47, item 14: a key file readable by others was used silently.  Refused with
    a one-line error that says how to make it private; once it is, the store opens."""
    path = tmp_path / "drag.db"
    with Store(path, key="file") as s:
        s.record_upload(upload(1))
    key = sealing.key_file()
    assert mode(key) == 0o600
    key.chmod(loose)
    refused = rf"other users \(mode 0{loose:o}\).*chmod 600"
    with pytest.raises(StoreError, match=refused) as error, Store(path, key="file") as s:
        _ = s.sealer
    assert "\n" not in str(error.value)
    # The fix whole (the database's words before it had cut it at the line's limit), and
    # no "cannot be found": the key was found, and refused.
    assert f"`chmod 600 {key}`" in str(error.value) and "found" not in str(error.value)
    # drag doctor's fix for it is the key's mode: moving the database away (its fix for
    # a damaged store) would cut the user off from a history that is fine.
    from assistant.core import doctor

    assert doctor.store_fix(error.value).startswith("make the key file yours alone")
    assert "move the database away" in doctor.store_fix(StoreError("the database is damaged"))
    key.chmod(0o600)
    with Store(path, key="file") as s:
        assert s.verify_ledger().ok
