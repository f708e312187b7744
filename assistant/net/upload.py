"""What one request that left the machine was: the record the teacher makes of what
egress.send reports, and the upload ledger keeps."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Upload:
    """One request that left the machine (what egress.send reports)."""

    endpoint: str
    model: str
    purpose: str
    prompt_version: str
    request: bytes  # the exact body written to the socket
    reply: str | None  # the raw reply text; None when the request failed
    status: str = "ok"  # "ok" | "error"
    error: str | None = None
    redaction: Mapping[str, int] = field(default_factory=dict)  # types and counts only
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    attempts: int = 1
