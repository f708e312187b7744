"""The question as the teacher may see it: detect -> placeholders -> student rewrite.

1. The detector finds personal data; each value becomes a placeholder from
   the session's vault (``<PERSON_1>``).
2. The local student rewrites the placeholder version to drop personal
   context the answer does not need (paper §3.3).  It never sees the values.
   Small models still invent or copy things back, so the rewrite is kept only
   when the egress guard passes it, it adds no placeholder and keeps every
   answer option; otherwise the placeholder version is used.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from assistant.base.errors import DragError, GuardBlocked, Interrupted, PrivacyError
from assistant.privacy.addressed import addressed
from assistant.privacy.findings import Finding, Scanner
from assistant.privacy.generalise import Generaliser, annotate
from assistant.privacy.guard import EgressGuard, Outgoing, unreplaced
from assistant.privacy.placeholders import (
    COMMON_WORDS,
    PLACEHOLDER,
    Redacted,
    Replacement,
    Vault,
)
from assistant.privacy.reader import RECOGNIZER, Reading, union
from assistant.privacy.values import recheck

REWRITE_SYSTEM = (
    "You rewrite a question before it is sent to an outside expert.\n"
    "Rules:\n"
    "1. Keep everything needed to answer it: the topic, the facts, the numbers and every "
    "answer option, word for word.\n"
    "2. Remove details about the person asking or about other people that the answer does "
    "not need: who they are, contact details, addresses, accounts, dates, employers, stories.\n"
    "3. Text in angle brackets such as <PERSON_1> stands for private data. Keep such a "
    "placeholder only if the question is about it. Never write a real name or value instead.\n"
    "4. Reply with the rewritten question only."
)
_OPTION_LINE = re.compile(r"^\s*\(?[A-Z1-9][.)]\s+\S.*$", re.MULTILINE)
_WORD = re.compile(r"[^\W\d_]{3,}")
# How much of the question a rewrite must keep, and how much it may add.
MIN_KEPT = 0.6
MAX_NEW = 0.34


def content_words(text: str) -> set[str]:
    return {
        w
        for w in (m.group(0).casefold() for m in _WORD.finditer(PLACEHOLDER.sub(" ", text)))
        if w not in COMMON_WORDS
    }


def question_part(text: str) -> str:
    """The sentences that ask (with '?'), or the last sentence: what a rewrite must keep."""
    sentences = re.split(r"(?<=[.!?])\s+|\n", text)
    asking = [s for s in sentences if "?" in s]
    return " ".join(asking) if asking else (sentences[-1] if sentences else text)


def drift(candidate: str, original: str) -> str:
    """Why ``candidate`` is not a faithful rewrite of ``original`` ("" when it is)."""
    kept_from = content_words(question_part(original))
    said = content_words(candidate)
    if kept_from and len(kept_from & said) / len(kept_from) < MIN_KEPT:
        return "the rewrite lost the question"
    if said and len(said - content_words(original)) / len(said) > MAX_NEW:
        return "the rewrite added words the question did not have"
    return ""


def rewrite_line(used: bool, note: str) -> str:
    """The review's line on the student's rewrite of the question, in a user's words."""
    if used:
        return "the student's shorter wording of your question is sent"
    return f"your question is sent as written, placeholders in place ({note})" if note else ""


Rewriter = Callable[[str, str], str]  # (system, text) -> rewritten text


