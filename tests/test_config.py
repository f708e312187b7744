"""Settings precedence: flag > env > file > default, with clear errors."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from assistant.base import config
from assistant.base.errors import ConfigError


def write(path: Path, text: str) -> Path:
    path.write_text(text, "utf-8")
    return path


def test_defaults(tmp_path: Path) -> None:
    s = config.load(env={}, config_file=tmp_path / "absent.toml")
    assert s.pipeline.n == 15 and s.pipeline.k == 15 and s.teacher.endpoint == "local"
    assert s.privacy.reader == "on"  # the README: the local model reads each question
    assert set(s.sources.values()) == {"default"}


def test_importing_the_app_sets_the_offline_switches_over_what_the_shell_set() -> None:
    """The README: Hugging Face and onnxruntime are told not to phone home, whatever
    the environment said (assistant/__init__.py applies them before anything else)."""
    import subprocess
    import sys

    from assistant.base._env import OFFLINE_ENV

    shell = {k: v for k, v in os.environ.items() if k not in OFFLINE_ENV}
    shell |= {"HF_HUB_OFFLINE": "0", "ORT_DISABLE_TELEMETRY": "0", "DO_NOT_TRACK": "0"}
    names = sorted(OFFLINE_ENV)
    code = (
        "import json, os; import assistant.cli.root; "
        f"print(json.dumps({{k: os.environ.get(k) for k in {names!r}}}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=shell, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert json.loads(out[0]) == OFFLINE_ENV


def test_precedence_flag_env_file_default(tmp_path: Path) -> None:
    f = write(
        tmp_path / "c.toml", '[pipeline]\nk = 7\nn = 9\nmode = "graph"\n[teacher]\ntimeout = 12.5\n'
    )
    env = {"DRAG_PIPELINE_K": "5", "DRAG_PIPELINE_N": "11"}
    s = config.load({"pipeline.k": 3}, env=env, config_file=f)
    assert (s.pipeline.k, s.sources["pipeline.k"]) == (3, "flag")
    assert (s.pipeline.n, s.sources["pipeline.n"]) == (11, "env")
    assert (s.pipeline.mode, s.sources["pipeline.mode"]) == ("graph", "file")
    assert (s.teacher.timeout, s.sources["teacher.timeout"]) == (12.5, "file")
    assert (s.student.n_ctx, s.sources["student.n_ctx"]) == (4096, "default")
    rows = {r["key"]: r for r in config.effective(s)}
    assert rows["pipeline.k"]["env"] == "DRAG_PIPELINE_K" and rows["pipeline.k"]["value"] == 3


def test_with_flags_keeps_lower_layers(tmp_path: Path) -> None:
    s = config.load(env={"DRAG_PIPELINE_N": "4"}, config_file=tmp_path / "x.toml")
    s2 = s.with_flags({"pipeline.mode": "none"})
    assert s2.pipeline.mode == "none" and s2.pipeline.n == 4 and s2.sources["pipeline.n"] == "env"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DRAG_PIPELINE_K": "many"}, "pipeline.k (env): 'many' is not a whole number"),
        ({"DRAG_PIPELINE_K": "0"}, "below the minimum"),
        ({"DRAG_PIPELINE_MODE": "magic"}, "is not one of evidence, graph, combined, none"),
        ({"DRAG_TEACHER_TIMEOUT": "soon"}, "is not a number"),
        # Issue 47, item 12: a million days made every drag ask an internal error.
        ({"DRAG_STORE_RETENTION_DAYS": "1000000"}, "above the maximum"),
        ({"DRAG_STORE_DRAFT_DAYS": "99999999999"}, "above the maximum"),
        # No setting means "nan" or "inf"; a wait past a day overflowed the clock.
        ({"DRAG_TEACHER_TIMEOUT": "nan"}, "'nan' is not a number"),
        ({"DRAG_STORE_COVERAGE": "inf"}, "'inf' is not a number"),
        ({"DRAG_TEACHER_TIMEOUT": "1e308"}, "above the maximum 86400"),
        ({"DRAG_PRIVACY_READER_TIMEOUT": "1e308"}, "above the maximum 86400"),
        # A probe of the CLI: 99999999999 retries of a teacher that is down never ended.
        ({"DRAG_TEACHER_MAX_RETRIES": "11"}, "above the maximum 10"),
    ],
)
def test_bad_env_values(tmp_path: Path, env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        config.load(env=env, config_file=tmp_path / "x.toml")


def test_an_idle_time_past_a_day_is_still_a_setting(tmp_path: Path) -> None:
    """The day's cap is for waits a clock computes with; the local teacher's idle time
    is only compared (a week worked before the cap and must go on working)."""
    env = {"DRAG_TEACHER_KEEP_ALIVE": "604800"}
    assert config.load(env=env, config_file=tmp_path / "x.toml").teacher.keep_alive == 604800


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.load(env={}, config_file=write(tmp_path / "a.toml", "[pipeline\nk=1"))
    with pytest.raises(ConfigError, match=r"unknown section \[nope\]"):
        config.load(env={}, config_file=write(tmp_path / "b.toml", "[nope]\nx=1"))
    with pytest.raises(ConfigError, match=r"unknown setting 'pipeline\.kk'"):
        config.load(env={}, config_file=write(tmp_path / "c.toml", "[pipeline]\nkk=1"))
    with pytest.raises(ConfigError, match="is not a whole number"):
        config.load(env={}, config_file=write(tmp_path / "d.toml", "[pipeline]\nk=1.5"))
    with pytest.raises(ConfigError, match="is not a number"):  # TOML's own inf
        config.load(env={}, config_file=write(tmp_path / "e.toml", "[teacher]\ntimeout=inf"))
    # A value where a section goes was "unknown section [pipeline]", pipeline among those listed.
    with pytest.raises(ConfigError, match=r"pipeline is a section, not a value: settings go"):
        config.load(env={}, config_file=write(tmp_path / "f.toml", "pipeline = 3"))
    with pytest.raises(ConfigError, match=r"k is outside any section"):  # was "unknown section"
        config.load(env={}, config_file=write(tmp_path / "g.toml", "k = 3"))


@pytest.mark.timeout(30)  # the bug: reading a FIFO waited for a writer forever
def test_a_config_path_that_is_no_file_is_an_error_not_a_wait(tmp_path: Path) -> None:
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="is not a regular file"):
        config.load(env={}, config_file=fifo)
    big = write(tmp_path / "big.toml", "# " + "x" * (2 * 1024 * 1024))
    with pytest.raises(ConfigError, match="not a settings file"):
        config.load(env={}, config_file=big)


def test_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        config.load(env={}, config_file=write(tmp_path / "a.toml", "[pipeline\nk=1\n\n\n"))
    assert "\n" not in str(info.value)


def test_save_validates_writes_owner_only_and_reads_back(tmp_path: Path) -> None:
    from assistant.base.errors import ConfigError

    target = tmp_path / "conf" / "config.toml"
    config.save({"teacher.endpoint": "http://127.0.0.1:8080/v1", "pipeline.k": "7"}, target)
    config.save({"privacy.allow": "Acme, Paris", "store.offline": "yes"}, target)  # merged
    settings = config.load(config_file=target, env={})
    assert settings.teacher.endpoint == "http://127.0.0.1:8080/v1"
    assert settings.pipeline.k == 7 and settings.store.offline is True
    assert settings.privacy.allow == ("Acme", "Paris")
    assert settings.sources["pipeline.k"] == "file"
    assert target.stat().st_mode & 0o777 == 0o600
    with pytest.raises(ConfigError, match="above the maximum"):
        config.save({"pipeline.k": 500}, target)
    with pytest.raises(ConfigError, match="unknown setting"):
        config.save({"teacher.api_key": "sk-secret"}, target)  # secrets are never settings
    assert "sk-secret" not in target.read_text() and "k = 7" in target.read_text()


def test_the_readmes_configuration_block_shows_the_real_defaults(tmp_path: Path) -> None:
    """Every key the README's configuration block writes holds its real default, and
    `drag config show` lists every key with its source, environment variable and help."""
    import tomllib

    from click.testing import CliRunner

    from assistant.cli.root import cli

    readme = (Path(__file__).parents[1] / "README.md").read_text("utf-8")
    block = readme[readme.index("## Configuration") :]
    block = block[block.index("```toml\n") + 8 :]
    shown = tomllib.loads(block[: block.index("```")])
    defaults = config.load(env={}, config_file=tmp_path / "absent.toml")
    keys = [f"{section}.{name}" for section, names in shown.items() for name in names]
    assert len(keys) > 30
    for key in keys:
        section, name = key.split(".")
        value = defaults.get(key)
        assert (list(value) if isinstance(value, tuple) else value) == shown[section][name], key
    listed = CliRunner().invoke(cli, ["--config", str(tmp_path / "absent.toml"), "config", "show"])
    assert listed.exit_code == 0, listed.output
    lines = {ln.split(" ", 1)[0]: ln for ln in listed.output.splitlines()[1:]}
    for row in config.effective(defaults):
        line = lines[row["key"]]
        assert row["env"] in line and line.endswith(f": {row['help']}") and row["help"], line


H = 'not "local" or an http(s) base URL'
S = "holds a user name, a password"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://teacher.example/v1", H),
        ("teacher.example/v1", H),
        ("https:///v1", H),
        ("http://127.0.0.1:99999/v1", H),
        ("https://me:sk-123@teacher.example:99999/v1", S),
        ("htps://teacher.example/v1?api-key=sk-123", S),
        ("https://teacher.example/v1?access_token=sk-123", S),
        ("https://teacher.example/v1?apiKey=sk-123", S),
        ("https://teacher.example/api?code=sk-123", S),
        ("https://teacher.example/v1#key=sk-123", S),
        ("https://teacher.example/v1?x=1;api_key=sk-123", S),
        ("http://teacher.example/v1?%6Bey=sk-123", S),  # "key", as the server reads it
    ],
)
def test_a_teacher_endpoint_is_local_or_an_http_url_with_no_secret_in_it(
    url: str, why: str
) -> None:
    """The endpoint is written to the audit ledger and to error lines: a key in it would
    be kept in the clear (the key has its own place: set-key, the variable), and an
    error never repeats the URL."""
    with pytest.raises(ConfigError, match=re.escape(why)) as caught:
        config.load({"teacher.endpoint": url})
    assert "sk-123" not in str(caught.value) and url not in str(caught.value)
    for fine in (
        "local",
        "http://127.0.0.1:8080/v1",
        "http://localhost:11434/v1",
        "http://[::1]:8080/v1",
        "https://api.example.com/v1?api-version=2",
    ):
        assert config.load({"teacher.endpoint": fine}).teacher.endpoint == fine


def test_config_set_never_drops_a_setting_it_does_not_know(tmp_path: Path) -> None:
    """The file is rewritten on `config set`: a misspelt key in it ("modle") would have
    gone without a word. It is refused, the file untouched."""
    path = tmp_path / "config.toml"
    path.write_text('[teacher]\nmodle = "x"\n', "utf-8")
    with pytest.raises(ConfigError, match=r"unknown setting 'teacher.modle' \(misspelt\?\)"):
        config.save({"teacher.model": "x"}, path)
    assert path.read_text("utf-8") == '[teacher]\nmodle = "x"\n'
