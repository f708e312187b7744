"""A fixed prompt head read once, its llama.cpp state kept on disk (issues 48, 51).

The privacy reader's prompt starts with the same ~700 tokens every time (its rules and
examples): read afresh, they cost about 4 s on 2 cores before the question's first
token, in every new ``drag`` process; the files answer's, with its 88 (about 1 s).
llama.cpp reuses the head within one process (llama-cpp-python keeps what it read and
reads a prompt only from where it differs); across processes this module keeps the
context's state after the head in the cache folder, and loads it (milliseconds)
instead of reading the head again.

The file holds only what the head made (the prompt's own text, never a question): it is
written right after the head is read into a context emptied first (a model that has
answered a question holds its tokens until then).  It is keyed on the model
file, the llama.cpp binding, the offload, flash attention and the head's tokens; a file
that does not match, is cut short or does not load is read afresh and replaced.  Nothing
here can lift a protection: a head that is not kept is read as before.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from assistant.base import paths

MAGIC = b"drag-prefix-state 1\n"


def _key(
    model: Path, tokens: list[int], gpu_layers: int, n_ctx: int, flash_attn: bool = False
) -> str:
    import llama_cpp

    st = model.stat()
    about = [str(model.resolve()), st.st_size, st.st_mtime_ns, llama_cpp.__version__]
    about += [gpu_layers, n_ctx, tokens]
    if flash_attn:  # its cache is laid out otherwise (llama.cpp's values not transposed)
        about.append("flash_attn")
    return hashlib.sha256(json.dumps(about).encode("utf-8")).hexdigest()


def state_file(folder: Path, model: Path, key: str, tag: str = "") -> Path:
    """One file per model and head (``tag``, letters and digits: "" the privacy
    reader's, "files" the files answer's): a new head of that tag (another prompt
    version) replaces the old one."""
    if not (tag == "" or (tag.isascii() and tag.isalnum())):
        raise ValueError(f"a head's tag is letters and digits, not {tag!r}")
    named = hashlib.sha256(str(model.resolve()).encode("utf-8")).hexdigest()[:12]
    return folder / f"{named}-{tag + '-' if tag else ''}{key[:16]}.state"


def _owner(path: Path) -> tuple[str, str]:
    """A state file's model and tag (``MODEL-KEY`` or ``MODEL-TAG-KEY``)."""
    named, _, rest = path.stem.partition("-")
    tag, _, _key = rest.rpartition("-")
    return named, tag


def _same_head(path: Path) -> list[Path]:
    """The state files of ``path``'s model and tag (of any key)."""
    owner = _owner(path)
    return [p for p in path.parent.glob(f"{owner[0]}-*.state") if _owner(p) == owner]


def _load(llm: Any, path: Path, key: str, tokens: list[int]) -> bool:
    import llama_cpp

    try:
        data = path.read_bytes()
    except OSError:
        return False
    if not data.startswith(MAGIC):
        return False
    head, _, body = data[len(MAGIC) :].partition(b"\n")
    try:
        meta = json.loads(head)
    except ValueError:
        return False
    if not isinstance(meta, dict):
        return False
    if meta.get("key") != key or meta.get("sha256") != hashlib.sha256(body).hexdigest():
        return False
    size = len(body)
    buf = (ctypes.c_uint8 * size).from_buffer_copy(body)
    if llama_cpp.llama_state_set_data(llm._ctx.ctx, buf, size) != size:
        llm.reset()
        return False
    n = len(tokens)
    llm.input_ids[:n] = tokens
    llm.n_tokens = n
    return True


def _empty(llm: Any) -> None:
    """Clear the context's memory (``llm.reset()`` only forgets how much of it is read)."""
    import llama_cpp

    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llm._ctx.ctx), True)


def _save(llm: Any, path: Path, key: str) -> None:
    import llama_cpp

    size = llama_cpp.llama_state_get_size(llm._ctx.ctx)
    buf = (ctypes.c_uint8 * size)()
    n = int(llama_cpp.llama_state_get_data(llm._ctx.ctx, buf, size))
    body = bytes(buf[:n])
    meta = json.dumps({"key": key, "sha256": hashlib.sha256(body).hexdigest()})
    for old in _same_head(path):
        old.unlink(missing_ok=True)
    part = path.with_suffix(f".part{os.getpid()}")
    try:
        paths.write_private(part, MAGIC + meta.encode("utf-8") + b"\n" + body)
        part.replace(path)
    finally:
        part.unlink(missing_ok=True)  # left only when the write or the rename failed


def keep(
    llm: Any,
    model: Path,
    tokens: list[int],
    *,
    gpu_layers: int,
    n_ctx: int,
    folder: Path | None,
    tag: str = "",
    flash_attn: bool = False,
) -> str:
    """Have ``llm`` hold ``tokens`` read: "held" where it holds them already (what it
    read last starts with them: nothing is done), from ``folder``'s state file when it
    has the right one ("loaded"), else read now ("read") and, with a folder, kept there
    ("saved").  A folder that cannot be written is no error: the head is read as before."""
    n = len(tokens)
    if llm.n_tokens >= n and llm.input_ids[:n].tolist() == tokens:
        return "held"
    key = _key(model, tokens, gpu_layers, n_ctx, flash_attn)
    path = state_file(folder, model, key, tag) if folder is not None else None
    llm.reset()
    if path is not None and _load(llm, path, key, tokens):
        return "loaded"
    _empty(llm)  # what the model read before (a question) is in no state written here
    llm.eval(tokens)
    if path is None:
        return "read"
    try:
        _save(llm, path, key)
    except OSError:
        return "read"
    return "saved"
