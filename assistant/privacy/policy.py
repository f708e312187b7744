"""The privacy policy: every rule of the detector, read from ``policy.yaml``.

Each entity's placeholder tag and threshold, the recognizers switched on and off, the
context words, the categories' modes (strict | contextual | off), and the settings of
each of the detector's own rules (:mod:`assistant.privacy.recognizers`)."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from assistant.base.errors import ConfigError, PrivacyError, one_line
from assistant.privacy.recognizers import (
    ContactBlockRule,
    CuedNameRule,
    ForeignRunRule,
    FormFieldRule,
    GivenNameRule,
    LowercaseRule,
    NameListRule,
    PronounRule,
    RareWordRule,
    ShortSurnameRule,
    SpeakerRule,
    ValuePartRule,
    VocativeRule,
)

POLICY_FILE = Path(__file__).with_name("policy.yaml")
# A file path: a backslash between two names, a drive, or a /, ~/ or ./ opening a word
# ("C:\\Users\\mhartley\\Documents"); not "Pfizer/BioNTech".
PATH = re.compile(r"\w\\\w|^[A-Za-z]:[\\/]|(?:^|\s)(?:~|\.{1,2})?/\w")


# A capitalised name with a number glued to its end ("Enter8000", "Studio54"): a name,
# which drop_digits keeps, unlike a code ("ab213966") or a number beside a name.
# (Written from PUPA-TNB's seen half.)
GLUED_NAME_WORD = r"[A-Z][a-z]{2,}\d+"
GLUED_NAME = re.compile(rf"(?<![\w]){GLUED_NAME_WORD}(?![\w])")

# A piece of a recognizer's regex written once in policy.yaml's ``fragments``.
FRAGMENT = re.compile(r"\{\{([^{}]*)\}\}")


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
        if self.drop_paths and PATH.search(text):
            return False
        return not (self.drop_digits and any(ch.isdigit() for ch in GLUED_NAME.sub("", text)))


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
    # Entities whose public values (assistant/privacy/public.py) are replaced only when
    # a tie phrase stands right before them, even in a text about its writer.
    public: tuple[str, ...] = ()
    work_ties: tuple[str, ...] = ()  # tie phrases of the user's own work
    work_words: tuple[str, ...] = ()  # in a public one's sentence: the writer's work


@dataclass(frozen=True)
class PublicSiteRule:
    """A bare domain whose name the word vectors know ("github.com", "nature.com") is a
    public site the question is about, not replaced, unless the writer says it is theirs
    just before it ("my blog is", ``own``).  A domain of a coined name ("lebal.paris"),
    one with a path or a subdomain stays a URL.  (The issue's own example, issue 29.)"""

    own: tuple[str, ...] = ()  # what the writer says before a site of their own
    nouns: tuple[str, ...] = ()  # "my <noun> is <domain>"


# A bare domain: a name and a top-level domain, nothing else ("www." and a scheme aside).
BARE_DOMAIN = re.compile(r"(?i)^(?:https?://)?(?:www\.)?([a-z][a-z0-9-]+)\.[a-z]{2,6}/?$")


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
            raise ConfigError(
                f"privacy.categories: {item!r} is not ENTITY=MODE (e.g. LOCATION=strict)"
            )
        modes[entity.strip().upper()] = mode.strip().lower()
    return modes


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
    own_recognizers: tuple[str, ...] = ()  # assistant.privacy.engine.OWN
    context: ContextRule = ContextRule()
    file_names: FileNameRule = FileNameRule()
    contact_block: ContactBlockRule = dataclasses.field(default_factory=ContactBlockRule)
    lowercase: LowercaseRule = dataclasses.field(default_factory=LowercaseRule)
    cued_names: tuple[CuedNameRule, ...] = ()
    form_fields: tuple[FormFieldRule, ...] = ()
    given_names: GivenNameRule = dataclasses.field(default_factory=GivenNameRule)
    short_surnames: ShortSurnameRule = dataclasses.field(default_factory=ShortSurnameRule)
    foreign_runs: ForeignRunRule = dataclasses.field(default_factory=ForeignRunRule)
    name_lists: NameListRule = dataclasses.field(default_factory=NameListRule)
    rare_words: RareWordRule = dataclasses.field(default_factory=RareWordRule)
    vocatives: VocativeRule = dataclasses.field(default_factory=VocativeRule)
    speakers: SpeakerRule = dataclasses.field(default_factory=SpeakerRule)
    pronouns: PronounRule = dataclasses.field(default_factory=PronounRule)
    value_parts: ValuePartRule = dataclasses.field(default_factory=ValuePartRule)
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
                raise ConfigError(
                    f"privacy.categories: {f'{entity}={mode}'!r}: the entity must be one of the "
                    f"policy's and the mode one of {', '.join(MODES)}"
                )
        return dataclasses.replace(self, categories={**self.categories, **overrides})


def check_categories(items: Sequence[str]) -> dict[str, str]:
    """``privacy.categories`` as entity -> mode, checked against the shipped policy
    (a ConfigError names a wrong one): what ``drag config set`` and ``drag serve``'s
    start ask, so that a value written into the file by hand is said at once."""
    modes = category_modes(items)
    load_policy().with_categories(modes)
    return modes


@functools.cache
def load_policy(path: Path = POLICY_FILE) -> Policy:
    try:
        return _parse_policy(path, yaml.safe_load(path.read_text("utf-8")))
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError, ValueError) as exc:
        what = f"no {exc}" if isinstance(exc, KeyError) else one_line(str(exc), 160)
        raise PrivacyError(
            f"the privacy policy {path} cannot be read ({what}); nothing will be sent"
        ) from None


