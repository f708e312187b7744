"""Statistics the benchmarks share: one percentile, one spread (mean, median, p95), and
paired tests for two methods answered on the same questions (the exact McNemar test)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], q: float, empty: float = float("nan")) -> float:
    """The ``q`` quantile (0-1) by nearest rank on the sorted values; ``empty`` for none."""
    if not values:
        return empty
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def spread(values: Sequence[float]) -> dict[str, float]:
    """Mean, median and 95th percentile (nearest rank); NaN for no values."""
    return {
        "mean": statistics.fmean(values) if values else float("nan"),
        "p50": percentile(values, 0.5),
        "p95": percentile(values, 0.95),
    }


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs (right→wrong,
    wrong→right): twice the binomial(b + c, ½) tail at min(b, c), at most 1."""
    if b < 0 or c < 0:
        raise ValueError("counts of discordant pairs cannot be negative")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / (1 << n)
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class Paired:
    """Two answers to each of the same questions: the baseline's and the method's."""

    questions: int
    right_to_wrong: int  # right in the baseline, wrong with the method
    wrong_to_right: int
    p: float  # exact McNemar

    def to_dict(self) -> dict[str, float | int]:
        return {
            "questions": self.questions,
            "right_to_wrong": self.right_to_wrong,
            "wrong_to_right": self.wrong_to_right,
            "mcnemar_p": self.p,
        }


def paired(baseline: Sequence[bool], method: Sequence[bool]) -> Paired:
    """The paired comparison of ``method`` against ``baseline`` (same questions, same order)."""
    if len(baseline) != len(method):
        raise ValueError("paired results need the same questions on both sides")
    b = sum(1 for x, y in zip(baseline, method, strict=True) if x and not y)
    c = sum(1 for x, y in zip(baseline, method, strict=True) if y and not x)
    return Paired(len(baseline), b, c, mcnemar_exact(b, c))
