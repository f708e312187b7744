"""What a user means by personal (issue 13): organisations, places and groups decided in
context, coarser values, category modes, and the benchmark's own unit scorer.

The detector is the real one (Presidio + spaCy en_core_web_md).  FaultyScanner stands
in for it only where a test must make detection itself fail.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from drag_bench import leakscore
from drag_bench import privacy as leakage

from assistant.base.errors import ConfigError, GuardBlocked, PrivacyError
from assistant.base.textform import normalise
from assistant.privacy import recognizers
from assistant.privacy.detector import Detector
from assistant.privacy.findings import Finding
from assistant.privacy.generalise import Generaliser, annotate, coarser, describe_place, place
from assistant.privacy.guard import EgressGuard, Outgoing, value_form
from assistant.privacy.placeholders import Vault
from assistant.privacy.policy import category_modes, load_policy
from assistant.privacy.sanitize import sanitize


@pytest.fixture(scope="module")
def detector() -> Detector:
    return Detector()


def found(detector: Detector, text: str) -> dict[str, str]:
    return {f.text: f.entity for f in detector.find(text)}


# --- contextual categories: tied to the user vs what the question is about -------------


@pytest.mark.parametrize(
    ("text", "value", "entity"),
    [
        ("I work at Siemens and my manager wants a report by Friday.", "Siemens", "ORGANIZATION"),
        ("I live in Tromsø. What should I wear in January?", "Tromsø", "LOCATION"),
        ("We moved from Lagos last year; how do we register a car?", "Lagos", "LOCATION"),
        ("correct this email: the invoice from Collier Construction is late", "Collier", None),
        ("Dear Mr Hansen, thank you for the visit to Bergen.", "Bergen", "LOCATION"),
        ("Our startup is headquartered in Nairobi.", "Nairobi", "LOCATION"),
    ],
)
def test_a_place_or_organisation_tied_to_the_user_is_redacted(
    detector: Detector, text: str, value: str, entity: str | None
) -> None:
    hits = [f for f in detector.find(text) if value in f.text]
    assert hits, f"{value!r} left in {text!r}"
    if entity:
        assert any(f.entity == entity for f in hits)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("What is the GDP of India?", "India"),
        ("Tell me the history of Siemens.", "Siemens"),
        ("Which river flows through Paris?", "Paris"),
        ("Which city is the capital of Norway?\nA. Oslo\nB. Bergen", "Oslo"),
        ("How did the French Revolution change Europe?", "Europe"),
    ],
)
def test_a_place_or_organisation_the_question_is_about_stays(
    detector: Detector, text: str, value: str
) -> None:
    assert value not in found(detector, text), text


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("Current address area: Surulere, Lagos.", ["Surulere", "Lagos"]),
        ("Hometown: Kumasi\nEmployer: Kessler Logistics", ["Kumasi", "Kessler Logistics"]),
        ("- Place of birth: Cluj-Napoca, Romania", ["Cluj-Napoca", "Romania"]),
        ("City: Enugu, Country: Nigeria", ["Enugu", "Nigeria"]),
        ("Hometown: kumasi", ["kumasi"]),
        ("Nationality: Nigerian", ["Nigerian"]),
        # The adversarial review's: quote and emphasis marks are not the value's (the
        # same value later in the text went out), nor is a bracket; every line break
        # ends a line; an abbreviation's dot ends no value.
        ('City: "Kumasi"\nWhat is the weather like in Kumasi in March?', ["Kumasi"]),
        ("**Hometown**: Kumasi (Ghana)", ["Kumasi", "Ghana"]),
        ("Age: 34\rHometown: Kumasi", ["Kumasi"]),
        ("Age: 34\u2028Hometown: Kumasi", ["Kumasi"]),
        ("Place of birth: St. Petersburg, Russia", ["St. Petersburg", "Russia"]),
    ],
)
def test_the_values_of_a_forms_fields_are_replaced(
    detector: Detector, text: str, values: list[str]
) -> None:
    """A form is filled in about someone: where they live, come from and work, with no
    "I" in the text (the quiz rules' review of 2026-12-06; none was found before)."""
    hits = found(detector, text)
    assert all(v in hits for v in values), (text, hits)
    assert all(text[f.start : f.end] == f.text for f in detector.find(text))


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Location-based services: which city benefits most, Paris or Rome?", "Paris"),
        ("What is the capital city of France?", "France"),
        ("Location: anywhere in the world", "anywhere in the world"),
        ("Country: Japan. What was its GDP in 2020?", "Japan"),
        # The adversarial review's: a config file's keys, paths, words that are no
        # place, a question in a field, a heading with a dash, a following line.
        ("location: eastus\nsku: standard", "eastus"),
        ("city: Paris\ncountry: France\nconvert this YAML to JSON", "Paris"),
        ("Location: /usr/local/bin", "usr"),
        ("Location: Zorbex.Server", "Zorbex.Server"),
        ("Location: Remote", "Remote"),
        ("Location: Main Office", "Main Office"),
        ("Employer: Self-employed", "Self-employed"),
        ("City: which is bigger, Paris or Rome?", "Paris"),
        ("Village - level governance in India: explain", "India"),
        ("Employer: Acme\rWhat is the population of Kumasi", "Kumasi"),
    ],
)
def test_a_field_that_holds_no_one_s_place_is_not_a_form(
    detector: Detector, text: str, kept: str
) -> None:
    assert not any(kept in v for v in found(detector, text)), text


