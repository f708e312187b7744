"""The README's everyday commands that read the store or the set-up, run through the CLI
(the store a real SQLite file): config path, models, cache stats, audit list."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from assistant.base.errors import ConfigError, InputError
from assistant.cli.root import cli
from assistant.models import modelfiles
from assistant.net.upload import Upload
from assistant.store import Store, ledger


def run(*args: str, env: dict[str, str] | None = None) -> str:
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_drag_home_puts_config_data_cache_and_state_under_one_folder(tmp_path: Path) -> None:
    shown = run("config", "path", env={"DRAG_HOME": str(tmp_path)})
    where = dict(line.split(None, 1) for line in shown.splitlines())
    assert set(where) == {"config", "data", "cache", "state"}
    assert all(Path(p).is_relative_to(tmp_path) for p in where.values()), where


def test_drag_models_lists_the_manifest_and_whether_each_is_installed() -> None:
    names = list(modelfiles.load_manifest())
    rows = json.loads(run("models", "--json"))
    assert [r["name"] for r in rows] == names and names
    for r in rows:  # ready with its file, or the reason it is not
        assert (r["state"] == "ready") == (r["path"] is not None and Path(r["path"]).is_file())
    lines = run("models").splitlines()
    assert [ln.split()[0] for ln in lines] == names


def test_cache_stats_counts_questions_evidence_entities_triples_and_bytes() -> None:
    shown = run("cache", "stats")
    for label in ("questions", "evidence", "entities", "triples", "bytes per question"):
        assert f"0 {label}" in shown, shown


def test_audit_list_filters_by_time_and_by_text() -> None:
    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as store:
        for word in ("glutamine", "photosynthesis"):
            body = json.dumps({"messages": [{"content": f"What is {word}?"}]}).encode()
            store.record_upload(Upload("http://t/v1", "m", "evidence", "v1", body, "ok"))
        ledger_rows = ledger.select(store.db)
    assert len(ledger_rows) == 2
    both = json.loads(run("audit", "list", "--since", "7d", "--json"))
    assert [r["id"] for r in both] == [1, 2]
    found = json.loads(run("audit", "list", "--search", "photosynthesis", "--json"))
    assert [r["id"] for r in found] == [2]
    assert "no uploads recorded that match" in run("audit", "list", "--since", "2999-01-01")


@pytest.mark.parametrize("since", ["soon", "7x", ""])
def test_audit_list_refuses_a_time_it_cannot_read(since: str) -> None:
    result = CliRunner().invoke(cli, ["audit", "list", "--since", since])
    assert isinstance(result.exception, InputError)
    assert f"{since!r} is not a time: use 30d, 12h" in str(result.exception)


@pytest.mark.parametrize(
    "args",
    [
        ["audit", "list", "--since", "99999999999d"],
        ["audit", "list", "--since", "9999999w"],
        ["audit", "rm", "--older-than", "99999999999d", "--yes"],
    ],
)
def test_an_age_further_back_than_a_date_is_a_one_line_error(args: list[str]) -> None:
    """Issue 47, item 12: an OverflowError before."""
    result = CliRunner().invoke(cli, args)
    assert isinstance(result.exception, InputError), result.exception
    assert "further back than a date can be" in str(result.exception)


def test_config_set_key_stores_the_key_in_the_keyring_and_the_env_var_comes_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README: the key is read from DRAG_TEACHER_API_KEY, then from the system
    keyring, where `drag config set-key` stores it (typed without echo)."""
    import keyring
    from keyrings.alt.file import PlaintextKeyring

    from assistant.base import secrets

    monkeypatch.delenv(secrets.ENV_VAR, raising=False)
    backend = PlaintextKeyring()  # a keyring of its own in tmp_path, never the machine's
    backend.file_path = str(tmp_path / "keyring.cfg")
    previous = keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        config_file = tmp_path / "config.toml"
        stored = CliRunner().invoke(
            cli, ["--config", str(config_file), "config", "set-key"], input="sk-cli-93e1\n"
        )
        assert stored.exit_code == 0, stored.output
        assert "sk-cli-93e1" not in stored.output  # not echoed
        assert backend.get_password(secrets.SERVICE, secrets.USERNAME) == "sk-cli-93e1"
        assert not config_file.exists()
        assert secrets.api_key() == "sk-cli-93e1"
        monkeypatch.setenv(secrets.ENV_VAR, "sk-env-first")
        assert secrets.api_key() == "sk-env-first"
    finally:
        keyring.set_keyring(previous)


def test_config_set_key_on_a_machine_without_a_keyring_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import keyring
    from keyring.backends.fail import Keyring as NoKeyring

    previous = keyring.get_keyring()
    keyring.set_keyring(NoKeyring())
    try:
        result = CliRunner().invoke(cli, ["config", "set-key"], input="sk-x\n")
    finally:
        keyring.set_keyring(previous)
    assert result.exception is not None
    assert "no usable system keyring here" in str(result.exception)
    assert "export DRAG_TEACHER_API_KEY instead" in str(result.exception)


def test_a_time_past_the_calendars_ends_in_utc_is_one_line() -> None:
    """The year 1 at +05:00 is before the year 1 in UTC: an internal error (OverflowError)."""
    result = CliRunner().invoke(cli, ["audit", "list", "--since", "0001-01-01T00:00+05:00"])
    assert isinstance(result.exception, InputError)
    assert "is past the calendar's first or last day" in str(result.exception)


def test_config_set_mends_a_config_file_that_does_not_load(tmp_path: Path) -> None:
    """A file holding a value no longer allowed (`k = 99`): every command says why, and
    `drag config set` can still write the good value (it refused too: nothing could
    mend the file but an editor)."""
    path = tmp_path / "config.toml"
    path.write_text("[pipeline]\nk = 99\nn = 7\n", "utf-8")
    runner = CliRunner()
    for args in (["audit", "list"], ["config", "show"]):
        refused = runner.invoke(cli, ["--config", str(path), *args])
        assert isinstance(refused.exception, ConfigError)
        assert "pipeline.k (file): 99 is above the maximum 50" in str(refused.exception)
    mended = runner.invoke(cli, ["--config", str(path), "config", "set", "pipeline.k", "5"])
    assert mended.exit_code == 0, mended.output
    shown = runner.invoke(cli, ["--config", str(path), "config", "show", "--json"])
    rows = {r["key"]: r for r in json.loads(shown.stdout)["settings"]}
    assert (rows["pipeline.k"]["value"], rows["pipeline.n"]["value"]) == (5, 7)