@dataclass(frozen=True)
class Sanitized:
    original: str
    text: str  # what the teacher will see
    placeholder_text: str
    findings: tuple[Finding, ...]
    redacted: Redacted
    rewrite: str | None = None  # the student's rewrite, when one was made
    rewrite_used: bool = False
    rewrite_note: str = ""  # why a rewrite was not used
    stages: dict[str, float] = field(default_factory=dict)
    # Values the user chose, at review, to send as they are.  They are in the text that
    # was sent, and so in what keeps that text: the ledger's request, the cache's
    # question, the question's record (README: the cache holds nothing personal but
    # these); the list of them is not stored or logged.
    kept: tuple[Replacement, ...] = ()
    # Placeholder -> the coarser value sent after it ("a city in Norway"): our words,
    # checked by the guard for protected values like the rest.
    hints: dict[str, str] = field(default_factory=dict)
    # Entity -> its category's mode in the detector's policy (strict | contextual), shown
    # at review.
    modes: dict[str, str] = field(default_factory=dict)
    # The scripts of the runs in the text as sent that nothing here could read (a script
    # the detector does not know, and the local reader off): reviewed, or not sent.
    unread: tuple[str, ...] = ()
    # The local reader was on but stopped before the end (a loop, its token limit): the
    # rest of the question, in any script, went unread.  Reviewed, or not sent.
    reader_stopped: bool = False
    # Words of the question that speak to the privacy reader (addressed.addressed: "the
    # names are made up", a JSON reply in its schema): its reading lifts nothing, so the
    # question is reviewed, or not sent.
    addressed: str = ""

    @property
    def unread_line(self) -> str:
        """What the review says of :attr:`unread` ("" when nothing went unread)."""
        if not self.unread:
            return ""
        scripts = " and ".join(sorted(set(self.unread)))
        why = (
            "the local reader stopped before the end of it"
            if self.reader_stopped
            else "privacy.reader is off"
        )
        return f"not checked: text in {scripts} script, which the detector cannot read, and {why}"

    @property
    def unchecked(self) -> tuple[str, ...]:
        """Why the checks here cannot vouch for the question: each a line for the review,
        and for the refusal when there is no review (empty when they can)."""
        lines = [self.unread_line] if self.unread else []
        if self.reader_stopped:
            lines.append(
                "not checked: the local reader stopped before the end of the question, "
                "so what came after was not read"
            )
        if self.addressed:
            lines.append(
                f"not trusted: the question speaks to the privacy reader "
                f"({self.addressed}), so its reading lifts nothing"
            )
        return tuple(lines)

    @property
    def counts(self) -> dict[str, int]:
        return self.redacted.counts

    @property
    def released(self) -> tuple[str, ...]:
        """The values the guard lets through for this question: the user's choice."""
        return tuple(r.value for r in self.kept)

    @property
    def read_values(self) -> frozenset[str]:
        """The values the local model's reading added (privacy.reader), as replaced."""
        return frozenset(f.text for f in self.findings if RECOGNIZER in f.recognizer)

    def summary(self) -> dict[str, object]:
        """Entity types and counts and what was done -- never the values."""
        kept: dict[str, int] = {}
        for r in self.kept:
            kept[r.entity] = kept.get(r.entity, 0) + 1
        return {
            "entities": self.counts,
            **({"read_by_model": len(self.read_values)} if "read" in self.stages else {}),
            "rewrite_used": self.rewrite_used,
            "rewrite_note": self.rewrite_note,
            "generalised": len(self.hints),
            **({"kept_by_user": kept} if kept else {}),
        }

    def keeping(self, values: Iterable[str]) -> Sanitized:
        """This question with some detected values sent as they are (the user's choice at
        review: a famous name the question is about, a false detection).  Only values
        that were detected in it can be kept; the rest stay placeholders."""
        wanted = set(values)
        base = (*self.redacted.replacements, *self.kept)
        keep = tuple(r for r in base if r.value in wanted)
        text = self.text
        for r in self.kept:  # back to the placeholder first, then release afresh
            if r not in keep:
                text = text.replace(r.value, r.placeholder)
        for r in keep:
            text = text.replace(r.placeholder, r.value)
        remaining = tuple(r for r in base if r not in keep)
        return replace(
            self,
            text=text,
            redacted=Redacted(self.redacted.text, remaining),
            kept=keep,
        )


def _rewrite_problem(
    candidate: str,
    placeholder_text: str,
    guard: EgressGuard,
    vault: Vault,
    hints: tuple[str, ...] = (),
) -> str:
    if not candidate.strip():
        return "the rewrite was empty"
    if len(candidate) > 2 * len(placeholder_text) + 40:
        return "the rewrite was longer than the question"
    allowed = set(PLACEHOLDER.findall(placeholder_text))
    if not set(PLACEHOLDER.findall(candidate)) <= allowed:
        return "the rewrite made up a placeholder"
    for option in _OPTION_LINE.findall(placeholder_text):
        if " ".join(option.split()) not in " ".join(candidate.split()):
            return "the rewrite dropped an answer option"
    try:
        guard.check(Outgoing((candidate,), "", tuple(vault.values()), public=hints))
    except GuardBlocked as exc:
        return f"the rewrite failed the egress guard ({exc})"
    return drift(candidate, placeholder_text)


# Looks at the described text, as the guard will read it, after the first two.
MORE_LOOKS = 2


def _find(find: Callable[[str], list[Finding]], text: str) -> list[Finding]:
    """The detector's findings; any failure of it stops the question (fail closed)."""
    try:
        return list(find(text))
    except Exception as exc:  # a question we cannot check is not sent
        raise PrivacyError(
            f"the personal-data detector failed ({type(exc).__name__}: {exc}); nothing was sent"
        ) from None


