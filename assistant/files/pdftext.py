"""A PDF's text, read in a child process with a budget of time, memory and characters.

pypdf's text extraction can cost far more than the file's size suggests: pages that
share one compressed content stream make a 36 KB file expand to megabytes of text, and
extraction then grows faster than its text (a run past 240 s at 800 MB).  One page's
extraction cannot be stopped from inside, so :func:`read` runs it in a child Python that
the parent stops at :data:`SECONDS` and that cannot map more than :data:`MEMORY_BYTES`.
The child writes each page as one JSON line as soon as it is read, and stops once the
text passes the character budget; the pages read before a stop are kept.

    python -m assistant.files.pdftext MAX_CHARS MEMORY_BYTES < file.pdf
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

# The most time one PDF's text may take to read, and the memory its reader may map.
SECONDS = 60.0
MEMORY_BYTES = 1 << 30


@dataclass
class Pages:
    """The pages read (number, text), in order, and why reading stopped early ("" when
    it did not)."""

    pages: list[tuple[int, str]] = field(default_factory=list)
    stopped: str = ""
    error: str = ""  # the file cannot be read at all (encrypted, damaged, no pypdf)


def read(data: bytes, max_chars: int, *, seconds: float | None = None) -> Pages:
    """The text of the PDF ``data``, page by page, within the budget."""
    limit = SECONDS if seconds is None else seconds
    here = str(Path(__file__).resolve().parents[2])  # the folder that holds `assistant`
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])),
    }
    command = [sys.executable, "-m", "assistant.files.pdftext", str(max_chars), str(MEMORY_BYTES)]
    timed_out = False
    try:
        done = subprocess.run(
            command, input=data, capture_output=True, timeout=limit, env=env, check=False
        )
        out, err, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:  # the child is stopped: keep what it wrote
        out, err, code, timed_out = exc.output or b"", exc.stderr or b"", -9, True
    pages = Pages()
    for line in out.decode("utf-8", "replace").splitlines():
        try:
            item = json.loads(line)
        except ValueError:  # the last line, cut when the child was stopped
            break
        if "page" in item:
            pages.pages.append((int(item["page"]), str(item["text"])))
        elif "stopped" in item:
            pages.stopped = str(item["stopped"])
        elif "error" in item:
            pages.error = str(item["error"])
    if timed_out:
        pages.stopped = f"reading its text took longer than {limit:g} s"
    elif code != 0 and not pages.error:
        last = err.decode("utf-8", "replace").strip().rpartition("\n")[2]
        kind = re.match(r"[\w.]+(?=:|$)", last)
        pages.stopped = (
            f"reading its text needed more than {MEMORY_BYTES >> 20} MB of memory"
            if b"MemoryError" in err
            else f"its reader stopped (exit {code}" + (f", {kind.group()})" if kind else ")")
        )
    return pages


def _emit(item: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(item, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _child(max_chars: int, memory: int) -> None:
    import io
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    data = sys.stdin.buffer.read()
    try:
        import pypdf
    except ImportError:
        _emit({"error": "reading PDF needs the pypdf package (pip install pypdf)"})
        return
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        # Encrypted with an empty password (only printing or copying restricted):
        # readable; with a password of its own, not.
        if reader.is_encrypted and not reader.decrypt(""):
            _emit({"error": "an encrypted PDF (it needs a password)"})
            return
        pages = reader.pages
        count = len(pages)
    except MemoryError:
        raise
    except Exception as exc:  # pypdf raises many kinds on damaged files
        _emit({"error": f"not a readable PDF ({type(exc).__name__})"})
        return
    total = 0
    for number in range(1, count + 1):
        try:
            text = pages[number - 1].extract_text() or ""
        except MemoryError:
            raise
        except Exception as exc:  # a damaged page: the pages before it are kept
            _emit({"stopped": f"page {number} is not readable ({type(exc).__name__})"})
            return
        total += len(text)
        if total > max_chars:
            keep = max(0, len(text) - (total - max_chars))
            _emit({"page": number, "text": text[:keep]})
            _emit({"stopped": f"its text is longer than {max_chars:,} characters"})
            return
        _emit({"page": number, "text": text})


if __name__ == "__main__":
    _child(int(sys.argv[1]), int(sys.argv[2]))
