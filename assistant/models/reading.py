"""What reading a prompt yields: a reply and its times (:class:`Generation`), a greedy
opening with its probabilities (:class:`Probe`), and the logits processors that watch
llama.cpp choose without changing what it chooses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    prompt_seconds: float  # until the first token
    decode_seconds: float  # first token to last
    finished: bool = True  # False: cut at max_tokens
    decoded: int | None = None  # the tokens decode_seconds covers, where not all but the first
    # The natural log-probability of each token of the reply (asked for:
    # Student.chat(logprobs=True)), as the model found it before any penalty or grammar;
    # a reply cut at max_tokens lacks its last.
    token_logprobs: tuple[float, ...] = ()

    @property
    def tokens_per_second(self) -> float:
        # Decode speed excludes the first token, which carries the prompt's cost.
        decoded = self.completion_tokens - 1 if self.decoded is None else self.decoded
        if decoded < 1 or self.decode_seconds <= 0:
            return 0.0
        return decoded / self.decode_seconds


@dataclass(frozen=True)
class Probe:
    """The opening of a reply, read greedily with how likely the student found it."""

    text: str
    token_logprobs: tuple[float, ...]  # natural log-probability of each token written
    # With choices: each choice's log-probability among the choices, from the first
    # step's distribution (empty when two choices start with the same token).
    choice_logprobs: dict[str, float]
    prompt_tokens: int
    seconds: float
    tokens: tuple[int, ...] = ()  # the tokens written, as the model wrote them
    ended: bool = False  # the reply ended within them


def log_normaliser(x: Any) -> float:
    """log(sum(exp(x))) of a row of logits, from its largest (summed in double precision,
    whatever ``x``'s)."""
    import numpy as np

    top = float(x.max())
    return top + float(np.log(np.exp(x - top).sum(dtype=np.float64)))


class LastRow:
    """A logits processor that keeps the log-probabilities of the latest step and
    changes nothing (llama.cpp hands it the raw logits, before any grammar)."""

    def __init__(self) -> None:
        self.row: Any = None

    def __call__(self, _input_ids: Any, logits: Any) -> Any:
        import numpy as np

        x = np.asarray(logits, dtype=np.float64)
        self.row = x - log_normaliser(x)
        return logits


class Chosen:
    """A logits processor that keeps the log-probability of each token the reply chose
    and changes nothing.  llama.cpp hands it the raw logits of each step before that
    step's token is chosen, and the token chosen one step before as the last of the ids
    read: a token's is kept at the step after it (the reply's last, when the end is
    chosen), so a reply cut at its longest lacks its last."""

    def __init__(self) -> None:
        self.logprobs: list[float] = []
        self._row: Any = None
        self._norm = 0.0

    def __call__(self, input_ids: Any, logits: Any) -> Any:
        import numpy as np

        if self._row is not None:
            self.logprobs.append(float(self._row[int(input_ids[-1])]) - self._norm)
        # A copy (the samplers after this one, and the next step, reuse the array), in
        # single precision as llama.cpp gives them, summed in double.
        self._row = np.array(logits, dtype=np.float32, copy=True)
        self._norm = log_normaliser(self._row)
        return logits
