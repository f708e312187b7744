"""Find the files under the paths a user names and read each into units of text.

A *unit* is what must not be cut in two: a chat message (with its sender and the
chat's time), a paragraph, an e-mail's header line.  What cannot be read is a
:class:`Skipped` with a one-line reason; nothing stops the rest.

Kinds, by the file's name: ``.txt``/``.text``/``.md``/``.markdown``/``.rst``/``.org``
(plain text; a chat export when most lines read ``Sender: text``, with optional
``Time:`` lines as in LiHuaWorld), ``.eml`` (one e-mail), ``.mbox`` (a mailbox),
``.pdf`` (with the pypdf package, text only, no model).  Inside a folder, names
starting with a dot are not read (``.git``, editor folders); named on their own, they are.
"""

from __future__ import annotations

import email
import email.policy
import email.utils
import html
import os
import re
import stat
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import cast

from assistant.base.errors import one_line
from assistant.base.safetext import name_line
from assistant.files import pdftext

MAX_FILE_BYTES = 20 * 1024 * 1024
# The most text one file gives (a PDF's extracted text can be far larger than its
# bytes); past it the file is cut there, and the index says so.
MAX_TEXT_CHARS = 3_000_000
TEXT_SUFFIXES = frozenset({".txt", ".text", ".md", ".markdown", ".rst", ".org"})
SUFFIXES = TEXT_SUFFIXES | {".eml", ".mbox", ".pdf"}

_TIME_LINE = re.compile(r"^\s*Time:\s*(\S.{0,39}?)\s*$")
_DATED = re.compile(r"\d{6}|\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}")  # a date, not "3pm"
_COMPACT_TIME = re.compile(r"^(\d{4})(\d{2})(\d{2})_(\d{2}):?(\d{2})$")
# "LiHua: text", "Jake Watson: text"; a label in lower case ("note: see below") is not one
_MESSAGE = re.compile(r"^\s*([^\W\d_][\w.'-]{0,30}(?: [^\W\d_][\w.'-]{0,30}){0,3}):\s+(\S.*)$")
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


@dataclass(frozen=True)
class Found:
    path: Path
    size: int
    mtime: float


@dataclass(frozen=True)
class Skipped:
    """A file not indexed, and why."""

    path: Path
    reason: str
    said = "skipped"  # how its line begins

    def line(self) -> str:
        return one_line(f"{self.said} {name_line(self.path)}: {self.reason}", 300)


@dataclass(frozen=True)
class Cut(Skipped):
    """A file indexed in part: the reason is its budget's, or a part that failed."""

    said = "read in part"


@dataclass(frozen=True)
class Unit:
    text: str
    speaker: str = ""
    time: str = ""  # the chat's or the e-mail's time, as written (normalised where known)
    page: int = 0  # a PDF's page, from 1


@dataclass(frozen=True)
class Document:
    path: Path
    kind: str  # "text" | "chat" | "email" | "pdf"
    units: tuple[Unit, ...]
    # Why the file was read only in part (its budget, a damaged message or page); the
    # index says so in one line.  "" when it was read whole.
    cut: str = ""


class Unreadable(Exception):
    """A file that cannot be read; the message is the reason."""


def walk(paths: Iterable[Path]) -> Iterator[Found | Skipped]:
    """Every readable file under ``paths`` once, in name order; the rest as Skipped."""
    seen_dirs: dict[tuple[int, int], bool] = {}  # each folder read, and whether named
    seen_files: dict[Path, Path] = {}  # each file read, and the name it was read under
    for given in paths:
        top = Path(given)  # as given: a shell expands "~", and "./~notes" is a file's name
        try:
            root = top.resolve()  # where a link inside may point: under the named folder
        except (OSError, RuntimeError):
            root = top
        # A stack, not recursion: a tree a thousand folders deep is walked like any other.
        stack: list[tuple[Path, bool]] = [(top, True)]
        while stack:
            path, named = stack.pop()
            children = yield from _walk_one(path, seen_dirs, seen_files, named=named, root=root)
            stack += [(Path(c), False) for c in reversed(children)]


