"""A PDF's text, read in a child process with a budget of time, memory and characters.

pypdf's text extraction can cost far more than the file's size suggests: pages that
share one compressed content stream make a 36 KB file expand to megabytes of text, and
extraction then grows faster than its text (a run past 240 s at 800 MB).  One page's
extraction cannot be stopped from inside, so :func:`read` runs it in a child Python that
the parent stops at :data:`SECONDS` and that cannot map more than :data:`MEMORY_BYTES`.
The child writes each page as one JSON line as soon as it is read, and stops once the
text passes the character budget; the pages read before a stop are kept.

    python -P -c "…; from assistant.files.pdftext import _main; _main()" MAX_CHARS MEMORY_BYTES
"""

from __future__ import annotations

import json
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
    # -P: the folder drag runs in is not on the child's path (a json.py or pypdf.py
    # there must not run); this package's folder goes last, after the standard library
    # and site-packages, for a drag run from its source tree.
    here = str(Path(__file__).resolve().parents[2])
    start = (
        f"import sys; sys.path.append({here!r}); from assistant.files.pdftext import _main; _main()"
    )
    command = [sys.executable, "-P", "-c", start, str(max_chars), str(MEMORY_BYTES)]
    timed_out = False
    try:
        done = subprocess.run(
            command, input=data, capture_output=True, timeout=limit, cwd=here, check=False
        )
        out, err, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:  # the child is stopped: keep what it wrote
        out, err, code, timed_out = exc.output or b"", exc.stderr or b"", -9, True
    pages = parse(out)
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


def parse(out: bytes) -> Pages:
    """What the child wrote: one JSON line an item (in ASCII, so that no character of a
    page's text breaks a line); a last line cut when the child was stopped is left."""
    pages = Pages()
    for line in out.split(b"\n"):
        try:
            item = json.loads(line)
        except ValueError:
            break
        if "page" in item:
            pages.pages.append((int(item["page"]), str(item["text"])))
        elif "stopped" in item:
            pages.stopped = str(item["stopped"])
        elif "error" in item:
            pages.error = str(item["error"])
    return pages


def _emit(item: dict[str, object]) -> None:
    """One JSON line in ASCII (a line separator in a page's text stays escaped)."""
    sys.stdout.write(json.dumps(item) + "\n")
    sys.stdout.flush()


def _child(max_chars: int, memory: int) -> None:
    import io
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    import logging
    import warnings

    # pypdf's notes on a damaged file would fill the parent's buffer: errors only.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
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
            # A character pypdf decoded to a lone surrogate is not text: replaced.
            raw = pages[number - 1].extract_text() or ""
            text = raw.encode("utf-8", "replace").decode("utf-8")
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


def _main() -> None:
    _child(int(sys.argv[1]), int(sys.argv[2]))