def test_a_one_word_name_is_contextual_in_a_quiz_only(detector: Detector) -> None:
    problem = "Katrine buys 3 apples and eats one. How many are left?"
    assert "Katrine" in found(detector, problem)
    assert "Katrine" not in found(detector, problem + "\nA. 1\nB. 2\nC. 3")
    assert "Katrine" in found(detector, "Why is Katrine so impulsive?")
    assert "Nick" in found(detector, "My colleague Nick has asked me to cover his shift.")
    assert "Nelson Mandela" in found(detector, "When was Nelson Mandela released from prison?")


@pytest.mark.parametrize(
    ("text", "values"),
    [
        (
            "Action items from Tuesday's meeting:\n1. John Miller to send the budget\n"
            "2. Sarah Collins to book the room",
            ["John Miller", "Sarah Collins"],
        ),
        (
            "Class quiz: how well do you know Priya Sharma?\nWhere did Priya Sharma grow up?"
            "\nA. Pune\nB. Leeds\nC. Cardiff",
            ["Priya Sharma"],
        ),
        (
            "Maria Lopez from Bristol sat the exam. Which grade did she get?\nA. B\nB. C",
            ["Maria Lopez", "Bristol"],
        ),
        (
            "Current address area: Lagos. Employer: Zenith Bank.\n1. I have lived here for 3 "
            "years\n2. I pay rent monthly",
            ["Lagos", "Zenith Bank"],
        ),
    ],
)
def test_a_text_shaped_like_a_quiz_keeps_its_people_replaced(
    detector: Detector, text: str, values: list[str]
) -> None:
    # A list's numbered lines read as answer options, and the vectors know nearly every
    # name: a name of two words stays replaced in a quiz, and a first person on an option
    # line makes the text its writer's (issue 48: a rule that let them go, not kept).
    hits = found(detector, text)
    assert all(v in hits for v in values), (text, hits)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("The grant came from Valentine-Murray last year.", "Valentine-Murray"),
        ("a paper for Yoder LLC on soils", "Yoder LLC"),
        ("Which of these is true?\nA. Call me Csanád\nB. No\nC. Yes", "Csanád"),
    ],
)
def test_what_a_policy_pattern_finds_is_strict(detector: Detector, text: str, value: str) -> None:
    # spaCy finds the same span with a higher score, and Presidio keeps only its result:
    # the pattern's evidence must still count.
    assert value in found(detector, text)


