"""Robust readers for what a teacher model writes.

Teachers are asked for JSON (and constrained to it where the server supports
a schema), but small or remote models still wrap it in prose, fence it in
Markdown, stop half-way, or answer with a numbered list.  These functions take
whatever came back and return only items that are really in it: they never
raise on bad input and never invent an item.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Iterator
from typing import Any

from assistant.base.errors import TeacherError

# Every reader here takes time linear in the reply (a teacher's reply is read up to 2 MB):
# no pattern whose failure at one place is retried over the same text from the next.
_FLAT_OBJECT = re.compile(r"\{[^{}\[\]]*\}")
# A list item: a marker ("1." "(2)" "3:" "-" "•" "## 4."), white space, then the rest of
# the line (stripped after: no pattern of the form \s+(.*\S)\s*$, which backtracks).
_LIST_LINE = re.compile(
    r"^[ \t]*(?:\(?\d{1,3}[.):]|[-*•●▪‣]|#{1,3}[ \t]*\d{1,3}[.):]?)[ \t]+(\S[^\n]*)", re.M
)
_SENTENCE = re.compile(r"[^.!?]+(?:[.!?]+|$)")
_ITEM_KEYS = ("text", "evidence", "statement", "fact", "content", "sentence")


def clean_item(text: str) -> str:
    """Strip whitespace, wrapping quotes and trailing separators from one item."""
    item = " ".join(text.split())
    for _ in range(2):
        item = item.strip().strip("\"“”'`").strip()
        item = item.rstrip(",;").strip()
    return item


def dedupe(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = item.casefold()
        if item and key not in seen:
            seen.add(key)
            out.append(item)
    return out


def in_time(deadline: float | None, text: str) -> None:
    """Raise when ``deadline`` (a ``time.monotonic()``: teacher.timeout from when the
    reply arrived, :attr:`egress.ChatReply.deadline`) has passed.  The readers ask
    between their steps, each linear in the reply, so the timeout bounds reading a
    reply as well as receiving it."""
    if deadline is not None and time.monotonic() > deadline:
        raise TeacherError(
            "the teacher's reply could not be read within teacher.timeout; nothing from it "
            "was used (raise teacher.timeout, or use another teacher)",
            reply=text,
        )


# A list longer than this is read no further (a hostile reply of a million items costs a
# second of work; a teacher is asked for tens).
MAX_ITEMS = 10_000

# How many '{' or '[' a reply's JSON is looked for at: each try may read to the end of the
# reply, so trying every one would make a reply of brackets cost its length squared.
MAX_JSON_STARTS = 32


def _json_candidates(text: str) -> Iterator[Any]:
    """JSON objects or arrays that decode starting at one of the first '{' or '['."""
    decoder = json.JSONDecoder()
    for n, match in enumerate(re.finditer(r"[\[{]", text)):
        if n >= MAX_JSON_STARTS:
            return
        try:
            value, _end = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            continue
        yield value


_FENCE_START = re.compile(r"^```[\w-]*\s*")


def whole_json(text: str) -> Any | None:
    """The reply as JSON when it is nothing but JSON (optionally in a code fence)."""
    stripped = text.strip()
    if len(stripped) >= 6 and stripped.startswith("```") and stripped.endswith("```"):
        stripped = _FENCE_START.sub("", stripped[:-3])
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict | list) else None


def find_json(text: str) -> Any | None:
    """The first (outermost) JSON object or array in ``text``, or None."""
    value = whole_json(text)
    if value is not None:
        return value
    for value in _json_candidates(text):
        if isinstance(value, dict | list):
            return value
    return None


def _strings_in(value: Any, keys: tuple[str, ...]) -> list[str] | None:
    """The list of strings a JSON reply holds, looking through common shapes."""
    if isinstance(value, list):
        out = []
        for element in value:
            if isinstance(element, str):
                out.append(element)
            elif isinstance(element, dict):
                for key in (*keys, *_ITEM_KEYS):
                    if isinstance(element.get(key), str):
                        out.append(element[key])
                        break
        return out
    if isinstance(value, dict):
        for key in keys:
            if key in value:
                return _strings_in(value[key], keys)
        for inner in value.values():
            if isinstance(inner, list):
                return _strings_in(inner, keys)
    return None


def _decode_json_string(body: str) -> str | None:
    try:
        decoded = json.loads('"' + body + '"')
    except ValueError:
        return None
    return decoded if isinstance(decoded, str) else None


# A double-quoted string up to its closing quote, a line break, a lone backslash or the
# end (one match each: a string that breaks is not read again from a later quote), and
# after a closing quote, what may follow a *value*: white space then , ] } or the end.
_STRING = re.compile(r'"([^"\\\n]*(?:\\[^\n][^"\\\n]*)*)(?:"(\s*(?:[,\]}]|\Z))?)?')


def salvage_strings(text: str, keys: tuple[str, ...]) -> list[str]:
    """Complete string values of a truncated JSON list (``{"evidence": ["a", "b", "c…``):
    strings followed by what may follow a value, not a key."""
    start = text.find("[")
    if start < 0:
        return []
    out = []
    for match in _STRING.finditer(text, start):
        if match.group(2) is None:
            continue  # a key, or a string that broke off
        body = match.group(1)
        decoded = _decode_json_string(body) if "\\" in body else body
        if decoded is not None and decoded not in keys:
            out.append(decoded)
            if len(out) >= MAX_ITEMS:
                break
    return out


def salvage_objects(text: str) -> list[dict[str, Any]]:
    """Complete flat JSON objects inside a truncated reply."""
    out = []
    for match in _FLAT_OBJECT.finditer(text):
        try:
            value = json.loads(match.group(0))
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _list_lines(text: str) -> list[str]:
    return [m.group(1).strip() for m in _LIST_LINE.finditer(text)]


def parse_list(
    text: str,
    *,
    keys: tuple[str, ...] = (),
    limit: int | None = None,
    deadline: float | None = None,
) -> list[str]:
    """Items of a list the teacher wrote, in its order.

    Tries, in turn: JSON (anywhere in the text), a truncated JSON list,
    ``$$$`` separators (the reference implementation's format), numbered or
    bulleted lines, plain lines, and finally sentences; past ``deadline`` (see
    :func:`in_time`) it raises instead of trying the next.
    """
    if not isinstance(text, str) or not text.strip():
        return []
    whole = whole_json(text)
    if whole is not None:  # a pure-JSON reply is authoritative, even when empty
        return _finish(_strings_in(whole, keys) or [], limit)
    items: list[str] | None = None
    in_time(deadline, text)
    value = find_json(text)
    if value is not None:
        items = _strings_in(value, keys)
    if not items and '"' in text and "[" in text:
        in_time(deadline, text)
        items = salvage_strings(text, keys) or None
    if not items and _FENCE_START.sub("", text.lstrip())[:1] in ("{", "["):
        return []  # JSON that broke off before its first item: reading it as prose would invent
    if not items and "$$$" in text:
        items = text.split("$$$")
    if not items:
        in_time(deadline, text)
        items = _list_lines(text) or None
    if not items:
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.rstrip().endswith(":")]
        items = lines if len(lines) > 1 else None
    if not items:
        in_time(deadline, text)
        items = [m.group(0) for m in _SENTENCE.finditer(text)]
    in_time(deadline, text)
    return _finish(items or [], limit)


def _finish(items: list[str], limit: int | None) -> list[str]:
    cleaned = dedupe(clean_item(i) for i in items[:MAX_ITEMS] if isinstance(i, str))
    cleaned = [i for i in cleaned if any(ch.isalnum() for ch in i)]
    return cleaned[:limit] if limit is not None else cleaned


def parse_objects(
    text: str, *, list_keys: tuple[str, ...] = (), deadline: float | None = None
) -> list[dict[str, Any]]:
    """JSON objects of a list the teacher wrote (whole, embedded or truncated); past
    ``deadline`` it raises (:func:`in_time`)."""
    if not isinstance(text, str) or not text.strip():
        return []
    value = find_json(text)
    in_time(deadline, text)
    if isinstance(value, dict):
        for key in list_keys:
            if isinstance(value.get(key), list):
                value = value[key]
                break
        else:
            lists = [v for v in value.values() if isinstance(v, list)]
            value = lists[0] if lists else [value]
    if isinstance(value, list):
        objects = [v for v in value if isinstance(v, dict)]
        if objects:
            return objects
    objects = salvage_objects(text)
    in_time(deadline, text)
    return objects