def _expand(path: Path, where: str, text: str, fragments: dict[str, str]) -> str:
    """``text`` with each ``{{name}}`` replaced by the fragment of that name."""

    def fragment(match: re.Match[str]) -> str:
        if match.group(1) not in fragments:
            raise PrivacyError(f"{path}: {where}: no fragment {match.group(1)!r} above it")
        return fragments[match.group(1)]

    return FRAGMENT.sub(fragment, text)


def _recognizers(path: Path, data: Any) -> tuple[dict[str, Any], ...]:
    """The ``recognizers`` list, each pattern's ``{{fragments}}`` written out (a
    fragment may use those defined above it)."""
    fragments: dict[str, str] = {}
    for name, text in dict(data.get("fragments", {})).items():
        if not isinstance(text, str):
            raise PrivacyError(f"{path}: fragments: {name} is not a regex in quotes")
        fragments[str(name)] = _expand(path, f"fragments: {name}", text, fragments)
    specs = []
    for spec in data.get("recognizers", ()):
        patterns = [
            {**p, "regex": _expand(path, f"{spec['name']}: {p['name']}", p["regex"], fragments)}
            for p in spec.get("patterns", ())
        ]
        specs.append({**spec, "patterns": patterns} if "patterns" in spec else dict(spec))
    return tuple(specs)


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
        recognizers=_recognizers(path, data),
        country_recognizers=tuple(data.get("country_recognizers", ())),
        own_recognizers=tuple(data.get("own_recognizers", ())),
        context=ContextRule(**section("context")),
        contact_block=ContactBlockRule(**section("contact_block")),
        lowercase=LowercaseRule(**section("lowercase_lines")),
        cued_names=tuple(CuedNameRule(**frozen(dict(rule))) for rule in data.get("cued_names", ())),
        form_fields=tuple(
            FormFieldRule(**frozen(dict(rule))) for rule in data.get("form_fields", ())
        ),
        given_names=GivenNameRule(**section("lowercase_given_names")),
        short_surnames=ShortSurnameRule(**section("short_surnames")),
        foreign_runs=ForeignRunRule(**section("foreign_runs")),
        name_lists=NameListRule(**section("name_lists")),
        rare_words=RareWordRule(**section("rare_words")),
        vocatives=VocativeRule(**section("vocatives")),
        speakers=SpeakerRule(**section("speakers")),
        pronouns=PronounRule(**section("pronoun_persons")),
        value_parts=ValuePartRule(**section("value_parts")),
        categories=categories,
        contextual=ContextualRule(**section("contextual")),
        generalise=GeneraliseRule(**section("generalise")),
        public_sites=PublicSiteRule(**section("public_sites")),
        file_names=FileNameRule(**section("file_names")),
    )
