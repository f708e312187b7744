"""The egress guard: the last check before any byte goes to the teacher.

It reads the message texts out of the exact request body and fails the
request -- nothing is sent -- when

* any value detected in the user's original text occurs in it: exactly,
  case-folded, whitespace-normalised, or in part (a surname alone, an e-mail's
  local part, the digits of a phone, card or account number, a username
  without its @);
* the detector, run again over the outgoing text, finds personal data that is
  not a placeholder.

Two kinds of text in a request are not the user's, and the request says which:
our own prompt templates (their literal parts are removed before both checks)
and statements the teacher itself wrote (removed before detection only, so a
protected value is refused even inside them).
* the detector raises, or takes longer than its time limit.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
import string
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from assistant.base.errors import GuardBlocked
from assistant.base.safetext import link_spans, merged_spans
from assistant.base.textform import ascii_digits, bounded, dates_in, digit_runs, normalise
from assistant.net import egress
from assistant.privacy.findings import Finding, Scanner
from assistant.privacy.placeholders import (
    DATE_TYPES,
    DIGIT_TYPES,
    as_written,
    outside_placeholders,
    parts,
    written_only,
)

_MIN_PART = 3


@dataclass(frozen=True)
class Outgoing:
    """What one request carries, as the guard must judge it."""

    texts: tuple[str, ...]  # message contents read back from the exact body
    rest: str  # everything else in the body (model name, schema): checked for protected values
    protected: tuple[tuple[str, str], ...]  # (entity, value) that must never leave
    templates: tuple[str, ...] = ()  # our prompt format strings: their literal parts are ours
    public: tuple[str, ...] = ()  # the teacher's own words
    released: tuple[str, ...] = ()  # values the user chose at review to send as they are


_MIN_FRAGMENT = 8


def template_fragments(templates: Sequence[str]) -> list[str]:
    """The literal pieces of format strings (``"Question: {question}"`` -> ``"Question: "``);
    doubled braces are literal text (a JSON example in a prompt), not fields."""
    pieces = []
    for template in templates:
        literal = ""
        for text, field_name, _, _ in string.Formatter().parse(template):
            literal += text
            if field_name is not None:
                pieces.append(literal)
                literal = ""
        pieces.append(literal)
    kept = {p for p in pieces if len(p.strip()) >= _MIN_FRAGMENT}
    return sorted(kept, key=lambda p: (-len(p), p))  # the same order in every run


def without(text: str, pieces: Sequence[str]) -> str:
    for piece in pieces:
        text = text.replace(piece, "\n")
    return text


def unreplaced(scanner: Scanner, text: str, public: Sequence[str] = ()) -> list[Finding]:
    """What the guard's re-check finds in ``text`` as it reads it: the ``public`` pieces
    (the teacher's words, our descriptions, released values) taken out, placeholders not
    counted.  sanitize asks the same, with its own scanner, before the guard does."""
    seen = without(text, sorted(public, key=len, reverse=True))
    return outside_placeholders(seen, scanner.find(seen))


def read_body(body: bytes) -> tuple[tuple[str, ...], str]:
    """(message contents, the rest of the body as text) of a chat-completion body."""
    if not body:
        return (), ""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise GuardBlocked(
            f"the outgoing request body is not JSON ({exc}); nothing was sent"
        ) from None
    out = []
    for message in data.get("messages", []) if isinstance(data, dict) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):  # content parts
            out += [p.get("text", "") for p in content if isinstance(p, dict)]
    rest = {k: v for k, v in data.items() if k != "messages"} if isinstance(data, dict) else data
    return tuple(out), "\n".join(_values(rest))


def _values(data: object) -> Iterator[str]:
    """The values in ``data`` (a JSON document), not its keys: the names of the request's
    fields ("model", "type") are ours and carry nothing of the user's."""
    if isinstance(data, dict):
        for value in data.values():
            yield from _values(value)
    elif isinstance(data, list):
        for value in data:
            yield from _values(value)
    elif data is not None:
        yield str(data)


# Letters written one by one with a space, dot, dash, underscore or star between them
# ("W o l f g a n g", "W.o.l.f.g.a.n.g"): four letters at least.
# The same separator throughout, so that two spaced words stay two ("W.o.l.f
# S-c-h-u-l-z"); after a sign, a space may follow ("W. o. l. f").
_SPACED = re.compile(
    r"(?<![^\W_])[^\W_](?:( )|([.\-_*·]) ?)(?:[^\W_](?:\1|\2 ?)){2,}[^\W_](?![^\W_])"
)
_SPACERS = re.compile(r"[ .\-_*·]")
# "name dot surname at example dot com", "(at)", "[dot]".
_SPELLED = re.compile(r"[ \t]?[(\[{<]?\b(dot|at)\b[)\]}>]?[ \t]?", re.IGNORECASE)


def _percent(text: str) -> str:
    from urllib.parse import unquote

    for _ in range(3):  # encoded up to three times over
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    return text


def _entities(text: str) -> str:
    import html

    for _ in range(3):
        decoded = html.unescape(text)
        if decoded == text:
            break
        text = decoded
    return text


def _spelled(text: str) -> str:
    return _SPELLED.sub(lambda m: "." if m.group(1).lower() == "dot" else "@", text)


# The encodings undone before a text is judged, each named for the refusal; the last
# form is all of them in turn (a value percent-encoded and spaced).
_DECODINGS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("percent-encoded", _percent),
    ("as HTML character references", _entities),
    ("in another script's digits", ascii_digits),
    ("as letters spaced apart", lambda t: _SPACED.sub(lambda m: _SPACERS.sub("", m.group()), t)),
    ("with 'dot' and 'at' written out", _spelled),
)