def test_an_organisation_with_an_unknown_word_is_strict(detector: Detector) -> None:
    assert any(
        "Exversion" in t for t in found(detector, "The Exversion Orchestra was founded in 1977.")
    )
    assert "Siemens" not in found(detector, "Tell me the history of Siemens.")


def test_an_object_pronoun_does_not_make_a_question_personal(detector: Detector) -> None:
    assert "Siemens" not in found(detector, "Tell me about Siemens.")
    assert "Siemens" in found(detector, "I interned at Siemens last summer.")


def test_category_modes_strict_and_off() -> None:
    strict = Detector(categories={"LOCATION": "strict"})
    assert "India" in {f.text for f in strict.find("What is the GDP of India?")}
    off = Detector(categories={"LOCATION": "off"})
    assert "Tromsø" not in {f.text for f in off.find("I live in Tromsø, what should I wear?")}


@pytest.mark.parametrize("bad", [["LOCATION"], ["=strict"]])
def test_a_malformed_category_setting_is_a_clear_error(bad: list[str]) -> None:
    with pytest.raises(ConfigError, match="ENTITY=MODE"):
        category_modes(bad)


@pytest.mark.parametrize(
    "bad", [{"LOCATION": "sometimes"}, {"PLANET": "strict"}, {"LOCATION": "\x1b]52;c;x\x07"}]
)
def test_an_unknown_category_or_mode_is_a_clear_error(bad: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=r"privacy\.categories") as err:
        load_policy().with_categories(bad)
    assert "\x1b" not in str(err.value)  # the user's value is shown escaped


def test_a_broken_categories_section_is_a_clear_error(tmp_path: Path) -> None:
    from assistant.privacy.policy import POLICY_FILE

    broken = tmp_path / "policy.yaml"
    broken.write_text(
        POLICY_FILE.read_text("utf-8").replace("LOCATION: contextual", "LOCATION: maybe"),
        "utf-8",
    )
    with pytest.raises(PrivacyError, match="maybe"):
        load_policy(broken)


# --- coarser values -------------------------------------------------------------------


def test_places_come_from_the_gazetteer_with_provenance() -> None:
    import gzip

    from assistant.privacy.generalise import PLACES_FILE

    with gzip.open(PLACES_FILE, "rt", encoding="utf-8") as fh:
        header = fh.readline()
    assert "GeoNames" in header and "CC BY 4.0" in header
    tromso = place("Tromsø")
    assert tromso is not None and (tromso.kind, tromso.country) == ("city", "Norway")
    assert describe_place("Tromso")[0] == "a city in Norway"  # without the accent too
    assert describe_place("Norway")[0] == "a country in Europe"
    assert describe_place("Lagos, Nigeria")[0] == "a city in Nigeria"
    assert describe_place("Zzyzxville")[0] == "a place"


def test_a_description_naming_a_protected_value_falls_back() -> None:
    protected = [("LOCATION", "Tromsø"), ("LOCATION", "Norway")]
    assert coarser(["a city in Norway", "a city in Europe"], protected) == "a city in Europe"
    assert coarser(["a city in Norway"], protected) is None


def test_organisation_descriptions_never_repeat_the_name() -> None:
    g = Generaliser.from_policy(load_policy().generalise)
    assert g.candidates("ORGANIZATION", "Nordlys Biotech")[0] == "a life-sciences company"
    assert g.candidates("ORGANIZATION", "Quux")[0] == "an organisation"
    for kind in g.organisations:
        assert not set(kind.words) & set(leakscore.tokens(kind.description)), kind


def test_annotate_describes_the_first_occurrence_only() -> None:
    text = annotate("<PLACE_1> is cold; <PLACE_1> is far.", {"<PLACE_1>": "a city in Norway"})
    assert text == "<PLACE_1> (a city in Norway) is cold; <PLACE_1> is far."


