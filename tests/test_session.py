"""Session.preload: parts load side by side, once, and a failure there is the caller's.

The parts here are fakes (a slow loader that counts its calls): what is tested is the
loading logic, not a model."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from assistant.base.config import load
from assistant.base.errors import ModelError
from assistant.core import session
from assistant.core.session import Session


class FakePart:
    closed = 0

    def close(self) -> None:
        FakePart.closed += 1


class FakeLoader:
    """Loads a fake part, counting calls and threads; fails while ``fail`` is set.  A
    load first calls ``wait`` (a barrier's: loads that ran one after the other never
    meet, and the barrier's timeout fails them; or an event's)."""

    def __init__(self, wait: Callable[[], object] | None = None) -> None:
        self.wait = wait
        self.calls = 0
        self.threads: list[str] = []
        self.fail = False

    def __call__(self, _rt: Session) -> object:
        self.calls += 1
        self.threads.append(threading.current_thread().name)
        if self.wait is not None:
            self.wait()
        if self.fail:
            raise ModelError("the fake part cannot load")
        return FakePart()


def fake_part(monkeypatch: pytest.MonkeyPatch, name: str, loader: FakeLoader) -> None:
    part: session._Part[FakePart] = session._Part(loader)
    part.__set_name__(Session, name)
    monkeypatch.setattr(Session, name, part)


def test_preloaded_parts_load_side_by_side_and_once(monkeypatch: pytest.MonkeyPatch) -> None:
    together = threading.Barrier(2, timeout=30)  # each load waits for the other
    student, embedder = FakeLoader(together.wait), FakeLoader(together.wait)
    fake_part(monkeypatch, "student", student)
    fake_part(monkeypatch, "embedder", embedder)
    with Session(load()) as rt:
        rt.preload("student", "embedder")
        first = rt.student  # waits for the load under way instead of starting another
        assert rt.embedder is rt.embedder
        assert rt.student is first
    assert not together.broken  # the two loads were under way at the same time
    assert student.calls == embedder.calls == 1
    assert student.threads == ["drag-load-student"] and embedder.threads == ["drag-load-embedder"]


def test_a_part_that_fails_to_preload_fails_for_its_user(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    student = FakeLoader()
    student.fail = True
    fake_part(monkeypatch, "student", student)
    with Session(load()) as rt:
        rt.preload("student")
        with pytest.raises(ModelError, match="cannot load"):
            _ = rt.student
    assert student.calls == 2  # the background failure was silent; the use loaded again


def test_preload_leaves_a_part_that_is_loaded_or_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    embedder = FakeLoader()
    fake_part(monkeypatch, "embedder", embedder)
    reads: list[str] = []
    # A part a test replaced (not a loaded part of the Session): preload leaves it alone.
    monkeypatch.setattr(Session, "detector", property(lambda _self: reads.append("read")))
    with Session(load()) as rt:
        _ = rt.embedder
        rt.preload("embedder", "detector")
        started = list(rt._loaders)
    assert started == [] and reads == []  # no thread, and the replacement never read
    assert embedder.calls == 1


def test_close_waits_for_a_part_still_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = threading.Event()
    student = FakeLoader(lambda: gate.wait(timeout=30))
    fake_part(monkeypatch, "student", student)
    rt = Session(load())
    rt.preload("student")
    (loader,) = rt._loaders
    real_join = loader.join

    def join(timeout: float | None = None) -> None:
        gate.set()  # the load ends only once close waits for it
        real_join(timeout)

    loader.join = join  # type: ignore[method-assign]
    closed = FakePart.closed
    rt.close()
    assert student.calls == 1 and not loader.is_alive()
    assert FakePart.closed == closed + 1  # the part that was loading was closed too


def test_a_conversation_deleted_meanwhile_goes_on_as_a_new_one() -> None:
    """`drag chat` resumes its conversation before each turn worked here; one deleted
    from another window must not leave questions pointing at it."""
    with Session(load()) as rt:
        kept = rt.store.new_conversation(title="kept")
        rt.store.save_vault(kept, rt.vault.dump())
        rt.resume(kept)
        assert rt.conversation_id == kept
        rt.store.delete_conversation(kept)
        rt.resume(kept)
        assert rt.conversation_id is None
