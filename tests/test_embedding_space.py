"""Another embedder than the one that made the store's embeddings, end to end: the real
all-MiniLM-L6-v2 on ONNX Runtime, and a real second embedder made from its folder (its
last layer norm's scales changed by about a fifth: a model of the same size that agrees
with the first at a cosine of about 0.98, close enough that a recall across the two
would seem to work).  With the second, the cache recalls only a question asked again
word for word and says why, the files' index is neither searched nor added to, `drag
doctor` names the embedder that made them; `drag reembed` makes them all again."""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from assistant.base import config
from assistant.base.errors import ConfigError, NotCovered
from assistant.cli import cli
from assistant.core import doctor, pipeline
from assistant.core.session import Session
from assistant.models import embedder
from assistant.models.embedder import OnnxEmbedder
from assistant.store import space
from tests.conftest import TEST_MODEL, SocketLog, loopback_address
from tests.test_cli_errors import drag, one_line_error
from tests.test_files_integration import write_notes
from tests.test_integration import QUESTION, counting_embeddings, run_ask

pytestmark = pytest.mark.integration

REWORDED = "What's the capital of France?"


@pytest.fixture(scope="module")
def other_embedder(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("embedder") / "rescaled-minilm"
    shutil.copytree(embedder.bundled_path(), folder)
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    scale = (1 + 0.2 * np.random.default_rng(0).standard_normal(384)).astype(np.float32)
    for part in ("weight", "bias"):  # the last layer norm's
        offsets = header[f"encoder.layer.5.output.LayerNorm.{part}"]["data_offsets"]
        begin, end = (8 + size + o for o in offsets)
        data[begin:end] = (
            np.frombuffer(bytes(data[begin:end]), dtype=np.float32) * scale
        ).tobytes()
    weights.write_bytes(bytes(data))
    return str(folder)


def test_the_second_embedder_is_close_but_not_the_same(other_embedder: str) -> None:
    """What the tests below stand on: recall across the two would seem to work (the
    rewording's vector by one is a near-duplicate of the question's by the other),
    yet they are two embedders (below :data:`space.SAME`)."""
    first, second = OnnxEmbedder(), OnnxEmbedder(other_embedder)
    a, b = first.embed([QUESTION, *space.PROBES]), second.embed([REWORDED, *space.PROBES])
    assert float(a[0] @ b[0]) >= 0.92  # store.near_duplicate's default
    assert np.all(np.sum(a[1:] * b[1:], axis=1) < space.SAME)


def invoke(env: dict[str, str], *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env=env)


def test_another_embedder_recalls_only_exact_repeats_until_reembed(
    teacher_env: dict[str, str],
    teacher_server: str,
    socket_guard: SocketLog,
    other_embedder: str,
) -> None:
    env = {**teacher_env, "DRAG_TEACHER_MAX_TOKENS": "1024"}
    socket_guard.allowed.add(loopback_address(teacher_server))
    online = run_ask(env, "--mode", "evidence", "--n", "5", QUESTION)
    assert online["source"] == "teacher"
    uploads = online["provenance"]["uploads"]
    assert run_ask(env, "--offline", "--mode", "evidence", "--n", "5", REWORDED)["source"] == (
        "cache"
    )
    other = {**env, "DRAG_EMBEDDER_MODEL": other_embedder}

    # The same question: answered from the cache, nothing sent, and told why recall by
    # meaning is off.
    repeat = run_ask(other, "--mode", "evidence", "--n", "5", QUESTION)
    assert repeat["source"] == "cache" and repeat["provenance"]["how"] == "exact"
    assert repeat["provenance"]["uploads"] == uploads
    told = [w for w in repeat["warnings"] if "drag reembed" in w]
    assert told and f"not embedder.model {other_embedder!r}" in told[0]
    # A new question goes to the teacher, and what it says is not cached beside the
    # other embedder's (cache stats: still one question).
    new = run_ask(other, "--mode", "evidence", "--n", "5", "Which river flows through Paris?")
    assert new["source"] == "teacher" and told[0] in new["warnings"]
    stats = json.loads(invoke(other, "cache", "stats", "--json").stdout)
    assert stats["questions"] == 1
    # A rewording: not recalled by vectors another embedder made, and the reason given.
    socket_guard.allowed.clear()
    offline = run_ask(other, "--offline", "--mode", "evidence", "--n", "5", QUESTION)
    assert offline["source"] == "cache" and told[0] in offline["warnings"]
    missed = invoke(other, "ask", "--offline", "--mode", "evidence", "--n", "5", REWORDED)
    assert isinstance(missed.exception, NotCovered)
    assert "drag reembed" in str(missed.exception)

    made = invoke(other, "reembed")
    assert made.exit_code == 0, made.output
    assert made.stdout.strip().endswith(f"embeddings made with {other_embedder}")
    again = run_ask(other, "--offline", "--mode", "evidence", "--n", "5", REWORDED)
    assert again["source"] == "cache" and again["provenance"]["how"] != "exact"
    assert not [w for w in again["warnings"] if "drag reembed" in w]
    # Now the bundled model is the stranger.
    back = invoke(env, "ask", "--offline", "--mode", "evidence", "--n", "5", REWORDED)
    assert isinstance(back.exception, NotCovered)
    assert other_embedder in str(back.exception)
    assert socket_guard.refused == []


def test_files_indexed_by_another_embedder_are_refused_until_reembed(
    tmp_path: Path, socket_guard: SocketLog, other_embedder: str
) -> None:
    notes = write_notes(tmp_path / "notes")
    env = {"DRAG_STUDENT_MODEL": TEST_MODEL, "DRAG_FILES_ABSTAIN": "false"}
    indexed = invoke(env, "index", str(notes / "chats"))
    assert indexed.exit_code == 0, indexed.output
    other = {**env, "DRAG_EMBEDDER_MODEL": other_embedder}

    line = one_line_error(drag("ask", "--files", "Where is the noodle bar?", env=other))
    assert "your files' index cannot be searched or added to" in line
    assert "drag reembed" in line
    more = invoke(other, "index", str(notes / "garden.md"))
    assert isinstance(more.exception, ConfigError) and "drag reembed" in str(more.exception)
    with Session(config.load(env={**os.environ, **other})) as rt:
        check = doctor.embeddings_check(rt)
    assert not check.ok and check.fix.startswith("`drag reembed`")
    assert check.detail == f"made by all-MiniLM-L6-v2, not by embedder.model {other_embedder!r}"

    assert invoke(other, "reembed").exit_code == 0
    asked = invoke(other, "ask", "--files", "--json", "--k", "1", "Where is the noodle bar?")
    assert asked.exit_code == 0, asked.output
    record = json.loads(asked.stdout)
    assert record["source"] == "files" and "noodle bar" in record["passages"][0]["text"]
    with Session(config.load(env={**os.environ, **other})) as rt:
        assert doctor.embeddings_check(rt).ok


def test_a_reembed_cut_short_leaves_no_stored_embedding_in_use(
    teacher_env: dict[str, str],
    teacher_server: str,
    socket_guard: SocketLog,
    monkeypatch: pytest.MonkeyPatch,
    other_embedder: str,
) -> None:
    """Cut short after the cache's questions, a reembed leaves each entry's question
    embedded by the new embedder and its statements by the old: an exact repeat asked
    with the new one would pass the entry's own check and rank by the old vectors.  The
    store records no embedder until a reembed ends, so the statements are embedded
    again (and the answer says why)."""
    env = {**teacher_env, "DRAG_TEACHER_MAX_TOKENS": "1024"}
    socket_guard.allowed.add(loopback_address(teacher_server))
    assert run_ask(env, "--mode", "evidence", "--n", "5", QUESTION)["source"] == "teacher"
    socket_guard.allowed.clear()
    other = {**os.environ, **env, "DRAG_EMBEDDER_MODEL": other_embedder}

    def cut(table: str, done: int, total: int) -> None:
        if table == "cache_entries" and done == total:
            raise KeyboardInterrupt

    with Session(config.load(env=other)) as rt, pytest.raises(KeyboardInterrupt):
        rt.reembed(cut)
    runtime = Session(config.load(env={**other, "DRAG_STORE_OFFLINE": "true"}))
    try:
        embedded = counting_embeddings(runtime, monkeypatch)
        repeat = pipeline.ask(runtime, QUESTION, mode="evidence", n=5)
    finally:
        runtime.close()
    assert repeat.source == "cache" and repeat.provenance["how"] == "exact"
    assert any("being made again" in w and "run it again" in w for w in repeat.warnings)
    statements = {e.text for e in repeat.evidence}  # embedded again, not taken as kept
    assert statements and any(statements <= set(texts) for texts in embedded), embedded


def test_indexing_checks_the_embedder_before_each_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `drag reembed` or another embedder can come while files are indexed: the check
    runs before each batch is stored, and a failed one stops the run there."""
    from assistant.core import localfiles
    from assistant.drag import filesindex
    from assistant.store import files as stored

    notes = write_notes(tmp_path / "notes")
    monkeypatch.setattr(filesindex, "BATCH_CHUNKS", 1)  # a file a batch
    calls: list[int] = []
    with Session(config.load(env={**os.environ, "DRAG_STUDENT_MODEL": TEST_MODEL})) as rt:
        real = rt.check_files_embeddings

        def counted() -> None:
            calls.append(1)
            if len(calls) == 3:  # before the second batch
                raise ConfigError("`drag reembed` needed: stop here")
            real()

        monkeypatch.setattr(rt, "check_files_embeddings", counted)
        with pytest.raises(ConfigError):
            localfiles.index(rt, [notes])
        assert stored.count(rt.store.db) == 1


def test_a_reembed_begun_while_the_teacher_answers_keeps_its_answer_out_of_the_cache(
    on_teacher: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked before the teacher's answer is cached, then a `drag reembed` begins (in
    another process) before the write: the write's own transaction sees it, nothing is
    cached, and the answer says so (the ledger keeps the teacher's reply)."""
    with Session(config.load()) as rt:
        real = rt.embeddings_writer

        def then_a_reembed(*, keep: bool = True) -> str | None:
            writer = real(keep=keep)
            db = rt.store.db
            if db.execute("SELECT count(*) FROM uploads").fetchone()[0]:  # answered
                with db.conn:
                    db.execute(
                        "UPDATE meta SET value = ? WHERE key = ?", [space.REPLACING, space.KEY]
                    )
            return writer

        monkeypatch.setattr(rt, "embeddings_writer", then_a_reembed)
        result = pipeline.ask(rt, QUESTION, mode="evidence", n=5)
        assert result.source == "teacher" and result.answer.strip()
        assert any(
            w.startswith("not cached:") and "being made again meanwhile" in w
            for w in result.warnings
        ), result.warnings
        assert rt.store.db.execute("SELECT count(*) FROM cache_entries").fetchone()[0] == 0


def test_an_indexing_write_begun_before_a_reembed_is_not_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assistant.base.errors import StoreError
    from assistant.core import localfiles
    from assistant.store import files as stored

    notes = write_notes(tmp_path / "notes")
    with Session(config.load(env={**os.environ, "DRAG_STUDENT_MODEL": TEST_MODEL})) as rt:
        real, calls = rt.check_files_embeddings, []

        def then_a_reembed() -> None:
            real()
            calls.append(1)
            if len(calls) < 2:  # the run's own first check; then its first batch's
                return
            with rt.store.db.conn:  # another process begins a reembed
                rt.store.db.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                    [space.KEY, space.REPLACING],
                )

        monkeypatch.setattr(rt, "check_files_embeddings", then_a_reembed)
        with pytest.raises(StoreError, match="being made again meanwhile"):
            localfiles.index(rt, [notes])
        assert stored.count(rt.store.db) == 0