def decoded_forms(text: str) -> list[tuple[str, str]]:
    """(how, ``text`` with that encoding undone) for each encoding it holds: what the
    guard judges besides the text itself.  Not undone, and so not recognised: base64,
    reversed text, a translation or a nickname."""
    forms: list[tuple[str, str]] = []
    for how, decode in _DECODINGS:
        once = decode(text)
        if once != text:
            forms.append((how, once))
    combined = decoded_all(text)
    if combined != text and all(combined != form for _how, form in forms):
        forms.append(("encoded", combined))
    return forms


def decoded_all(text: str) -> str:
    """``text`` with every encoding of :func:`decoded_forms` undone, in turn, again while
    that changes it (one encoding inside another: "&#37;35" is "%35" is "5")."""
    for _ in range(3):
        before = text
        for _how, decode in _DECODINGS:
            text = decode(text)
        if text == before:
            break
    return text


def spaced_runs(text: str) -> list[str]:
    """The letters of each run of letters spaced apart in ``text``, joined: a full name
    spaced with one separator throughout ("W o l f g a n g S c h u l z") has no space
    left between its words, so it is compared letters to letters."""
    return [_SPACERS.sub("", m.group()) for m in _SPACED.finditer(text)]


def _alnum(flat: str) -> str:
    """Normalised text with everything but ASCII letters and digits dropped."""
    return re.sub(r"[^0-9a-z]", "", flat)


def _a(entity: str) -> str:
    return f"{'an' if entity[:1] in 'AEIOU' else 'a'} {entity}"


Distinctive = Callable[[str], bool]


