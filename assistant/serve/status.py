"""Whether a `drag serve` runs, and what it holds (`drag serve --status`, `drag doctor`)."""

from __future__ import annotations

from typing import Any

from assistant.base import errors
from assistant.net import egress
from assistant.serve import tokens


def server_status(timeout: float = 10.0) -> dict[str, Any] | None:
    """The running server's record and what it holds ({"pid", "url", "loaded"}), or None
    when none answers with this user's token."""
    record = tokens.recorded()
    if record is None:
        return None
    endpoint = egress.Endpoint(
        record["url"], api_key=tokens.tokens()[tokens.DEFAULT], timeout=timeout, max_retries=0
    )
    try:
        egress.send(endpoint, egress.ModelsRequest(), egress.BodylessOnly())
    except errors.DragError:
        return None
    return record


def status_line(status: dict[str, Any] | None) -> str:
    if status is None:
        return "no drag serve is running (drag serve starts one)"
    held = ", ".join(map(str, status["loaded"])) or "no model yet (each loads when first needed)"
    return f"drag serve runs at {status['url']} (pid {status['pid']}); loaded: {held}"
