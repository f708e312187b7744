"""The benchmarks are a package of their own (``drag_bench``, in the repository's
``bench/`` folder), never in the app's wheel: where it is missing, ``drag bench`` and the
app's Benchmark screen say how to install it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from assistant.base.errors import InputError

NOT_INSTALLED = (
    "the benchmarks are not installed: they are a package of their own, drag-bench "
    "(in a checkout: pip install -e ./bench; make run and make test install it)"
)


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """Imports of ``drag_bench`` inside: a missing package is a one-line error."""
    try:
        yield
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "drag_bench":
            raise
        raise InputError(NOT_INSTALLED) from None
