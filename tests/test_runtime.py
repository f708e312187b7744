"""Runtime.preload: parts load side by side, once, and a failure there is the caller's.

The parts here are fakes (a slow loader that counts its calls): what is tested is the
loading logic, not a model."""

from __future__ import annotations

import threading
import time

import pytest

from assistant import runtime
from assistant.config import load
from assistant.errors import ModelError
from assistant.runtime import Runtime


class FakePart:
    def close(self) -> None:
        pass


class FakeLoader:
    """Loads a fake part slowly, counting calls and threads; fails while ``fail`` is set."""

    def __init__(self, seconds: float = 0.3) -> None:
        self.seconds = seconds
        self.calls = 0
        self.threads: list[str] = []
        self.fail = False

    def __call__(self, _rt: Runtime) -> object:
        self.calls += 1
        self.threads.append(threading.current_thread().name)
        time.sleep(self.seconds)
        if self.fail:
            raise ModelError("the fake part cannot load")
        return FakePart()


def fake_part(monkeypatch: pytest.MonkeyPatch, name: str, loader: FakeLoader) -> None:
    part: runtime._Part[FakePart] = runtime._Part(loader)
    part.__set_name__(Runtime, name)
    monkeypatch.setattr(Runtime, name, part)


def test_preloaded_parts_load_side_by_side_and_once(monkeypatch: pytest.MonkeyPatch) -> None:
    student, embedder = FakeLoader(), FakeLoader()
    fake_part(monkeypatch, "student", student)
    fake_part(monkeypatch, "embedder", embedder)
    with Runtime(load()) as rt:
        started = time.perf_counter()
        rt.preload("student", "embedder")
        first = rt.student  # waits for the load under way instead of starting another
        assert rt.embedder is rt.embedder
        waited = time.perf_counter() - started
        assert rt.student is first
    assert student.calls == embedder.calls == 1
    assert student.threads == ["drag-load-student"] and embedder.threads == ["drag-load-embedder"]
    assert waited < 0.55  # the two 0.3 s loads overlapped


def test_a_part_that_fails_to_preload_fails_for_its_user(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    student = FakeLoader(seconds=0.05)
    student.fail = True
    fake_part(monkeypatch, "student", student)
    with Runtime(load()) as rt:
        rt.preload("student")
        with pytest.raises(ModelError, match="cannot load"):
            _ = rt.student
    assert student.calls == 2  # the background failure was silent; the use loaded again


def test_preload_leaves_a_part_that_is_loaded_or_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    embedder = FakeLoader(seconds=0.0)
    fake_part(monkeypatch, "embedder", embedder)
    monkeypatch.setattr(Runtime, "detector", property(lambda _self: "a test's own detector"))
    with Runtime(load()) as rt:
        _ = rt.embedder
        rt.preload("embedder", "detector")
        assert rt.detector == "a test's own detector"
    assert embedder.calls == 1


def test_close_waits_for_a_part_still_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    student = FakeLoader(seconds=0.2)
    fake_part(monkeypatch, "student", student)
    rt = Runtime(load())
    rt.preload("student")
    rt.close()
    assert student.calls == 1 and not any(t.is_alive() for t in rt._loaders)