def value_form(
    entity: str,
    value: str,
    text: str,
    flat: str,
    distinctive: Distinctive | None = None,
    *,
    whole: bool = False,
) -> str | None:
    """How ``value`` shows in ``text`` (``flat`` = ``normalise(text)``), or None;
    ``whole``: only the value as a whole, in any form (not a part of it).

    Every comparison is made in the normal form (:mod:`textform`): case, composed or
    decomposed accents, invisible characters and line breaks do not hide a value."""
    if not value.strip():
        return None
    if re.search(bounded(value), text):
        return "exact"
    norm = normalise(value)
    if norm and re.search(bounded(norm), flat):
        return "normalised"
    if entity in DIGIT_TYPES:
        digits = re.sub(r"\D", "", norm)
        if len(digits) >= 6 and any(digits in run for run in digit_runs(flat)):
            return "digits"
        squashed = _alnum(norm)
        if len(squashed) >= 8 and squashed.isalnum() and squashed in _alnum(flat):
            return "characters"
    if entity in DATE_TYPES and (dates_in(value) & dates_in(flat)):
        return "date in another format"
    if whole:
        return None
    for part in parts(entity, value):
        if written_only(entity, part):  # May, Will, Name, Epic: only as a name is written
            if re.search(as_written(part), text):
                return f"part {part!r}"
        elif re.search(bounded(normalise(part)), flat):
            return f"part {part!r}"
    if entity == "ORGANIZATION" and distinctive is not None:
        for word in re.findall(r"[^\W\d_]{4,}", value):
            if distinctive(word) and re.search(bounded(normalise(word)), flat):
                return f"part {word!r}"
    if entity == "EMAIL_ADDRESS" and "@" in value:
        local = normalise(value.split("@", 1)[0])
        if len(local) >= _MIN_PART and re.search(rf"(?<![\w.]){re.escape(local)}(?![\w])", flat):
            return "local part"
    if entity == "USERNAME":
        bare = normalise(value.lstrip("@"))
        if len(bare) >= _MIN_PART and re.search(rf"(?<!\w){re.escape(bare)}(?!\w)", flat):
            return "name without @"
    return None


class EgressGuard:
    def __init__(self, scanner: Scanner, *, timeout: float = 10.0) -> None:
        self.scanner = scanner
        self.timeout = timeout
        # Words of an organisation's name that identify it alone ("Nordlys", not "Biotech").
        self._distinctive: Distinctive | None = getattr(scanner, "distinctive", None)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="guard"
        )

    def _judge(self, out: Outgoing) -> None:
        ours = template_fragments(out.templates)
        users = [without(t, ours) for t in out.texts]
        released = {normalise(v) for v in out.released}
        protected = [(e, v) for e, v in out.protected if normalise(v) not in released]
        # The messages in every form; the other fields' values (our settings and schema,
        # whose words such as "object" or "string" are no part of a name) as whole values.
        judged = [(form, False, what) for t in users for what, form in [("", t), *decoded_forms(t)]]
        for text, whole, what in (*judged, (out.rest, True, "")):
            flat = normalise(text)
            for entity, value in protected:
                how = value_form(entity, value, text, flat, self._distinctive, whole=whole)
                if how:
                    # Which form, never the value: an error line is copied into bug
                    # reports and shown in --json (value_form names the part it found).
                    said = "a part of it" if how.startswith("part ") else how
                    said = f"{what}, {said}" if what else said
                    raise GuardBlocked(
                        f"the outgoing request still holds {_a(entity)} from your question "
                        f"({said}); nothing was sent"
                    )
        runs = [
            _alnum(normalise(r))
            for t in users
            for form in {t, ascii_digits(_entities(_percent(t)))}
            for r in spaced_runs(form)
        ]
        for entity, value in protected:
            letters = _alnum(normalise(value))
            if len(letters) >= 6 and any(letters in run for run in runs):
                raise GuardBlocked(
                    f"the outgoing request still holds {_a(entity)} from your question "
                    "(as letters spaced apart); nothing was sent"
                )
        found = [
            f.entity
            for t in users
            for f in unreplaced(self.scanner, t, (*out.public, *out.released))
        ]
        if found:
            raise GuardBlocked(
                f"the outgoing request holds personal data ({', '.join(sorted(set(found)))}) "
                "that was not replaced; nothing was sent"
            )

    def check(self, out: Outgoing) -> None:
        """Return if ``out`` may be sent; raise GuardBlocked otherwise (fail closed)."""
        future = self._pool.submit(self._judge, out)
        try:
            future.result(timeout=self.timeout)
        except GuardBlocked:
            raise
        except concurrent.futures.TimeoutError:
            raise GuardBlocked(
                f"the privacy check took longer than {self.timeout:g} s "
                "(privacy.guard_timeout); nothing was sent"
            ) from None
        except Exception as exc:  # any failure of the check itself: do not send
            raise GuardBlocked(
                f"the privacy check failed ({type(exc).__name__}: {exc}); nothing was sent"
            ) from None

    def check_body(self, body: bytes, request: egress.ChatRequest | egress.ModelsRequest) -> None:
        """The egress.Guard protocol: judge the exact bytes of one request."""
        texts, rest = read_body(body)
        self.check(
            Outgoing(
                texts,
                rest,
                tuple(getattr(request, "protected", ())),
                tuple(getattr(request, "templates", ())),
                tuple(getattr(request, "public", ())),
                tuple(getattr(request, "released", ())),
            )
        )

    def check_headers(
        self, headers: dict[str, str], request: egress.ChatRequest | egress.ModelsRequest
    ) -> None:
        """The egress.Guard protocol: the request's headers (already cut to egress.HEADERS)
        hold no protected value either."""
        allowed = egress.HEADERS - {"authorization"}
        extra = sorted(set(headers) - allowed)
        if extra:
            raise GuardBlocked(f"the request carries headers {extra} not allowed; nothing was sent")
        self.check(
            Outgoing(
                (),
                "\n".join(f"{k}: {v}" for k, v in sorted(headers.items())),
                tuple(getattr(request, "protected", ())),
                released=tuple(getattr(request, "released", ())),
            )
        )


