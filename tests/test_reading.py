"""The logits processor that watches the student choose (pure logic, fake logits)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from assistant.models.reading import Chosen

# Fake logits over a vocabulary of three tokens, one row per step.
FAKE_ROWS = [
    np.array([0.0, math.log(3.0), 0.0], dtype=np.float32),  # token 1: 3/5
    np.array([2.0, 0.0, 0.0], dtype=np.float32),  # token 0: e^2 / (e^2 + 2)
    np.array([0.0, 0.0, 0.0], dtype=np.float32),  # the end: not the reply's
]
PROMPT = [7, 8, 9]


def test_each_chosen_tokens_log_probability_is_kept_a_step_later_and_nothing_changes() -> None:
    chosen = Chosen()
    read = list(PROMPT)
    for row, token in zip(FAKE_ROWS, [1, 0, 2], strict=True):
        given = row.copy()
        assert chosen(np.array(read), given) is given
        assert np.array_equal(given, row)  # handed back as it came
        read.append(token)
    assert chosen.logprobs == pytest.approx(
        [math.log(3 / 5), 2.0 - math.log(math.exp(2.0) + 2.0)], abs=1e-6
    )