def sanitize(
    question: str,
    *,
    scanner: Scanner,
    vault: Vault,
    guard: EgressGuard,
    rewriter: Rewriter | None = None,
    rewrite: str = "on-detection",
    generaliser: Generaliser | None = None,
    read: Reading | None = None,
) -> Sanitized:
    """Detect, replace, describe (a coarser value after a placeholder, where the policy
    gives one) and (optionally) rewrite ``question``.

    ``read``: the local model's reading of ``question`` (:mod:`assistant.privacy.reader`),
    whose values are replaced too (the union with the detector's)."""
    stages: dict[str, float] = {}
    started = time.perf_counter()
    findings = tuple(_find(scanner.find, question))
    stages["detect"] = time.perf_counter() - started
    if read is not None:
        common = getattr(scanner, "common", None) or (lambda _word: False)
        added = recheck(read.findings, common)
        judge = getattr(scanner, "in_context", None)
        if judge is not None:  # the policy's modes: an organisation in a plain question stays
            kept = judge(question, list(findings) + added)
            added = [f for f in kept if f.recognizer == RECOGNIZER]
        findings = tuple(union(question, findings, added, getattr(scanner, "common", None)))
        stages["read"] = read.seconds
    redacted = vault.redact(question, findings)
    # Placeholders change the context: look once more, as the guard will.
    more = _find(functools.partial(unreplaced, scanner), redacted.text)
    if more:
        again = vault.redact(redacted.text, more)
        findings += tuple(more)
        redacted = Redacted(again.text, redacted.replacements + again.replacements)
    hints = generaliser.hints(redacted.replacements, vault.values()) if generaliser else {}
    described = annotate(redacted.text, hints)
    # The guard reads the text as sent, with the descriptions taken out: a name it finds
    # there would stop the question.  Replace such names now instead, as long as each
    # occurs whole in the text (what does not stays for the guard: fail closed).
    for _ in range(MORE_LOOKS):
        found = _find(
            functools.partial(unreplaced, scanner, public=tuple(hints.values())), described
        )
        extra = [(f.entity, f.text) for f in found]
        again = vault.redact_values(redacted.text, extra)
        if not again.replacements:
            break
        redacted = Redacted(again.text, redacted.replacements + again.replacements)
        hints = generaliser.hints(redacted.replacements, vault.values()) if generaliser else {}
        described = annotate(redacted.text, hints)
    policy = getattr(scanner, "policy", None)
    modes = {r.entity: policy.mode(r.entity) for r in redacted.replacements} if policy else {}
    spoken = addressed(question) if read is not None else ""
    result = Sanitized(
        original=question,
        text=described,
        placeholder_text=described,
        findings=findings,
        redacted=redacted,
        stages=stages,
        hints=hints,
        modes=modes,
        unread=_unread(scanner, described, read, spoken),
        reader_stopped=read is not None and not read.complete,
        addressed=spoken,
    )
    wanted = rewrite == "always" or (rewrite == "on-detection" and findings)
    if rewriter is None or not wanted:
        return result
    started = time.perf_counter()
    try:
        reply = rewriter(REWRITE_SYSTEM, described)
    except Interrupted:  # the app closed: nothing more is done
        raise
    except DragError as exc:  # no rewrite: the placeholder version still protects
        reply, failure = "", f"the rewrite failed ({exc})"
    else:
        failure = ""
    # The first paragraph: small models like to add a note after the rewrite.
    candidate = reply.strip().strip('"').split("\n\n")[0].strip()
    stages["rewrite"] = time.perf_counter() - started
    problem = failure or _rewrite_problem(candidate, described, guard, vault, tuple(hints.values()))
    return replace(
        result,
        text=described if problem else candidate,
        rewrite=candidate,
        rewrite_used=not problem,
        rewrite_note=problem,
        unread=result.unread if problem else _unread(scanner, candidate, read, spoken),
    )


def _unread(scanner: Scanner, text: str, read: Reading | None, spoken: str = "") -> tuple[str, ...]:
    """The scripts of the runs of ``text`` nothing read: none when the local model read
    the whole question (it reads every script) and nothing in it spoke to the model,
    else what the detector cannot read (a reading the model stopped early left the rest
    unread; one beside words addressed to it proves nothing)."""
    unreadable = getattr(scanner, "unreadable", None)
    if (read is not None and read.complete and not spoken) or unreadable is None:
        return ()
    return tuple(unreadable(text))