# A link is the other way out: the student reads the question with its real values and
# the teacher's evidence, and a hostile teacher may ask it to write a link that carries
# them (issue 30, item 8).  A click would send them, so such a link is never shown live.
WITHHELD = "[link withheld: it carried {what} from {source}]"


def carried(
    target: str, protected: Sequence[tuple[str, str]], distinctive: Distinctive | None = None
) -> str | None:
    """The entity of a protected value that link target ``target`` carries, as written
    or percent- or plus-encoded (up to three times over), or None.  ``distinctive``: as
    for :func:`leak` (a word of an organisation's name that identifies it)."""
    from urllib.parse import unquote_plus

    forms = [target]
    for _ in range(3):
        decoded = unquote_plus(forms[-1])
        if decoded == forms[-1]:
            break
        forms.append(decoded)
    own = {v.casefold() for e, v in protected if e == "URL"}
    if target.rstrip(".,;:!?)'\"").casefold() in own:
        return None  # a link the user wrote, going where the user said
    for entity, value in protected:
        if any(value_form(entity, value, form, normalise(form), distinctive) for form in forms):
            return entity
    return None


def withhold_links(
    text: str,
    protected: Sequence[tuple[str, str]],
    distinctive: Distinctive | None = None,
    source: str = "your question",
) -> str:
    """``text`` with every link target (a URL, a Markdown link's destination, an OSC 8
    hyperlink: :func:`safetext.link_spans`) that carries a protected value replaced by
    a note that says so (and where the value came from: ``source``).  Other links are
    left as they are."""
    if not protected or not text:
        return text
    out, cursor = [], 0
    for start, end in merged_spans(link_spans(text)):
        what = carried(text[start:end], protected, distinctive)
        if what is not None:
            out += [text[cursor:start], WITHHELD.format(what=_a(what), source=source)]
            cursor = end
    return "".join(out) + text[cursor:] if out else text


# A line that may yet be a reference definition ("[ref]: target"): held whole.
_REFERENCE_START = re.compile(r"[ \t]*\[(?:[^\]\n]*$|[^\]\n]+\]:)")


def _before_links(line: str, cut: int) -> int:
    """``cut``, or the start of a link target that reaches it (or may still grow)."""
    for start, end in merged_spans(link_spans(line)):
        if start < cut and (cut < end or end == len(line)):
            return start
    return cut


def _link_cut(line: str, line_start: bool = True) -> int:
    """How much of ``line`` (the text so far; ``line_start``: it begins its line) can go
    on: up to its last white space, less any link that is still open there (a Markdown
    ``](`` until its ``)``, a reference definition until the end of its line)."""
    if line_start and _REFERENCE_START.match(line):
        return 0
    cut = max(line.rfind(" "), line.rfind("\t")) + 1
    opened = line.rfind("](")
    if opened >= 0:
        after = line[opened + 2 :].lstrip(" \t")
        # Open until its ")"; a <…> destination (which may hold ")" and spaces) until
        # its ">" and then a ")".
        if after.startswith("<"):
            closed = after.find(">")
            still_open = closed < 0 or ")" not in after[closed:]
        else:
            still_open = ")" not in after
        if still_open:
            cut = min(cut, opened)
    return _before_links(line, cut)


