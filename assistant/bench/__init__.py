"""Benchmarks that ship with drag-assistant (they print figures; no test times them)."""

from __future__ import annotations

from collections.abc import Sequence


def split_choices(text: str, allowed: Sequence[str], what: str) -> list[str]:
    """``"a, b"`` -> ``["a", "b"]``; raises ValueError naming the first unknown choice."""
    chosen = [c.strip() for c in text.split(",") if c.strip()]
    bad = [c for c in chosen if c not in allowed]
    if bad:
        raise ValueError(f"unknown {what} {bad[0]!r}; {what}s are {', '.join(allowed)}")
    return chosen