def _walked_to(real: Path, root: Path) -> bool:
    """Whether the walk of ``root`` reads the file ``real`` (inside it) by its own name:
    no hidden folder or name on the way, a name in UTF-8, a kind of file drag reads."""
    inside = real.relative_to(root).parts
    try:
        str(real).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return real.suffix.lower() in SUFFIXES and not any(p.startswith(".") for p in inside)


def _walk_one(
    path: Path,
    seen_dirs: dict[tuple[int, int], bool],
    seen_files: dict[Path, Path],
    *,
    named: bool,
    root: Path,
) -> Generator[Found | Skipped, None, list[str]]:
    """``path``'s own outcome, if it has one; returns a folder's entries to walk next.
    A link inside a named folder that leads out of it is not followed: the file would be
    indexed under the link's name, and ``--forget`` by its real path would not find it."""
    if not named and path.name.startswith("."):
        return []
    try:
        info = path.stat()  # follows links
    except FileNotFoundError:
        reason = "a broken link" if path.is_symlink() else "no such file or folder"
        yield Skipped(path, reason)
        return []
    except OSError as exc:
        yield Skipped(path, f"cannot read it: {exc.strerror or exc}")
        return []
    if stat.S_ISDIR(info.st_mode):
        if not named and path.is_symlink():
            yield Skipped(path, "a link to a folder (name the folder itself to index it)")
            return []
        ident = (info.st_dev, info.st_ino)
        if ident in seen_dirs:
            # A folder named twice, or named and inside another named one (either
            # order): read once, without a word.  Reached again otherwise: a loop.
            if not named and not seen_dirs[ident]:
                yield Skipped(path, "a link back to a folder already read (a loop)")
            return []
        seen_dirs[ident] = named
        try:
            children = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError as exc:
            yield Skipped(path, f"cannot read the folder: {exc.strerror or exc}")
            return []
        return [child.path for child in children]
    if not stat.S_ISREG(info.st_mode):
        yield Skipped(path, "not a regular file")
        return []
    real = path.resolve()
    if not named and not real.is_relative_to(root):
        yield Skipped(
            path, "a link to a file outside the folder you named (name the file to index it)"
        )
        return []
    if real in seen_files and absolute(path) == absolute(seen_files[real]):
        return []  # the name already read, given again (a folder and a file in it)
    if not named and path.is_symlink() and _walked_to(real, root):
        # Read once, as the file itself, under its own name, whichever comes first; said,
        # so that what an earlier run indexed under the link's name is forgotten.
        yield Skipped(path, f"a link to {real.relative_to(root)}, read under its own name")
        return []
    if real in seen_files:  # another name of it said: what was read under it is forgotten
        yield Skipped(path, f"the same file as {seen_files[real]}, read under that name")
        return []
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        yield Skipped(path, "a file name that is not UTF-8")
        return []
    if path.suffix.lower() not in SUFFIXES:
        yield Skipped(path, f"not a kind of file drag reads ({path.suffix or 'no suffix'})")
        return []
    if info.st_size > MAX_FILE_BYTES:
        yield Skipped(path, too_large())
        return []
    seen_files[real] = path  # read: a link to it reached later is not read again
    yield Found(absolute(path), info.st_size, info.st_mtime)
    return []


def absolute(path: Path) -> Path:
    """``path`` from the root with ``..`` and ``.`` worked out as written, links kept (the
    one name a file is indexed under, wherever ``drag index`` ran from); as it is when
    ``..`` follows a link, where the written form would name another file."""
    path = path.absolute()  # no "~": a file's own name may start with it ("~$report.docx")
    plain = Path(os.path.normpath(path))
    if plain == path:
        return path
    try:
        return plain if path.samefile(plain) else path
    except OSError:  # not there (a file to forget): the form it was indexed under
        return plain


def too_large() -> str:
    mib = 1024 * 1024
    if mib <= MAX_FILE_BYTES:
        return f"larger than {MAX_FILE_BYTES // mib} MB"
    return f"larger than {MAX_FILE_BYTES} bytes"


