"""Greedy decoding that drafts from the prompt ("prompt lookup decoding", issue 48).

The privacy reader's reply is made of what it read: each value it lists is copied from
the question, and the JSON around the values repeats its examples.  Decoding on a CPU
costs about as much for a few tokens in one batch as for one, so this decoder guesses the
next few tokens from the text (where the last tokens written stood before in the prompt
or the reply, what followed them there) and has the model check them all in one batch:
it keeps the guesses that are the model's own greedy choice, and the model's own token at
the first that is not.  The reply is the model's greedy reply; only its tokens are
computed fewer at a time.  (A batch may round a close call differently from one token at
a time: the reply is then another greedy reply of the same model, read by the same
checks.)

Each step costs one batch of the model and constant work here (an index of the n-grams
seen, updated as tokens come): linear in the reply.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# Chosen by the reader's time on the first 12 queries under 1,500 characters of PUPA-TNB's
# seen half (docs/results/reader-lookup): two tokens and one guess took 41.1 s, a token at
# a time 54.2 s (three runs); longer runs or guesses 44.6 to 46.3 s (a guess more costs
# about a quarter of a token's time on 2 cores, and is taken less often).
NGRAM = 2  # the longest run of last tokens looked up (then shorter ones)
DRAFT = 1  # tokens guessed at a time


class Drafts:
    """Where each run of 1..:data:`NGRAM` tokens last ended, in the tokens so far."""

    def __init__(self, tokens: Sequence[int] = ()) -> None:
        self.tokens: list[int] = []
        self._ends: dict[tuple[int, ...], int] = {}
        for token in tokens:
            self.add(token)

    def add(self, token: int) -> None:
        # Before the token is added, the runs that end at the previous token are indexed
        # to say what came after them: this token's place.
        self.tokens.append(token)
        end = len(self.tokens)
        for n in range(1, NGRAM + 1):
            if end - 1 - n >= 0:
                self._ends[tuple(self.tokens[end - 1 - n : end - 1])] = end - 1

    def guess(self, limit: int = DRAFT) -> list[int]:
        """The tokens that followed the longest run of the last tokens where it stood
        before (its latest place), at most ``limit``."""
        for n in range(min(NGRAM, len(self.tokens)), 0, -1):
            at = self._ends.get(tuple(self.tokens[-n:]))
            if at is not None:
                return self.tokens[at : at + limit]
        return []


@dataclass
class Decoded:
    tokens: list[int]
    finished: bool  # ended by the model (an end-of-generation token), not the limit
    prompt_seconds: float
    batches: int
    # Of each token, when asked: how likely the model found it (the log-probability
    # under the logits that chose it, as :class:`reading.Chosen` keeps them; a reply
    # cut at its longest has its last token's too, which Chosen's lacks).
    logprobs: list[float] = field(default_factory=list)


def greedy(
    llm: Any,
    prompt: Sequence[int],
    *,
    max_tokens: int,
    on_token: Callable[[int], None],
    clock: Callable[[], float],
    logprobs: bool = False,
) -> Decoded:
    """The greedy reply of ``llm`` (a llama-cpp-python ``Llama``) to ``prompt``, each
    token passed to ``on_token`` as it is settled (``logprobs``: with how likely the
    model found it, ``Decoded.logprobs``).  What the context already holds of the
    prompt (its head) is not read again; after this, the context holds the prompt and the
    reply, and llama-cpp-python's own calls reuse it as they would their own."""
    import llama_cpp
    import numpy as np

    from assistant.models.reading import log_normaliser

    started = clock()
    prompt = list(prompt)
    held = llm.longest_token_prefix(llm.input_ids[: llm.n_tokens], prompt)
    held = min(held, len(prompt) - 1)  # the last prompt token is read for its logits
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    n_vocab = llm.n_vocab()
    llm._requires_eval = True  # what generate() must redo if this stops halfway

    def drop_after(n: int) -> None:
        """The context keeps its first ``n`` tokens only."""
        llm.n_tokens = n
        if not llm._ctx.kv_cache_seq_rm(-1, n, -1):  # a model that cannot take tokens back
            raise RuntimeError("llama.cpp could not drop the tokens it had guessed")

    def evaluate(tokens: list[int], rows: bool) -> tuple[Any, list[float]]:
        """Read ``tokens`` after what the context holds; the greedy choice after each
        (``rows``: tokens of one batch) or after the last only, and (``logprobs``) the
        log-probability of each choice."""
        assert not rows or len(tokens) <= llm.n_batch
        drop_after(llm.n_tokens)
        for i in range(0, len(tokens), llm.n_batch):
            batch = tokens[i : i + llm.n_batch]
            llm._batch.set_batch(batch=batch, n_past=llm.n_tokens, logits_all=rows)
            llm._ctx.decode(llm._batch)
            llm.input_ids[llm.n_tokens : llm.n_tokens + len(batch)] = batch
            llm.n_tokens += len(batch)
        count = len(tokens) if rows else 1
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(count * n_vocab,))
        logits = logits.reshape(count, n_vocab)
        best = logits.argmax(axis=1)
        if not logprobs:
            return best, [0.0] * count
        pairs = zip(logits, best, strict=True)
        return best, [float(row[b]) - log_normaliser(row) for row, b in pairs]

    drop_after(held)
    best, sure = evaluate(prompt[held:], rows=False)
    prompt_seconds = clock() - started
    drafts = Drafts(prompt)
    reply: list[int] = []
    likely: list[float] = []
    batches = 0
    room = min(max_tokens, llm.n_ctx() - len(prompt) - 1)
    token, chance = int(best[-1]), sure[-1]

    def take(token: int, chance: float) -> None:
        reply.append(token)
        likely.append(chance)
        drafts.add(token)
        on_token(token)

    def ended(finished: bool) -> Decoded:
        return Decoded(reply, finished, prompt_seconds, batches, likely if logprobs else [])

    while True:
        if llama_cpp.llama_vocab_is_eog(vocab, token):
            return ended(True)
        if len(reply) >= room:
            return ended(False)
        take(token, chance)
        guess = drafts.guess(min(DRAFT, room - len(reply)))
        start = llm.n_tokens
        best, sure = evaluate([token, *guess], rows=True)
        batches += 1
        taken = 0
        while taken < len(guess) and int(best[taken]) == guess[taken]:
            token = guess[taken]
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                break
            take(token, sure[taken])
            taken += 1
        drop_after(start + 1 + taken)  # what was taken; the guesses after it go
        token, chance = int(best[taken]), sure[taken]


def text_reply(
    llm: Any,
    prompt: Sequence[int],
    *,
    max_tokens: int,
    on_text: Callable[[str], None] | None,
    clock: Callable[[], float],
    logprobs: bool = False,
) -> tuple[str, Decoded]:
    """:func:`greedy`'s reply as text, passed to ``on_text`` piece by piece (a character
    whose bytes are split over tokens waits for the rest)."""
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pieces: list[str] = []

    def say(text: str) -> None:
        if text:
            pieces.append(text)
            if on_text is not None:
                on_text(text)

    decoded = greedy(
        llm,
        prompt,
        max_tokens=max_tokens,
        on_token=lambda token: say(utf8.decode(llm.detokenize([token]))),
        clock=clock,
        logprobs=logprobs,
    )
    say(utf8.decode(b"", final=True))  # bytes of no whole character: "\ufffd"
    return "".join(pieces), decoded
