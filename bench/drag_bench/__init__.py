"""Benchmarks that ship with drag-assistant (they print figures; no test times them)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def arguments(name: str, doc: str | None) -> argparse.ArgumentParser:
    """The parser of ``drag bench NAME``: its module's docstring is its help."""
    return argparse.ArgumentParser(
        prog=f"drag bench {name}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def split_choices(text: str, allowed: Sequence[str], what: str) -> list[str]:
    """``"a, b"`` -> ``["a", "b"]``; raises ValueError naming the first unknown choice."""
    chosen = [c.strip() for c in text.split(",") if c.strip()]
    bad = [c for c in chosen if c not in allowed]
    if bad:
        raise ValueError(f"unknown {what} {bad[0]!r}; {what}s are {', '.join(allowed)}")
    return chosen
