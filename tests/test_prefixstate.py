"""The prompt heads' llama.cpp states kept on disk (assistant.models.prefixstate): one
file per model and tag, and nothing of a question in them."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.models import modelfiles, prefixstate
from assistant.models.student import Student
from tests.conftest import TEST_MODEL


def test_a_saved_head_replaces_only_its_own_models_and_tags_states(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")

    def made(key: str, tag: str = "") -> Path:
        path = prefixstate.state_file(tmp_path, model, key, tag)
        path.write_bytes(b"")
        return path

    reader, files = made("a" * 64), made("b" * 64, "files")
    other = tmp_path / "0123456789ab-cccccccccccccccc.state"  # another model's
    other.write_bytes(b"")
    assert prefixstate._same_head(prefixstate.state_file(tmp_path, model, "d" * 64)) == [reader]
    assert prefixstate._same_head(prefixstate.state_file(tmp_path, model, "e" * 64, "files")) == [
        files
    ]
    assert prefixstate._same_head(prefixstate.state_file(tmp_path, model, "f" * 64, "x2")) == []
    for bad in ("files-v2", "a b", "é"):
        with pytest.raises(ValueError, match="letters and digits"):
            prefixstate.state_file(tmp_path, model, "a" * 64, bad)


@pytest.mark.integration
def test_a_head_saved_after_a_question_holds_nothing_of_it(tmp_path: Path) -> None:
    """A model that answered a question and then keeps a head writes the state a fresh
    model writes: the question's tokens are not in it."""
    from assistant.drag import answer

    path, _spec = modelfiles.resolve(TEST_MODEL)
    used, fresh = Student(path, n_ctx=2048), Student(path, n_ctx=2048)
    try:
        asked = "My passport number is X99-ZEBRA-7731 and my name is Ottoline Quarrie."
        used.chat([{"role": "user", "content": asked}], max_tokens=4)
        head = (answer.files_head(), answer.FILES_HEAD_MARK)
        assert used.keep_head(*head, tmp_path / "used", "files") == "saved"
        assert fresh.keep_head(*head, tmp_path / "fresh", "files") == "saved"
        (after,) = (tmp_path / "used").iterdir()
        (clean,) = (tmp_path / "fresh").iterdir()
        assert after.name == clean.name and after.read_bytes() == clean.read_bytes()
    finally:
        used.close()
        fresh.close()


@pytest.mark.integration
def test_a_head_that_cannot_be_held_leaves_what_the_model_read_or_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """keep_head is only a speed-up: a prompt format it cannot read leaves llama.cpp's
    own reuse of the last prompt alone; a failure while holding leaves nothing read."""
    from assistant.base.errors import ModelError
    from assistant.drag import answer

    path, _spec = modelfiles.resolve(TEST_MODEL)
    student = Student(path, n_ctx=2048)
    head = (answer.files_head(), answer.FILES_HEAD_MARK)
    try:
        student.chat([{"role": "user", "content": "Where is the noodle bar?"}], max_tokens=4)
        read = student._llm.n_tokens
        assert read > 0

        def other_format() -> None:
            raise ModelError("prompted in another format")

        with monkeypatch.context() as m:
            m.setattr(student, "_formatter", other_format)
            assert student.keep_head(*head, tmp_path, "files") == "none"
        assert student._llm.n_tokens == read

        def refused(*_a: object, **_k: object) -> str:
            raise RuntimeError("llama_state_set_data failed")

        monkeypatch.setattr(prefixstate, "keep", refused)
        assert student.keep_head(*head, tmp_path, "files") == "none"
        assert student._llm.n_tokens == 0
    finally:
        student.close()


@pytest.mark.integration
def test_a_head_kept_without_flash_attention_answers_alike_with_it(tmp_path: Path) -> None:
    """Flash attention (measured for the privacy reader, not kept) lays llama.cpp's
    cache out otherwise: a state kept without it is never read as one with it (its key
    differs), and a model with it answers the same whether its head came from disk or
    was read."""
    from assistant.privacy import reader

    path, _spec = modelfiles.resolve(TEST_MODEL)
    head = (reader.head(), reader.HEAD_MARK)
    asked = reader.messages("Ask Ottoline Quarrie where the noodle bar is.")
    replies, files = [], []
    for flash, folder in ((False, "kept"), (True, "kept"), (True, "kept"), (True, "afresh")):
        student = Student(path, n_ctx=2048, flash_attn=flash)
        try:
            how = student.keep_head(*head, tmp_path / folder)
            replies.append((how, student.chat(asked, max_tokens=12).text))
            files.append([p.name for p in (tmp_path / "kept").iterdir()])
        finally:
            student.close()
    assert [how for how, _text in replies] == ["saved", "saved", "loaded", "saved"]
    assert files[0] != files[1]  # keyed apart (llama.cpp would refuse the other layout too)
    assert replies[2][1] == replies[3][1]  # loaded from disk or read: the same reply
    assert len(list((tmp_path / "kept").iterdir())) == 1  # the other layout's replaced
