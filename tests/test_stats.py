"""The shared benchmark statistics, against cases worked by hand."""

from __future__ import annotations

import math

import pytest
from drag_bench.stats import mcnemar_exact, paired, percentile


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (0, 0, 1.0),  # no discordant pair: no evidence either way
        (1, 0, 1.0),  # n = 1: 2 * 1/2
        (5, 0, 0.0625),  # n = 5: 2 * 1/32
        (0, 5, 0.0625),  # symmetric
        (10, 2, 2 * 79 / 4096),  # n = 12: 2 * (C(12,0) + C(12,1) + C(12,2)) / 2^12
        (3, 3, 1.0),  # balanced: capped at 1
        (6, 0, 0.03125),  # n = 6: the smallest all-one-way count under 0.05
    ],
)
def test_mcnemar_exact_by_hand(b: int, c: int, p: float) -> None:
    assert math.isclose(mcnemar_exact(b, c), p, rel_tol=1e-12)


def test_mcnemar_refuses_negative_counts() -> None:
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_paired_counts_the_discordant_pairs() -> None:
    baseline = [True, True, False, False, True, False]
    method = [True, False, True, True, True, False]
    result = paired(baseline, method)
    assert (result.questions, result.right_to_wrong, result.wrong_to_right) == (6, 1, 2)
    assert math.isclose(result.p, 1.0)  # n = 3, min 1: 2 * (1 + 3) / 8 = 1
    with pytest.raises(ValueError):
        paired([True], [True, False])


def test_percentile_by_nearest_rank() -> None:
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert percentile(values, 0.5) == 3.0
    assert percentile(values, 0.95) == 5.0
    assert percentile(values, 0.0) == 1.0
    assert math.isnan(percentile([], 0.5))
    assert percentile([], 0.5, empty=0.0) == 0.0