def test_sanitize_sends_coarser_values_that_pass_the_guard(detector: Detector) -> None:
    guard = EgressGuard(detector)
    vault = Vault(tag_of=load_policy().tag)
    s = sanitize(
        "I live in Tromsø and work at Nordlys Biotech. What should I wear in January?",
        scanner=detector,
        vault=vault,
        guard=guard,
        generaliser=Generaliser.from_policy(detector.policy.generalise),
        rewrite="never",
    )
    assert "Tromsø" not in s.text and "Nordlys" not in s.text
    assert "(a city in Norway)" in s.text and "(a life-sciences company)" in s.text
    assert s.modes["LOCATION"] == "contextual"
    # The hints are ours: the guard passes them (it would refuse "Norway" as user text).
    guard.check(Outgoing((s.text,), "", tuple(vault.values()), public=tuple(s.hints.values())))
    with pytest.raises(GuardBlocked):
        guard.check(Outgoing((s.text,), "", tuple(vault.values())))
    assert vault.restore("<PLACE_1> in winter") == "Tromsø in winter"


def test_review_lines_show_category_mode_and_coarser_value(detector: Detector) -> None:
    from assistant.tui.review import entity_choices

    s = sanitize(
        "I live in Tromsø [/] and my name is Ada Lovelace.",
        scanner=detector,
        vault=Vault(tag_of=load_policy().tag),
        guard=EgressGuard(detector),
        generaliser=Generaliser.from_policy(detector.policy.generalise),
        rewrite="never",
    )
    lines = [str(c.prompt) for c in entity_choices(s)]
    assert any("LOCATION (contextual)" in ln and "(a city in Norway)" in ln for ln in lines)
    assert any("PERSON (strict)" in ln for ln in lines)


class FaultyScanner:
    """A fake detector that fails (the fail-closed path)."""

    policy = load_policy()

    def find(self, text: str) -> list[Finding]:
        raise RuntimeError("recognizer crashed")


def test_a_failing_recognizer_sends_nothing() -> None:
    with pytest.raises(PrivacyError, match="nothing was sent"):
        sanitize(
            "I live in Tromsø.",
            scanner=FaultyScanner(),
            vault=Vault(),
            guard=EgressGuard(FaultyScanner()),
        )
    with pytest.raises(GuardBlocked, match="nothing was sent"):
        EgressGuard(FaultyScanner()).check(Outgoing(("I live in <PLACE_1>",), "", ()))


@pytest.mark.parametrize(
    ("owner", "method"),
    [
        (Detector, "judge"),
        (recognizers.PronounRule, "find"),
        (recognizers.GivenNameRule, "find"),
        (recognizers.ShortSurnameRule, "find"),
        (recognizers.NameListRule, "find"),
        (recognizers.SpeakerRule, "find"),
        (recognizers.CuedNameRule, "find"),
        (recognizers.LowercaseRule, "find"),
        (recognizers.ContactBlockRule, "find"),
        (recognizers.ForeignRunRule, "find"),
        (recognizers.RareWordRule, "takes"),
    ],
)
def test_a_failing_contextual_rule_sends_nothing(
    detector: Detector, monkeypatch: pytest.MonkeyPatch, owner: type, method: str
) -> None:
    def broken(*_a: object) -> bool:
        raise ValueError("rule failed")

    monkeypatch.setattr(owner, method, broken)
    with pytest.raises(PrivacyError, match="nothing was sent"):
        sanitize("I live in Tromsø.", scanner=detector, vault=Vault(), guard=EgressGuard(detector))


# --- the unit scorer: not the guard -----------------------------------------------------