class LinkHold:
    """:func:`withhold_links` for text that arrives in pieces (the student's stream).  A
    piece goes on once no link target that could still grow reaches into it: text up to
    the last white space of its line, less any link that is still open there (a run of
    text is never split; a Markdown ``](`` waits for its ``)``, a reference definition
    for the end of its line).  Link targets never span lines, so a line break sends
    the line whole.  :meth:`flush` sends the rest."""

    def __init__(
        self,
        emit: Callable[[str], None],
        protected: Callable[[], Sequence[tuple[str, str]]],
        distinctive: Distinctive | None = None,
        source: str = "your question",
    ) -> None:
        self._emit = emit
        self._protected = protected
        self._distinctive = distinctive
        self._source = source
        self._line = ""  # the current line, from its start
        self._shown = 0  # how much of it (as withheld) has gone out

    def _send(self, line: str, cut: int) -> None:
        out = withhold_links(line[:cut], self._protected(), self._distinctive, self._source)
        if len(out) > self._shown:
            self._emit(out[self._shown :])
            self._shown = len(out)

    @staticmethod
    def _cut(line: str) -> int:
        return _link_cut(line)

    def __call__(self, piece: str) -> None:
        self._line += piece
        if "\n" in piece:  # each line whole (one split: many line breaks stay linear)
            *lines, self._line = self._line.split("\n")
            for line in lines:
                self._send(line + "\n", len(line) + 1)
                self._shown = 0
        self._send(self._line, self._cut(self._line))

    def flush(self) -> None:
        self._send(self._line, len(self._line))
        self._line, self._shown = "", 0


# A placeholder written with spaces ("< PERSON_1 >", "&lt; person 1 &gt;") that may be
# cut open at white space; only the last few words are looked at (placeholders are short).
_OPEN_PLACEHOLDER = re.compile(r"(?:<|&lt;|\[|\{|\()\s*(?:[A-Za-z_]+[ _-]?\d*\s*)?\Z")
_PLACEHOLDER_REACH = 64


class RestoreHold:
    """The teacher's reply with its placeholders put back (``restore``:
    :meth:`Vault.restore`) as it streams.  As :class:`LinkHold`, text goes on once no link
    target that could still grow reaches into it (no value is put back inside one), and
    no placeholder that could either: a run of text is never split, and one written with
    spaces ("< PERSON_1 >") waits for its close.  What is held never grows past
    :attr:`HELD` characters: past it, the rest of the line goes on as written, its
    placeholders left as they are (a link target could have begun there).  Each piece
    costs at most what is held and the piece: a reply of many pieces is read in linear
    time."""

    HELD = 256

    def __init__(self, emit: Callable[[str], None], restore: Callable[[str], str]) -> None:
        self._emit = emit
        self._restore = restore
        self._held = ""  # what has not gone out yet; it starts where nothing is open
        self._line_start = True  # whether it starts its line
        self._as_written = False  # till the end of the line

    def _out(self, text: str) -> None:
        if text:
            self._emit(text if self._as_written else self._restore(text))

    def _cut(self) -> int:
        held = self._held
        cut = _link_cut(held, self._line_start)
        opened = _OPEN_PLACEHOLDER.search(held, max(0, cut - _PLACEHOLDER_REACH), cut)
        return cut if opened is None else _before_links(held, opened.start())

    def __call__(self, piece: str) -> None:
        self._held += piece
        if "\n" in piece:  # each line whole (one split: many line breaks stay linear)
            *lines, self._held = self._held.split("\n")
            for line in lines:
                self._out(line + "\n")
                self._as_written, self._line_start = False, True
        if self._as_written:
            self._out(self._held)
            self._held = ""
            return
        cut = self._cut()
        if cut:
            self._out(self._held[:cut])
            self._held, self._line_start = self._held[cut:], False
        if len(self._held) > self.HELD:
            self._as_written = True
            self._out(self._held)
            self._held, self._line_start = "", False

    def flush(self) -> None:
        self._out(self._held)
        self._held, self._line_start, self._as_written = "", True, False
