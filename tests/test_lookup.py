"""Greedy decoding that drafts from the prompt (assistant.models.lookup, issue 48): the
drafts' index on its own, then the real llama.cpp with the tiny test model."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from assistant.models import lookup
from assistant.models.student import Student
from assistant.privacy import reader as R


def test_a_guess_is_what_followed_the_last_tokens_where_they_stood_before() -> None:
    drafts = lookup.Drafts([5, 6, 7, 8, 9, 1, 5, 6])
    assert drafts.guess(2) == [7, 8]
    drafts.add(3)  # 6, 3 never stood before; 3 neither: nothing to guess
    assert drafts.guess() == []


def test_the_longest_run_is_looked_up_first_and_its_latest_place_taken() -> None:
    # "2" was followed by 9, later by 4; "1 2" only by 9: the run of two decides.
    drafts = lookup.Drafts([1, 2, 9, 9, 7, 2, 4, 4, 1, 2])
    assert drafts.guess(1) == [9]
    drafts = lookup.Drafts([3, 2, 9, 9, 7, 2, 4, 4, 1, 2])  # no "1 2" before: "2"'s latest
    assert drafts.guess(1) == [4]


class _CountingDict(dict[tuple[int, ...], int]):
    looked = 0

    def get(self, key: tuple[int, ...], default: object = None) -> object:  # type: ignore[override]
        self.looked += 1
        return super().get(key, default)


@pytest.mark.parametrize("length", [10, 10_000])
def test_a_guess_costs_the_same_however_long_the_text(length: int) -> None:
    """At most one look-up per run length: no scan of the tokens so far."""
    drafts = lookup.Drafts([t % 7 for t in range(length)] + [99])
    drafts._ends = _CountingDict(drafts._ends)
    assert drafts.guess() == []
    assert drafts._ends.looked <= lookup.NGRAM


@pytest.fixture(scope="module")
def tiny(test_model_path: Path) -> Student:
    return Student(test_model_path, n_ctx=2048)


def _tokens(model: Student, messages: list[dict[str, str]]) -> list[int]:
    formatted = model._formatter()(messages=messages)
    return model._llm.tokenize(
        formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special, special=True
    )


QUESTIONS = [
    "hey its dana from brightloop, my boss tomas wants the q3 report by friday",
    "Ich heiße Jürgen Müßig und wohne in Köln, Straße 5",
]
# The tiny model's reply copies "王小明" and "杭州": characters whose bytes span tokens.
SPANNING = [{"role": "user", "content": "Please write the name 王小明 and the city 杭州 again."}]


@pytest.mark.integration
@pytest.mark.parametrize("asked", [*(R.messages(q) for q in QUESTIONS), SPANNING])
def test_the_reply_is_the_models_greedy_reply_in_fewer_batches(
    tiny: Student, asked: list[dict[str, str]]
) -> None:
    """The same text as llama-cpp-python's own greedy decoding (characters whose bytes
    span tokens included), written in fewer batches than tokens."""
    tiny.lookup = False
    tiny.forget()  # each from the same state: batches split alike
    plain = tiny.chat(asked, max_tokens=96, temperature=0.0)
    if asked is SPANNING:
        assert "王小明" in plain.text
    tiny.forget()
    decoded: list[lookup.Decoded] = []
    real = lookup.greedy

    def spy(*args: object, **kwargs: object) -> lookup.Decoded:
        decoded.append(real(*args, **kwargs))  # type: ignore[arg-type]
        return decoded[-1]

    pieces: list[str] = []
    tiny.lookup = True
    try:
        lookup.greedy = spy  # type: ignore[assignment]
        drafted = tiny.chat(asked, max_tokens=96, temperature=0.0, on_text=pieces.append)
    finally:
        lookup.greedy = real  # type: ignore[assignment]
        tiny.lookup = False
    assert drafted.text == plain.text
    assert "".join(pieces).strip() == drafted.text
    assert len(decoded[0].tokens) > 8
    assert decoded[0].batches < len(decoded[0].tokens)


@pytest.mark.integration
def test_a_drafted_reply_has_the_log_probabilities_of_a_token_at_a_time(tiny: Student) -> None:
    """Asked for how sure the model was (the files check reads it), a drafted reply has
    a log-probability for each of its tokens, each the one llama-cpp-python's own decoding
    records for it, up to the rounding of a batch (the first, read after the prompt as
    both read it, exactly; a batch of two rounds otherwise than one token, by up to a
    tenth here)."""
    asked = R.messages(QUESTIONS[0])
    assert tiny.can_draft()  # this student can draft its greedy replies
    tiny.lookup = False
    tiny.forget()
    plain = tiny.chat(asked, max_tokens=24, temperature=0.0, logprobs=True)
    tiny.forget()
    drafted = tiny.chat(asked, max_tokens=24, temperature=0.0, logprobs=True, draft=True)
    unasked = tiny.chat(asked, max_tokens=24, temperature=0.0, draft=True)
    assert drafted.text == plain.text and len(plain.token_logprobs) >= 8
    assert len(drafted.token_logprobs) == len(plain.token_logprobs)
    assert drafted.token_logprobs[0] == plain.token_logprobs[0]
    assert drafted.token_logprobs == pytest.approx(plain.token_logprobs, abs=0.15)
    assert min(plain.token_logprobs) < -0.05  # not all sure: the comparison can tell
    assert unasked.text == plain.text and unasked.token_logprobs == ()


class _Enough(Exception):
    pass


@pytest.mark.integration
@pytest.mark.parametrize("stop", [4, 5, 6, 7])
def test_a_reply_stopped_midway_leaves_a_context_that_the_next_reply_can_reuse(
    tiny: Student, stop: int
) -> None:
    """The reader stops a reply as soon as its JSON closes (an exception from its
    callback): what llama.cpp holds then is the prompt and the tokens written (guesses
    not taken removed), so that a reply that goes on from there reuses it and ends as the
    whole reply would."""
    asked = R.messages(QUESTIONS[0])
    tiny.forget()
    fresh = tiny.chat(asked, max_tokens=48, temperature=0.0).text
    llm = tiny._llm
    prompt = _tokens(tiny, tiny._inert_messages(asked))
    written: list[int] = []

    def stop_midway(token: int) -> None:
        written.append(token)
        if len(written) == stop:
            raise _Enough

    tiny.forget()
    with pytest.raises(_Enough):
        lookup.greedy(llm, prompt, max_tokens=48, on_token=stop_midway, clock=time.perf_counter)
    held = [int(t) for t in llm.input_ids[: llm.n_tokens]]
    assert len(prompt) <= len(held) <= len(prompt) + len(written)
    assert held == (prompt + written)[: len(held)]
    rest = llm.create_completion(prompt + written, max_tokens=48 - stop, temperature=0.0)
    whole = llm.detokenize(written).decode("utf-8") + rest["choices"][0]["text"]
    assert whole.strip() == fresh


@pytest.mark.integration
def test_drags_reader_decodes_by_drafting_from_the_question(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from assistant.base import config
    from assistant.core.session import Session

    from .conftest import TEST_MODEL

    flags = {"privacy.reader": "on", "store.offline": False, "privacy.reader_model": TEST_MODEL}
    calls: list[str] = []
    real = lookup.greedy

    def spy(*args: object, **kwargs: object) -> lookup.Decoded:
        calls.append("greedy")  # the reader stops the reply where its JSON closes: it raises
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(lookup, "greedy", spy)
    with Session(config.load().with_flags(flags)) as runtime:
        assert runtime.read("hey its dana from brightloop, my boss is tomas") is not None
    assert calls