@pytest.mark.parametrize(
    ("entity", "unit", "sent", "how"),
    [
        # a truncated organisation: value_form() checks organisations whole only
        ("ORGANIZATION", "Nordlys Biotech AS", "a question about Nordlys and its staff", "token"),
        # an address fragment
        ("STREET_ADDRESS", "42 Storgata, Tromsø", "I live on storgata in the north", "token"),
        # a place in another Unicode form (NFD: Å is A and a ring) and case
        ("LOCATION", "Ålesund", unicodedata.normalize("NFD", "ÅLESUND in winter"), "whole"),
        # a number across a line break and separators
        ("US_SSN", "536-22-8471", "my number is 536 22\n8471", "digits"),
    ],
)
def test_the_scorer_sees_what_leak_does_not(entity: str, unit: str, sent: str, how: str) -> None:
    assert leakscore.SentText(sent).how_sent(unit) == how
    if entity in ("ORGANIZATION", "STREET_ADDRESS"):
        assert value_form(entity, unit, sent, normalise(sent)) is None  # the guard's ruler misses


def test_the_scorer_folds_unicode_and_invisible_characters() -> None:
    assert leakscore.SentText("Kova\u0301cs is here").how_sent("Kovács") == "whole"
    assert leakscore.SentText("Am\u200belia called").how_sent("Amelia") == "whole"
    assert leakscore.SentText("nothing personal here").how_sent("Amelia Thompson") is None
    # titles and legal forms identify no one on their own
    assert leakscore.SentText("ask the professor").how_sent("Professor Margala") is None
    assert leakscore.SentText("a limited company").how_sent("Nordlys Limited") is None


def test_the_scorer_finds_a_value_in_text_written_without_spaces() -> None:
    """Chinese, Japanese, Thai: no word edges, so a name inside a sentence is a leak (it
    was not found at all before, and such units were left out of the count)."""
    assert leakscore.SentText("我的同事李娜在腾讯升职了").how_sent("李娜") == "whole"
    assert leakscore.SentText("田中太郎さんに送って").how_sent("田中太郎") == "whole"
    assert leakscore.SentText("내 친구 김민수에게 보내").how_sent("김민수") == "whole"
    assert leakscore.SentText("Ask Anna about it").how_sent("Ann") is None  # Latin keeps edges


def test_kept_words_counts_the_non_personal_words() -> None:
    kept, total = leakscore.kept_words(
        "Rachel asked me to book a hotel in Westminster",
        "<PERSON_1> asked me to book a hotel",
        ["rachel", "westminster"],
    )
    assert (kept, total) == (6, 7)  # "in" went with "in Westminster"
    assert leakscore.kept_words("book a hotel", "book", [])[0] == 1


def test_the_scorer_imports_nothing_of_the_privacy_layer() -> None:
    """Every import of the scorer, at any depth (inside functions too), relative or made
    at run time: none of the product's code."""
    import ast

    tree = ast.parse(Path(leakscore.__file__).read_text("utf-8"))
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import reaches the package"
            modules.add(node.module or "")
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            assert name not in ("__import__", "import_module"), "an import made at run time"
    assert modules and not any(m.split(".")[0] == "assistant" for m in modules), modules


# --- PUPA's CSV -------------------------------------------------------------------------


def test_the_csv_reader_takes_pupa_columns(tmp_path: Path) -> None:
    path = tmp_path / "pupa.csv"
    path.write_text(
        "conversation_hash,user_query,pii_units,redacted_query\n"
        'h1,"I am Ada at Nordlys, Tromsø",ada||nordlys||<PRESIDIO_ANONYMIZED_PERSON>,'
        '"I am [REDACTED] at [REDACTED]"\n'
        "h1,What is 2+2?,,What is 2+2?\n",
        "utf-8",
    )
    items = leakage.load_dataset(str(path))
    assert [i.id for i in items] == ["pupa/0", "pupa/1"]  # hashes repeat; ids do not
    assert items[0].pii == (("UNIT", "ada"), ("UNIT", "nordlys"))  # an anonymised unit: none
    assert items[0].reference == "I am [REDACTED] at [REDACTED]"
    assert items[1].control