def read_bytes(path: Path) -> bytes:
    """The file's bytes; one that is no regular file now (a pipe put in its place since
    the folder was walked) is not read: opening a pipe would wait for a writer."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise Unreadable("not a regular file")
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise Unreadable(f"cannot read it: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise Unreadable(too_large())
    return data


def decode_text(data: bytes) -> str:
    """UTF-8 text (a BOM dropped), or UTF-16 that says so with its BOM (Windows tools
    write it); anything else is Unreadable.  NUL anywhere makes it a binary file."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise Unreadable(f"not UTF-16 text (a bad byte at offset {exc.start})") from None
        if "\x00" in text:
            raise Unreadable("a binary file (it holds NUL characters)")
        return text
    if b"\x00" in data:
        raise Unreadable("a binary file (it holds NUL bytes)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"not UTF-8 text (a bad byte at offset {exc.start})") from None


def read(path: Path, data: bytes | None = None) -> Document:
    """The file at ``path`` as units (``data``: its bytes, when already read), at most
    :data:`MAX_TEXT_CHARS` of text."""
    document = _read(path, read_bytes(path) if data is None else data)
    units, total = [], 0
    for unit in document.units:
        total += len(unit.text)
        if total > MAX_TEXT_CHARS:
            keep = len(unit.text) - (total - MAX_TEXT_CHARS)
            units.append(Unit(unit.text[:keep], unit.speaker, unit.time, unit.page))
            why = f"its text is longer than {MAX_TEXT_CHARS:,} characters"
            return Document(path, document.kind, tuple(units), why)
        units.append(unit)
    return document


def _read(path: Path, raw: bytes) -> Document:
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        return _pdf(path, raw)
    if suffix == ".eml":
        return Document(path, "email", tuple(_email_units(_mail(raw))))
    if suffix == ".mbox":
        return _mbox(path, raw)
    text = decode_text(raw)
    chat = chat_units(text)
    if chat is not None:
        return Document(path, "chat", tuple(chat))
    return Document(path, "text", tuple(paragraphs(text)))


def chat_time(raw: str) -> str:
    """``20260105_11:00`` as ``2026-01-05 11:00``; any other form as written."""
    m = _COMPACT_TIME.match(raw.strip())
    if m is None:
        return one_line(raw, 40)
    year, month, day, hour, minute = m.groups()
    return f"{year}-{month}-{day} {hour}:{minute}"


# Labels of notes, mail and documents ("Note: …", "Attendees: …", "Action: …"): never a
# chat's sender (a sender's name is learnt as a person's).
LABELS = frozenset(
    """action actions address agenda answer attendees author bcc cc comment comments
    context date decision decisions description details email error example fyi how
    important info input location minutes name next note notes output phone ps question
    reason re reply response result results source status step steps subject summary
    time tip title to todo topic update url warning what when where who why""".split()  # noqa: SIM905
)


def chat_units(text: str) -> list[Unit] | None:
    """The messages of a chat export, or None when ``text`` does not read as one: with
    a dated ``Time:`` line, no ``Sender: text`` line; without one, fewer than two, or
    under 60 % of its lines (a message's second line counts against it).  A label
    (:data:`LABELS`) is no sender; lines before the first message are kept as text of
    their own (an export's title, a note above the chat)."""
    messages: list[tuple[str, str, list[str]]] = []  # (sender, time, lines)
    before: list[str] = []  # lines before the first message
    time, other, stamped = "", 0, False
    for line in text.splitlines():
        if not line.strip():
            continue
        stamp = _TIME_LINE.match(line)
        if stamp and _DATED.search(stamp.group(1)):
            time, stamped = chat_time(stamp.group(1)), True
            continue
        m = _MESSAGE.match(line)
        if m and not m.group(1).islower() and m.group(1).casefold() not in LABELS:
            messages.append((m.group(1), time, [m.group(2).strip()]))
            continue
        other += 1
        if messages:  # a message going on over a second line
            messages[-1][2].append(line.strip())
        else:
            before.append(line.strip())
    if len(messages) < (1 if stamped else 2):
        return None
    if not stamped and len(messages) < 0.6 * (len(messages) + other):
        return None
    lead = [Unit("\n".join(before))] if before else []
    return lead + [Unit("\n".join(lines), sender, when) for sender, when, lines in messages]


def paragraphs(text: str, *, speaker: str = "", time: str = "", page: int = 0) -> list[Unit]:
    return [
        Unit(p.strip(), speaker, time, page)
        for p in _PARAGRAPH_BREAK.split(text.replace("\r\n", "\n"))
        if p.strip()
    ]


_BREAKS = {"p": "\n\n", "div": "\n\n", "li": "\n\n", "tr": "\n\n", "br": "\n"}
_BREAKS.update({f"h{n}": "\n\n" for n in range(1, 7)})
_TAG_NAME = re.compile(r"/?\s*([A-Za-z][A-Za-z0-9]*)")
_SKIPPED_END = {
    name: re.compile(rf"</\s*{name}\s*>", re.IGNORECASE) for name in ("script", "style")
}


def _html_text(markup: str) -> str:
    """The text of an HTML body, in one pass: tags dropped (a line break for a block),
    comments, scripts and styles left out, character references decoded.  Python's
    ``html.parser`` takes quadratic time on some malformed input (60 KB of ``<a `` took
    30 s), so it is not used: every search here moves forward, and one that finds
    nothing ends the text."""
    out: list[str] = []
    i, n = 0, len(markup)
    while i < n:
        start = markup.find("<", i)
        if start < 0:
            out.append(markup[i:])
            break
        out.append(markup[i:start])
        after = markup[start + 1 : start + 2]
        if not (after.isalpha() or after in ("/", "!", "?")):  # "1 < 2": not a tag
            out.append("<")
            i = start + 1
            continue
        if markup.startswith("<!--", start):  # an unclosed comment runs to the end
            close = markup.find("-->", start + 4)
            i = n if close < 0 else close + 3
            continue
        close = markup.find(">", start + 1)
        if close < 0:  # a "<" that opens no tag: text
            out.append(markup[start:])
            break
        inside = markup[start + 1 : close]
        named = _TAG_NAME.match(inside)
        name = named.group(1).lower() if named else ""
        i = close + 1
        if name in _SKIPPED_END and not inside.startswith("/"):
            ended = _SKIPPED_END[name].search(markup, i)
            i = n if ended is None else ended.end()
        elif name in _BREAKS and not (inside.startswith("/") and name == "br"):
            out.append(_BREAKS[name])
    text = "".join(out)
    try:
        return html.unescape(text)
    except ValueError:  # a character reference of thousands of digits: left as written
        return text


def _mail_time(raw: str) -> str:
    """An e-mail's Date as ``2026-03-03 10:00`` (its own zone); any other form as written."""
    try:
        return email.utils.parsedate_to_datetime(raw).strftime("%Y-%m-%d %H:%M")
    except (TypeError, ValueError, IndexError, OverflowError):  # (a zone of 20 digits)
        return one_line(raw, 60)


def _header(message: EmailMessage, name: str) -> str:
    """A header's value; as written where the parser fails on it ("From: marta@" raises
    IndexError): one bad header never loses the e-mail."""
    try:
        return str(message.get(name, "") or "")
    except Exception:
        return next((str(v) for k, v in message.raw_items() if k.lower() == name.lower()), "")


# The longest header value read (From, Subject, Content-Type …).  Python's header
# parser takes memory quadratic in a value's encoded words: a From of 8,000 of them
# (112 KB) took 0.9 GB, and a 3 MB one ended the process.  Real ones are far shorter.
MAX_HEADER_CHARS = 4000


class _CappedHeaders(email.policy.EmailPolicy):
    """The standard policy, with each header's value cut at :data:`MAX_HEADER_CHARS`
    before anything parses it."""

    def header_source_parse(self, sourcelines: list[str]) -> tuple[str, str]:
        name, value = super().header_source_parse(sourcelines)
        if len(value) > MAX_HEADER_CHARS:  # at a comma or a space: whole addresses
            cut = value[:MAX_HEADER_CHARS]
            value = cut[: max(cut.rfind(","), cut.rfind(" "), MAX_HEADER_CHARS // 2)]
        return name, value


_MAIL_POLICY: email.policy.EmailPolicy[EmailMessage] = cast(
    "email.policy.EmailPolicy[EmailMessage]", _CappedHeaders()
)


def _email_units(message: EmailMessage) -> list[Unit]:
    sender = one_line(_header(message, "From"), 120)
    when = _mail_time(_header(message, "Date"))
    subject = one_line(_header(message, "Subject"), 200)
    units = [Unit(f"E-mail from {sender}" + (f": {subject}" if subject else ""), sender, when)]
    body = message.get_body(preferencelist=("plain", "html"))
    if body is not None:
        try:
            content = body.get_content()
        except (LookupError, ValueError, AssertionError):  # an unknown or damaged charset
            raw = body.get_payload(decode=True)  # read as UTF-8, what it cannot read marked
            content = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else ""
        if isinstance(content, str):
            if body.get_content_subtype() == "html":
                content = _html_text(content)
            units += paragraphs(content, speaker=sender, time=when)
    return units


# Python's e-mail parser builds every part of a message before anything is read (an
# e-mail of 2.8 million empty parts took 171 s and 1.5 GB): a message of more parts than
# this is not read, and a mailbox is read for at most so many messages.
MAX_MAIL_PARTS = 2_000
MAX_MAILBOX_MESSAGES = 10_000


_BOUNDARY = re.compile(rb'(?i)\bboundary\s*=\s*"?([^"\r\n;]{1,200})')


def _parts(raw: bytes) -> int:
    """How many part boundaries the message holds (up to one past the budget): its lines
    "--B" or "--B--" for a boundary B its headers declare (a line that only starts with
    "--", a diff's or a signature's, is none)."""
    declared = {b.rstrip(b'" \t') for b in _BOUNDARY.findall(raw)}
    if len(declared) > MAX_MAIL_PARTS:
        return len(declared)
    count = 0
    for line in re.finditer(rb"(?m)^--([^\r\n]*)", raw):
        token = line.group(1).rstrip(b" \t")
        if token in declared or (token.endswith(b"--") and token[:-2] in declared):
            count += 1
            if count > MAX_MAIL_PARTS:
                break
    return count


def _mail(raw: bytes) -> EmailMessage:
    """One message, within :data:`MAX_MAIL_PARTS` (its boundaries counted first)."""
    if _parts(raw) > MAX_MAIL_PARTS:
        raise Unreadable(f"an e-mail of more than {MAX_MAIL_PARTS:,} parts")
    return email.message_from_bytes(raw, policy=_MAIL_POLICY)


def _mbox(path: Path, raw: bytes) -> Document:
    """A mailbox's messages (each after its "From " line, as mbox writes them), from the
    bytes read; any error in one message (a damaged charset, a thousand nested parts that
    exceed Python's recursion limit, too many parts) leaves out that message only.  Read
    until :data:`MAX_TEXT_CHARS` of text or :data:`MAX_MAILBOX_MESSAGES` messages."""
    starts = [m.start() for m in re.finditer(rb"(?m)^From ", raw)]
    units: list[Unit] = []
    left_out = read = chars = 0
    cut = ""
    for i, start in enumerate(starts):
        if chars > MAX_TEXT_CHARS or read == MAX_MAILBOX_MESSAGES:
            cut = f"only its first {read:,} messages were read"
            break
        end = starts[i + 1] if i + 1 < len(starts) else len(raw)
        line_end = raw.find(b"\n", start, end)
        body = raw[line_end + 1 : end] if line_end >= 0 else b""
        read += 1
        try:
            got = _email_units(_mail(body))
        except Exception:  # one message, whatever its fault
            left_out += 1
            continue
        units += got
        chars += sum(len(u.text) for u in got)
    if left_out:
        why = f"{left_out} message(s) in it could not be read and were left out"
        cut = f"{cut}; {why}" if cut else why
    return Document(path, "email", tuple(units), cut)


def _pdf(path: Path, data: bytes) -> Document:
    """Its text page by page, read in a child process within a budget of time, memory
    and characters (:mod:`assistant.files.pdftext`); the pages read before a stop are
    kept, and the stop is said."""
    read = pdftext.read(data, MAX_TEXT_CHARS)
    if read.error:
        raise Unreadable(read.error)
    if read.stopped and not any(text.strip() for _n, text in read.pages):
        raise Unreadable(read.stopped)
    units: list[Unit] = []
    for number, text in read.pages:
        units += paragraphs(text, page=number)
    return Document(path, "pdf", tuple(units), read.stopped)
