"""Snapshot tests: each screen as SVG, compared with the accepted one in __snapshots__/.

After a deliberate change to the look of a screen, look at the new pictures and accept
them with ``pytest tests/test_tui_snapshots.py --snapshot-update``.  Everything shown is
made fixed here (config path, timestamps, key source, store contents); textual is pinned
in the dev extra so a new release cannot move a pixel under the tests.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.app import App

from assistant.base import config, secrets
from assistant.net.upload import Upload
from assistant.privacy.detector import Detector
from assistant.privacy.guard import EgressGuard
from assistant.privacy.placeholders import Vault
from assistant.privacy.policy import load_policy
from assistant.privacy.sanitize import sanitize
from assistant.store import Store, ledger
from assistant.tui.app import DragApp
from assistant.tui.review import ReviewModal

SIZE = (120, 34)
Snap = Callable[..., bool]


@pytest.fixture(autouse=True)
def fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAG_CONFIG", "/home/you/.config/drag/config.toml")
    monkeypatch.setattr(secrets, "key_source", lambda: "none")
    clock = (f"2026-11-22T10:{m:02d}:00.000000+00:00" for m in itertools.count())
    monkeypatch.setattr(ledger, "now", lambda: next(clock))


def app() -> DragApp:
    return DragApp(config.load(env=dict(os.environ)), warm=False)


def test_chat_screen(snap_compare: Snap) -> None:
    assert snap_compare(app(), terminal_size=SIZE)


def test_audit_screen(snap_compare: Snap) -> None:
    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as store:
        for i, purpose in enumerate(["evidence", "triples", "evidence"]):
            store.record_upload(
                Upload(
                    "http://127.0.0.1:8080/v1",
                    "local-teacher",
                    purpose,
                    f"{purpose}-v1",
                    b'{"messages": [{"role": "user", "content": "What does <PERSON_1> study? %d"}]}'
                    % i,
                    '{"evidence": ["Glutamine carries nitrogen."]}',
                    redaction={"PERSON": 1},
                )
            )
    assert snap_compare(app(), press=["f2"], terminal_size=SIZE)


def test_bench_screen(snap_compare: Snap) -> None:
    assert snap_compare(app(), press=["f3"], terminal_size=SIZE)


def test_settings_screen(snap_compare: Snap) -> None:
    assert snap_compare(app(), press=["f4"], terminal_size=SIZE)


def test_review_modal(snap_compare: Snap) -> None:
    detector = Detector()
    shown = sanitize(
        "Dr. Amelia Thompson (athompson93@gmail.com) asks: what does glutamine do?",
        scanner=detector,
        vault=Vault(tag_of=load_policy().tag),
        guard=EgressGuard(detector),
    )

    class Host(App[Any]):
        CSS_PATH = str(Path(__file__).parents[1] / "assistant" / "tui" / "app.tcss")

        def on_mount(self) -> None:
            self.push_screen(ReviewModal(shown))

    assert snap_compare(Host(), terminal_size=SIZE)