def test_the_csv_reader_names_a_missing_column(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("text,units\na,b\n", "utf-8")
    with pytest.raises(ValueError, match="no column pii_units, user_query"):
        leakage.load_csv(path)


def test_a_pupa_run_reports_both_scorers_per_category(tmp_path: Path) -> None:
    path = tmp_path / "pupa.csv"
    path.write_text(
        "conversation_hash,user_query,pii_units,redacted_query\n"
        'h1,"Write an email: I moved from Lagos to work at Nordlys Biotech.",'
        'lagos||nordlys biotech,"Write an email: I moved from [REDACTED] to work at [REDACTED]."\n',
        "utf-8",
    )
    out = tmp_path / "out"
    assert leakage.main(["--dataset", str(path), "--no-teacher", "--methods", "full",
                         "--out", str(out)]) == 0  # fmt: skip
    summary = json.loads((out / "privacy-summary.json").read_text("utf-8"))["full"]
    assert summary["units"] == 2 and summary["unit_leaked"] == 0
    assert summary["reference_kept_words"] == 1.0
    assert set(summary["by_category"]) <= {"GPE", "ORG", "NONE", "PERSON"}
    md = (out / "privacy-summary.md").read_text("utf-8")
    assert "Unit scorer" in md and "The guard's own forms" in md


def test_the_summary_tells_a_whole_unit_from_one_of_its_words() -> None:
    def value(unit: str) -> dict[str, object]:
        return {"type": "UNIT", "exact": False, "normalised": False, "partial": False,
                "category": "ORG", "present": True, "unit": unit}  # fmt: skip

    record = {
        "control": False, "blocked": False, "changed": True, "seconds": {},
        "values": [value("whole"), value("token"), value(""), value("")],
        "kept_words": [9, 10], "reference_kept_words": [10, 10],
        "reference_leaks": 2, "reference_whole_leaks": 1,
    }  # fmt: skip
    summary = leakage.summarise([record])
    assert (summary["unit_leaked"], summary["unit_leaked_whole"]) == (2, 1)
    assert (summary["unit_leak_rate"], summary["unit_whole_rate"]) == (0.5, 0.25)
    assert (summary["reference_unit_leak_rate"], summary["reference_whole_rate"]) == (0.5, 0.25)
    md = leakage.render({"full": summary}, "t")
    assert "| full | 4 | 2 | 50.00% | 1 (25.00%) |" in md
    assert "| reference redaction (the dataset's) | 4 | – | 50.00% | 25.00% |" in md


def test_presidio_research_splits_by_template(tmp_path: Path) -> None:
    rows = [
        {"full_text": "t", "spans": [], "template_id": n % 3}
        for n in range(leakage.PRESIDIO_LOOKED_AT)
    ]
    rows += [{"full_text": "t", "spans": [], "template_id": 1}]  # late, seen template
    rows += [{"full_text": "t", "spans": [], "template_id": 99}]  # late, new template
    path = tmp_path / "synth.json"
    path.write_text(json.dumps(rows), "utf-8")
    items = leakage.load_dataset(str(path))
    last = f"presidio-research/{leakage.PRESIDIO_LOOKED_AT + 1}"
    assert [i.id for i in leakage.split_items(items, "unseen")] == [last]
    assert len(leakage.split_items(items, "seen")) == leakage.PRESIDIO_LOOKED_AT + 1


def test_pupa_splits_by_conversation_hash(tmp_path: Path) -> None:
    path = tmp_path / "pupa.csv"
    path.write_text(
        "conversation_hash,user_query,pii_units\n7abc,I am Ada,ada\n8abc,I am Bo,bo\n", "utf-8"
    )
    items = leakage.load_csv(path)
    assert [i.id for i in leakage.split_items(items, "seen")] == ["pupa/0"]
    assert [i.id for i in leakage.split_items(items, "unseen")] == ["pupa/1"]
    with pytest.raises(ValueError, match="no seen/unseen split"):
        leakage.split_items(leakage.load_bundled()[:3], "seen")
