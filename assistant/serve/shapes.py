"""OpenAI's JSON shapes, as `drag serve` writes them: a chat completion, its streamed
chunks, the model list and an error."""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

DRAG_MODEL = "drag"


def encode(data: object) -> bytes:
    """JSON as sent to a client: every character outside ASCII escaped, so that no
    control sequence of a reply reaches a terminal that prints the raw body."""
    return json.dumps(data, ensure_ascii=True).encode("ascii")


def new_id() -> str:
    return "chatcmpl-drag-" + secrets.token_hex(12)


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def completion(
    ident: str, model: str, text: str, finish: str | None, tokens: tuple[int, int]
) -> dict[str, Any]:
    return {
        "id": ident,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish or "stop",
            }
        ],
        "usage": usage(*tokens),
    }


def chunk(
    ident: str, model: str, delta: dict[str, str], finish: str | None = None
) -> dict[str, Any]:
    return {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def usage_chunk(ident: str, model: str, tokens: tuple[int, int]) -> dict[str, Any]:
    return {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": usage(*tokens),
    }


def models(names: tuple[str, ...]) -> dict[str, Any]:
    """The models offered: ``drag`` and the configured teacher's (through the privacy
    layer)."""
    return {
        "object": "list",
        "data": [{"id": n, "object": "model", "created": 0, "owned_by": "drag"} for n in names],
    }


def error(message: str, kind: str, code: str, draft: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"message": message, "type": kind, "param": None, "code": code}
    if draft is not None:
        body["draft"] = draft
    return {"error": body}
