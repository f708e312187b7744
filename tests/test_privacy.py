"""The privacy layer: detection (real Presidio + spaCy), placeholders, the egress guard.

The detector here is the real one.  FaultyScanner and SlowScanner stand in for it
only where a test must make the check itself fail.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import pytest

from assistant.base.errors import GuardBlocked, Interrupted, PrivacyError
from assistant.base.textform import normalise
from assistant.net import egress
from assistant.privacy.detector import Detector
from assistant.privacy.findings import Finding, resolve_overlaps
from assistant.privacy.generalise import Generaliser
from assistant.privacy.guard import EgressGuard, Outgoing, read_body, template_fragments, value_form
from assistant.privacy.placeholders import Vault, org_short_forms, outside_placeholders
from assistant.privacy.policy import load_policy
from assistant.privacy.sanitize import sanitize
from tests.conftest import LINEAR_AT_MOST, SocketLog, linear_growth

AMELIA = (
    "Dr. Amelia Thompson, who wrote an article on amino acid metabolism for Biochem Review, "
    "can be contacted at athompson93@gmail.com or (555) 201-7734. What is the role of glutamine?"
)


@pytest.fixture(scope="module")
def detector() -> Detector:
    return Detector()


def kinds(findings: list[Finding]) -> dict[str, str]:
    return {f.text: f.entity for f in findings}


def test_detects_the_papers_example(detector: Detector) -> None:
    found = kinds(detector.find(AMELIA))
    assert found["Amelia Thompson"] == "PERSON"
    assert found["athompson93@gmail.com"] == "EMAIL_ADDRESS"
    assert found["(555) 201-7734"] == "PHONE_NUMBER"
    assert found["Biochem Review"] == "ORGANIZATION"
    assert "glutamine" not in found


@pytest.mark.parametrize(
    ("text", "value", "entity"),
    [
        ("My SSN is 536-22-8471, is that normal?", "536-22-8471", "US_SSN"),
        ("SSN: 123-45-6789", "123-45-6789", "US_SSN"),  # the canonical sample, still redacted
        ("Pay with 4111 1111 1111 1111 please", "4111 1111 1111 1111", "CREDIT_CARD"),
        ("IBAN DE89370400440532013000 for the rent", "DE89370400440532013000", "IBAN_CODE"),
        (
            "I live at 742 Evergreen Terrace, Springfield.",
            "742 Evergreen Terrace",
            "STREET_ADDRESS",
        ),
        ("JOHN SMITH signed the form", "JOHN SMITH", "PERSON"),
        ("Prof. Ada Lovelace asked", "Ada Lovelace", "PERSON"),
        ("I was born on 12/05/1984 in Ohio", "12/05/1984", "DATE_OF_BIRTH"),
        ("my username is jsmith_77", "jsmith_77", "USERNAME"),
        ("follow @jsmith on social media", "@jsmith", "USERNAME"),
        ("my password: hunter22! is it safe?", "hunter22", "SECRET"),
        (
            "key sk-proj-abcdefghijklmnopqrstuvwx leaked",
            "sk-proj-abcdefghijklmnopqrstuvwx",
            "SECRET",
        ),
        (
            "token ghp_0123456789abcdefghijklmnopqrstuvwxyz12",
            "ghp_0123456789abcdefghijklmnopqrstuvwxyz12",
            "SECRET",
        ),
        ("the server at 192.168.1.20 is down", "192.168.1.20", "IP_ADDRESS"),
        ("see https://johnsblog.example.com/about", "https://johnsblog.example.com/about", "URL"),
        ("a paper for Yoder LLC on soils", "Yoder LLC", "ORGANIZATION"),
        ("I work for Martin-Day now", "Martin-Day", "ORGANIZATION"),
        (
            "Prof. Bryan Snyder from Webb, White and Reese asked",
            "Webb, White and Reese",
            "ORGANIZATION",
        ),
        ("ask him on 328-590-4245 today", "328-590-4245", "PHONE_NUMBER"),
        ("call 230.800.1296 after six", "230.800.1296", "PHONE_NUMBER"),
        ("My name is Joy York and I live here", "Joy York", "PERSON"),
        ("please charge my card 2717 9944 1598 8876 now", "2717 9944 1598 8876", "CREDIT_CARD"),
        ("I live at 141 Hodges Mountains Apt. 5", "141 Hodges Mountains Apt. 5", "STREET_ADDRESS"),
        ("rejecting my password 0YhybJNcvYrw again", "0YhybJNcvYrw", "SECRET"),
        # Phone numbers without a US shape, found by a phone word before or after them.
        ("Can someone call me on 9472 7916?", "9472 7916", "PHONE_NUMBER"),
        ("416 60 039 office", "416 60 039", "PHONE_NUMBER"),
        ("Desk: +447700 921 916", "+447700 921 916", "PHONE_NUMBER"),
        # A + country code and a length that fits that country, valid or not, no phone
        # word needed (the UK's drama range: not valid to libphonenumber).
        ("Ping +44 7700 900123 about the flat", "+44 7700 900123", "PHONE_NUMBER"),
        ("Is +61 491 570 156 still yours?", "+61 491 570 156", "PHONE_NUMBER"),
        ("1. +44  7700 900123 and +1.2345678901", "+44  7700 900123", "PHONE_NUMBER"),
        # A count after a + number is no part of it (the matcher alone keeps none).
        ("+44 7700 900123 5 times a day", "+44 7700 900123", "PHONE_NUMBER"),
        # Names after a label, with letters beyond ASCII.
        ("Name:    Iva D. Grusová", "Iva D. Grusová", "PERSON"),
        ("Directed By:    Leena O Sasi", "Leena O Sasi", "PERSON"),
        ("Sometimes people call me Csanád", "Csanád", "PERSON"),
        # A building number before the street's own number; a European street name.
        ("The restaurant is at 17151 2450 Crown St", "17151 2450 Crown St", "STREET_ADDRESS"),
        ("The bus stops at 07576 Magasinsgatan 7 St.", "07576 Magasinsgatan 7", "STREET_ADDRESS"),
        # Streets after a where-someone-lives phrase, in any script or case; corners.
        ("She lives at 10252 Μεγάλη Άμμος 184, Πάφος", "10252 Μεγάλη Άμμος 184", "STREET_ADDRESS"),
        ("eva lives at 255 hersnapvej 18, københavn", "255 hersnapvej 18", "STREET_ADDRESS"),
        ("The bus station is on Pod Floriánem 1677", "Pod Floriánem 1677", "STREET_ADDRESS"),
        (
            "Stop at the corner of Pachergasse 64 and Radolič Harbor",
            "Pachergasse 64 and Radolič Harbor",
            "STREET_ADDRESS",
        ),
        ("My driver's license number is 6940579", "6940579", "US_DRIVER_LICENSE"),
        ("Stop sending messages to 699 956 915", "699 956 915", "PHONE_NUMBER"),
        # Names after a name label; employers; three words in capitals.
        ("What's your last name? Turgeon", "Turgeon", "PERSON"),
        ("Her maiden name is Key", "Key", "PERSON"),
        ("I work for Flightstats", "Flightstats", "ORGANIZATION"),
        ("HEIDI LE HERE, on the forum", "HEIDI LE HERE", "PERSON"),
        # A name after a relative or a friend.
        ("I would like to remove my kid Selma from the will", "Selma", "PERSON"),
        ("my grandmother was called Crystal Murdock", "Crystal Murdock", "PERSON"),
        # A line typed all in lower case.
        ("follow up with benjamin a seiler in a month", "benjamin a seiler", "PERSON"),
        # ... and introducing oneself in it: a word the vectors know only capitalised.
        ("hi i am belal a gp doctor", "belal", "PERSON"),
        ("im tomasz and i need help with my cv", "tomasz", "PERSON"),
        # An employer typed in lower case: the capitalised form is the commoner one.
        ("During my work at google, I launched campaigns", "google", "ORGANIZATION"),
        ("I worked for google pay team", "google", "ORGANIZATION"),
        # A catalogue number spaCy took into the firm's name is cut off, not the firm.
        ("We used antibodies from ab12345 Abcam Inc. in all runs.", "Abcam Inc", "ORGANIZATION"),
        # ... but a name with a number glued to it is the name (PUPA-TNB's seen half).
        ("I worked at Enter8000 Group until 2000.", "Enter8000 Group", "ORGANIZATION"),
        # ... and where a glued name and a code sit side by side, both go, as before.
        ("Our supplier is Studio54 ab213966 Abcam Inc.", "Abcam Inc", "ORGANIZATION"),
        # Someone greeted at the start of a line (spaCy takes "May" for a month).
        ("Hi May,We will pass this document to AP.", "May", "PERSON"),
        ("Hello Blessing!\nThe branches reject our transfers.", "Blessing", "PERSON"),
        # The person a message is for (spaCy misses "Blessing" here); a title stays.
        (
            "draft a mail to Blessing informing her that the branches reject us",
            "Blessing",
            "PERSON",
        ),
        ("Write a follow up email to Mrs. Dipert about the tour", "Dipert", "PERSON"),
        ("Between May and June MCpl King volunteered twice", "King", "PERSON"),  # a rank
        # A phone number after its label; an identifier after its label.
        ("Patient Call IMC Network Unified Number 920027778", "920027778", "PHONE_NUMBER"),
        ("Our contact no: 98765 43210", "98765 43210", "PHONE_NUMBER"),
        ("la situation du moteur PW127M, S/N : ED1755 après", "ED1755", "ID_NUMBER"),
        ("selling its Aircraft ATR72-500, MSN:0756. Tenders", "0756", "ID_NUMBER"),
        ("My employee ID 48213 is not working", "48213", "ID_NUMBER"),
        # A first name typed in lower case before the surname that was found.
        ("Include my demone Johnson and the company name", "demone Johnson", "PERSON"),
        # A person's name that spaCy reads as a firm's, which a pronoun refers to.
        ("Why has Caroline Regis been successful in her career?", "Caroline Regis", "PERSON"),
        # The user's folder in a home path; a handle after its network's name.
        ("/home/jdoe42/projects/app/main.py raises an error", "jdoe42", "USERNAME"),
        ("follow me on twitter: jane_doe_88", "jane_doe_88", "USERNAME"),
        ("my github is octo_cat99, can you review it?", "octo_cat99", "USERNAME"),
    ],
)
def test_added_recognizers(detector: Detector, text: str, value: str, entity: str) -> None:
    assert kinds(detector.find(text)).get(value) == entity


def test_a_pronoun_makes_no_firm_a_person_beside_a_person(detector: Detector) -> None:
    """The pronoun rule leaves a firm when a person is found in its sentence, or when no
    personal pronoun follows it there."""
    text = "Why did Anna Berg leave Excel Systems after her promotion?"
    assert kinds(detector.find(text)) == {"Anna Berg": "PERSON", "Excel Systems": "ORGANIZATION"}
    assert detector.find("Why has Nordlys Biotech grown its sales?") == []
    assert detector.find("Why has Caroline Regis grown. Her sales are up.") == []


def test_a_legal_form_is_no_rank(detector: Detector) -> None:
    """A private's rank, "Pte", is also Singapore's legal form: no title before a name."""
    found = kinds(detector.find("We ordered from Acme Pte Ltd in May."))
    assert "PERSON" not in found.values() and "Ltd" not in found


def test_a_recipients_title_is_not_a_name_of_its_own(detector: Detector) -> None:
    found = kinds(detector.find("Write a follow up email to Mrs. Dipert about the tour"))
    assert found == {"Dipert": "PERSON"}


def test_no_misfires_on_plain_questions(detector: Detector) -> None:
    for text in [
        "What is the capital of France?",
        "Which organelle makes ATP in eukaryotic cells?",
        "How does DNA replication start?",
        "What was the GDP of Japan in 1990?",
        "How much current does a 60 W light bulb draw at 120 V?",
        "A group of people have the number 12345.6789 written on a piece of paper.",
        "The nick has to be sanded. He puts the money in a bank account there.",
        "A. J. P. Taylor, The Course of German History, 1945",  # a year, not a postcode
        "Organisms that live at 3 different depths.",
        "The electron lives at a higher energy level 2.",
        "bacteria that live at the bottom of the sea grow slowly",  # lower case, no name
        "Hi there, how do vaccines work?",  # a greeting with no name
        "Hi All, is the meeting in May?",
        "i am happy with my job but i'm working too much",  # lower-case words, no name
        "this is photosynthesis, right? i am confused",
        "I work at home most days; does this formula work for excel?",
        "I worked for free during the summer, then I worked at university",
        "Should an email to HR about leave be formal?",  # no one named
        "How do I respond to Covid symptoms?",
        "When should I reply to All in a thread?",
        "Which number is prime: 1234567 or 1234568?",  # a number, not a phone's
        "The balance went +12 345 678 and then +2 300 000 in the table",  # too short
        "Is +15 12345678 a valid offset?",  # no country +15
        "my number one priority is the 2024 plan",
        "The serial killers of the 1970s",  # no identifier after the label
        "In this case number 3 is the answer",
        "Is the student ID card valid abroad?",
        "twitter is popular with 20-somethings",  # no handle after the network's name
        "What is the /home/ directory for on Linux?",
        "copy it to C:\\Users\\Public\\Desktop first",  # a folder every Windows has
        "Why won't report.docx open in Word?",  # a file, not the domain report.do
    ]:
        assert detector.find(text) == [], text


def test_a_term_an_answer_option_writes_in_lower_case_is_no_name(detector: Detector) -> None:
    """In a multiple-choice question, a capitalised word the vectors do not know that an
    option writes in lower case is a term of the subject (the guard refused this MedMCQA
    question: "thyroglossal" was left of a protected "Thyroglossal Duct").  Outside the
    options the same word stays an obscure name."""
    question = (
        "False statement about Thyroglossal Duct cyst is-\n"
        "A. Infected thyroglossal cyst from sinus\n"
        "B. Lined by pseudostratified columnar epithelium\n"
        "C. 40% cases have sub hyoid location\n"
        "D. It is due to congenital"
    )
    assert detector.find(question) == []
    text = "What does Nordlys Biotech make? nordlys means northern lights."
    assert "Nordlys Biotech" in kinds(detector.find(text))
    quiz = "Which firm is Nordlys Biotech?\nA. a brewer\nB. a lab\nC. nordlys means light"
    assert detector.find(quiz) == []  # a term of the question's own options


def test_a_bare_file_name_is_no_domain_and_no_name(detector: Detector) -> None:
    """.py, .md, .rs, .sh and .cc are also countries' domains, and spaCy reads some file
    names as people; a code question keeps its files.  A scheme, "www." or a slash
    keeps a URL, and endings as often a site's (.pl, .so) stay URLs (a coined name's: a
    bare domain of a known word is a public site, issue 29)."""
    for text in [
        "Why does setup.py fail, and where is README.md?",
        "cargo says lib.rs and build.sh are missing",
        "main.cc and main.go both crash",
        "run my_utils.py and ./scripts/deploy.sh",  # a path inside spaCy's "person"
    ]:
        assert detector.find(text) == [], text
    text = "see https://foo.sh/x, www.myblog.md, johnsmith.com and meblekowalczyk.pl"
    assert set(kinds(detector.find(text))) == {
        "https://foo.sh/x",
        "www.myblog.md",
        "johnsmith.com",
        "meblekowalczyk.pl",
    }


def test_a_path_is_no_name_and_the_user_in_it_is(detector: Detector) -> None:
    """spaCy takes the whole Windows path for an organisation; a path is no name, and
    the user's folder in it is the user name: only that part is replaced."""
    text = "Excel cannot open C:\\Users\\mhartley\\Desktop\\budget.xlsx"
    assert kinds(detector.find(text)) == {"mhartley": "USERNAME"}


def test_a_public_company_a_question_is_about_stays_and_one_tied_to_the_user_goes(
    detector: Detector,
) -> None:
    """A listed company or a well-known platform is what a question about it must name,
    even in a question about its writer; "applying to" or "I work at" ties it to the
    user (issue 48).  A firm on no list is replaced in the same question."""
    about = "I want to invest in Siemens or Apple for my retirement, which is safer?"
    assert kinds(detector.find(about)) == {}
    assert kinds(detector.find("I work at Oracle in Austin")) == {
        "Oracle": "ORGANIZATION",
        "Austin": "LOCATION",
    }
    applying = "I am applying to Siemens as an engineer, please write my cover letter"
    assert kinds(detector.find(applying)) == {"Siemens": "ORGANIZATION"}
    # A sentence about the writer's work makes a public one theirs, tie phrase or not.
    assert kinds(detector.find("I'm a cashier at Target and need a letter")) == {
        "Target": "ORGANIZATION"
    }
    assert kinds(detector.find("my manager at Amazon is rude, help me reply")) == {
        "Amazon": "ORGANIZATION"
    }
    unlisted = "I want to invest in Brightwave Analytica, is it safe for my retirement?"
    assert "Brightwave Analytica" in kinds(detector.find(unlisted))


def test_the_public_lists_ship_with_their_provenance() -> None:
    from assistant.privacy import public

    head = public.ORGS_FILE.read_text("utf-8").splitlines()[0]
    assert head.startswith("# pytickersymbols 1.17.10 (MIT")
    assert public.public("Apple Inc.") and public.public("apple")
    assert public.public("Etsy") and public.public("ORCL")
    assert not public.public("orcl")  # a ticker only as written
    assert not public.public("News")  # "News Corp" without its legal form: any news
    assert not public.public("moonfern")
    # A user's firm is matched whole ("Hawkins, Inc." is listed), a short form that is a
    # surname is not listed ("Rogers Corporation"), a ticker of two letters is a word.
    assert not public.public("Hawkins & Co.") and not public.public("Rogers")
    assert public.public("Rogers Corporation") and not public.public("MS")


def test_a_name_inside_a_found_value_is_a_name_elsewhere(detector: Detector) -> None:
    """The words of an e-mail's local part, a user name or a link's path, written
    elsewhere on their own, are the same person's name (issue 48); a known word opening a
    sentence ("Support" of support@…) is not."""
    text = "My folder C:\\Users\\jkowalczyk\\Desktop is full, jkowalczyk is my login"
    found = detector.find(text)
    assert [(f.text, f.recognizer) for f in found if f.start > 30] == [("jkowalczyk", "ValuePart")]
    plain = "Support is closed on Sunday. Write to support@firm-help.com"
    assert kinds(detector.find(plain)) == {"support@firm-help.com": "EMAIL_ADDRESS"}


# The value-parts rule over a fake scan (a fake vocabulary that knows "anna"): every
# e-mail found, and every word of its local part written again after it.
_PARTS_SETUP = """
import re
from assistant.privacy.findings import Finding
from assistant.privacy.recognizers.common import Scan
from assistant.privacy.recognizers.names import ValuePartRule

class FakeVocab:
    def has_vector(self, word):
        return word == "anna"

rule = ValuePartRule(entity="PERSON", values=("EMAIL_ADDRESS",))
def parts(text):
    found = [Finding("EMAIL_ADDRESS", m.start(), m.end(), m.group(), 1.0, "x")
             for m in re.finditer(r"\\S+@\\S+", text)]
    scan = Scan(text, [(0, text)], FakeVocab(), lambda e, t, s: True, lambda t: False)
    return rule.find(scan, found)
"""


def test_names_inside_values_are_found_in_linear_time() -> None:
    """A 2 MB paste of e-mails and the names in them: the value-parts rule takes no
    longer on it than on the same bytes in ten pieces (it once looked at every finding
    for every word, and at the whole text before each known word)."""
    make = '"mail anna.kowalska@firm.com; then Anna and Kowalska reply. " * (34_000 // K)'
    whole, pieces = linear_growth(_PARTS_SETUP, "parts(text)", make)
    assert whole <= LINEAR_AT_MOST * pieces, (whole, pieces)


def test_a_strict_finding_keeps_the_contextual_one_around_it(detector: Detector) -> None:
    """Context is decided before overlaps. Three words in capitals are a strict PERSON
    finding inside spaCy's organisation; resolving overlaps first, the longer
    organisation hid it, and context then dropped the organisation (nothing tied it to a
    person), so the firm's name was sent."""
    text = "market risk premium data of GREENFIELD AGRO SEEDS LTD company of past 5 years"
    assert kinds(detector.find(text)) == {"GREENFIELD AGRO SEEDS LTD": "ORGANIZATION"}


def test_a_known_word_before_a_name_stays_outside_it(detector: Detector) -> None:
    """Only a word the vectors do not know in lower case joins the name after it."""
    assert kinds(detector.find("please ask Johnson about it")) == {"Johnson": "PERSON"}


def test_labels_end_at_word_boundaries(detector: Detector) -> None:
    # "account" must not turn the end of "Accounting" into a username, nor "key" a keyboard.
    found = kinds(
        detector.find("Accounting profits differ from economic profits. Keyboard layout?")
    )
    assert "ing" not in found and not any(e == "USERNAME" for e in found.values())


def test_a_short_label_line_is_context_for_the_next_line(detector: Detector) -> None:
    # "Phone:" on its own line makes the digits below it a phone number; alone they are not.
    assert kinds(detector.find("Personal Info:\nPhone:\n467 3395\n")) == {
        "467 3395": "PHONE_NUMBER"
    }
    assert detector.find("Results:\n467 3395\n") == []


def test_contact_block_lines_above_an_address_are_redacted(detector: Detector) -> None:
    card = "> Mijail C Adomo\n> Asc Partners\n> 935 69 Gordon Terrace\n> Suite 828\n"
    found = kinds(detector.find(card))
    assert found["Mijail C Adomo"] == "PERSON"
    assert "Asc Partners" in found
    assert found["935 69 Gordon Terrace"] == "STREET_ADDRESS"
    # The same short lines with no address, phone or e-mail below them are left alone,
    # and answer options below an address are never taken for a contact block.
    assert "Mijail C Adomo" not in kinds(detector.find("> Mijail C Adomo\n> Gordon\n"))
    question = "Where is 12 Baker Street?\nA. London\nB. Paris\n"
    assert set(kinds(detector.find(question))) == {"12 Baker Street"}


def test_a_list_mostly_of_names_is_all_names(detector: Detector) -> None:
    found = kinds(detector.find("They had 4: Efimiya, Mary, Isabel and Jodi."))
    assert found.get("Efimiya") == "PERSON"  # spaCy knows the other three
    assert detector.find("Countries: France, Germany, Italy and Spain.") == []


def test_a_proper_noun_no_word_vector_knows_is_a_name(detector: Detector) -> None:
    found = kinds(detector.find("Luiza is from Xignite, and Dzhambek too."))
    assert found.get("Xignite") == "NAME" and found.get("Dzhambek") == "NAME"
    # Known words, in any case, are not: "Photosynthesis" opens a sentence.
    assert detector.find("Photosynthesis happens in chloroplasts.") == []
    # Nor is one word in capitals (spaCy's tag for it changes with the words around it),
    # an answer option's first word, or a code with capitals inside.
    # (No "our": an office's town in a personal text is a place to redact since issue 13.)
    assert detector.find("The office is in FAUSKE now.") == []
    assert detector.find("Which term names it?\nA. Presbyopia\nB. Presbycusis") == []
    assert detector.find("A. BbEe will be brown.") == []


def test_someone_addressed_at_the_start_of_a_sentence(detector: Detector) -> None:
    assert kinds(detector.find("Vide, can I please speak to your boss?")) == {"Vide": "PERSON"}
    # A proper noun and a comma, without a pronoun, a modal or a request after it.
    assert detector.find("Paris, in 1889, hosted the fair.") == []


def test_the_speakers_of_a_dialogue_where_one_is_a_known_name(detector: Detector) -> None:
    found = kinds(detector.find("Halldór: What a wife.\nMatthew: Remember me, Kelly?"))
    assert found.get("Halldór") == "PERSON"
    # A form's labels stay, even next to a name.
    form = kinds(detector.find("Name: Toshimi Arata\nPhone: 0490 75 40 81"))
    assert "Name" not in form and "Phone" not in form


def test_a_broken_policy_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text("nlp: [\n", "utf-8")
    with pytest.raises(PrivacyError, match=r"cannot be read.*nothing will be sent"):
        load_policy(bad)
    bad.write_text("entities: {}\n", "utf-8")
    with pytest.raises(PrivacyError, match="no 'nlp'"):
        load_policy(bad)


_SMALL_POLICY = """
nlp: {model: m, entity_mapping: {PERSON: PERSON}}
entities: {STREET_ADDRESS: {tag: ADDRESS, threshold: 0.5}}
fragments:
  digits: '\\d{1,4}'
  number: '(?:No\\. )?{{digits}}'
recognizers:
  - name: R
    supported_entity: STREET_ADDRESS
    patterns:
      - {name: street, regex: 'Via {{number}}', score: 0.7}
"""


def test_a_policy_fragment_is_written_out_where_a_pattern_names_it(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(_SMALL_POLICY, "utf-8")
    [spec] = load_policy(path).recognizers
    assert spec["patterns"][0]["regex"] == r"Via (?:No\. )?\d{1,4}"
    # The shipped policy's patterns are all written out.
    shipped = [p["regex"] for r in load_policy().recognizers for p in r.get("patterns", ())]
    assert len(shipped) > 20 and not [r for r in shipped if "{{" in r]


@pytest.mark.parametrize(
    ("old", "new", "missing"),
    [
        ("'Via {{number}}'", "'Via {{numbr}}'", "numbr"),  # a name no fragment has
        ("'Via {{number}}'", "'Via {{num-ber}}'", "num-ber"),  # nor one that is no word
        (  # a fragment used above its definition
            "  digits: '\\d{1,4}'\n  number: '(?:No\\. )?{{digits}}'",
            "  number: '(?:No\\. )?{{digits}}'\n  digits: '\\d{1,4}'",
            "digits",
        ),
    ],
)
def test_a_fragment_not_defined_above_its_use_is_a_clear_error(
    tmp_path: Path, old: str, new: str, missing: str
) -> None:
    path = tmp_path / "policy.yaml"
    assert old in _SMALL_POLICY
    path.write_text(_SMALL_POLICY.replace(old, new), "utf-8")
    with pytest.raises(PrivacyError, match=rf"no fragment '{missing}' above it"):
        load_policy(path)


def test_a_fragment_that_is_not_text_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(_SMALL_POLICY.replace("  digits: '\\d{1,4}'", "  digits:"), "utf-8")
    with pytest.raises(PrivacyError, match="fragments: digits is not a regex in quotes"):
        load_policy(path)


def test_uk_nhs_does_not_fire_on_us_phone_numbers(detector: Detector) -> None:
    assert "UK_NHS" not in {f.entity for f in detector.find("Call me at 212 555 0182 tomorrow")}


def test_allow_and_deny_lists() -> None:
    custom = Detector(allow=["Amelia Thompson"], deny=["Project Bluebird"])
    found = kinds(custom.find(AMELIA + " It is for Project Bluebird."))
    assert "Amelia Thompson" not in found
    assert found["Project Bluebird"] == "DENY_LIST"
    # In any case, as docs/benchmarks.md tells a user whose band's name was not learnt.
    band = Detector(deny=["Jolly Band"]).find('"The Jolly Band" and the jolly band vibe')
    assert [(f.text, f.entity) for f in band] == [
        ("Jolly Band", "DENY_LIST"),
        ("jolly band", "DENY_LIST"),
    ]


def test_a_users_term_is_found_whatever_space_or_line_break_splits_it() -> None:
    """The deny list and the learnt names are read over the whole text: a name wrapped
    onto the next line of a pasted e-mail, or typed with two spaces, is the name."""
    custom = Detector(deny=["Jolly Band"])
    custom.learn(["Wolfgang Schulz", "Sage"])
    text = "Dear Wolfgang\nSchulz, the JOLLY  band plays.\nSage:\tthanks, Wolfgang\r\n Schulz"
    found = [(f.text, f.recognizer) for f in custom.find(text) if f.entity == "DENY_LIST"]
    assert found == [
        ("Wolfgang\nSchulz", "LearntNames"),
        ("JOLLY  band", "UserDenyList"),
        ("Sage", "LearntNames"),
        ("Wolfgang\r\n Schulz", "LearntNames"),
    ]
    assert not [f for f in custom.find("Sagebrush and jolly bandits") if f.entity == "DENY_LIST"]
    # As the policy's rule for them says: three letters at least.
    custom.learn(["AI", "I'm", "Sage"])
    assert [f.text for f in custom.find("I'm AI, Sage.") if f.entity == "DENY_LIST"] == ["Sage"]
    # Learning again replaces what was learnt; an allowed term, as written, is left.
    custom.learn(["Ada Byron"])
    allowed = Detector(allow=["Sage"], deny=["Sage"])
    assert not [f for f in custom.find("Sage wrote") if f.entity == "DENY_LIST"]
    assert not [f for f in allowed.find("Sage wrote") if f.entity == "DENY_LIST"]
    assert [f.text for f in allowed.find("SAGE wrote") if f.entity == "DENY_LIST"] == ["SAGE"]
    # An allowed term does not hide a denied one it starts with (as Presidio's lists).
    both = Detector(allow=["Sage Brush"], deny=["Sage Brush", "Sage"])
    assert [f.text for f in both.find("Sage Brush wrote") if f.entity == "DENY_LIST"] == ["Sage"]


def test_a_users_terms_overlapping_unspaced_or_in_another_unicode_form_are_found() -> None:
    """Overlapping terms are one finding (no tail left); a term in a script written
    without spaces has no edge to keep; a term and a text in different Unicode forms
    meet (NFKC); a short term the user denied is kept, a short learnt one is not."""
    custom = Detector(deny=["Mary Ann", "Ann Lee", "Xu", "Mu\u0308ller"])
    custom.learn(["田中", "ﬁona", "AI"])

    def denied(text: str) -> list[str]:
        return [f.text for f in custom.find(text) if f.entity == "DENY_LIST"]

    assert denied("Mary Ann Lee came.") == ["Mary Ann Lee"]
    assert denied("Translate this: 田中さんに資料を送ってください。") == ["田中"]
    assert denied("The report by müller, and by mu\u0308ller; ask fiona.") == [
        "müller",
        "mu\u0308ller",
        "fiona",
    ]
    assert denied("Ask Xu about AI.") == ["Xu"]


def test_the_longest_term_at_a_place_is_found_whatever_its_edges() -> None:
    """Terms are compiled by the kind of edge they need: "C++" (no edge after it) and
    "C" (one on both sides) are in two patterns, and the longer still wins."""
    from assistant.privacy.recognizers.terms import TermList

    terms = TermList(["C", "C++", "Ana", "Ana María", "東京"], "test")
    found = terms.find("I write C++ with Ana María in 東京都.")
    assert [f.text for f in found] == ["C++", "Ana María", "東京"]


def test_a_cased_term_is_found_only_as_a_name_is_written() -> None:
    """A learnt sender who is an everyday word ("Will", "Rose Hill") is found as typed,
    capitalised or in capitals, never as the word in lower case."""
    from assistant.privacy.recognizers.terms import TermList

    terms = TermList(["Will", "rose hill"], "test", cased=True)
    found = terms.find("Will said WILL and will; Rose Hill, ROSE HILL, rose hill.")
    assert [f.text for f in found] == ["Will", "WILL", "Rose Hill", "ROSE HILL", "rose hill"]
    assert terms.find("I will walk up the hill where a rose grows.") == []


_MANY_TERMS = """
import re
from assistant.privacy.recognizers.terms import TermList
names = [f"Name{i} Surname{i}" for i in range(2000)]
text = "Ask name1999 surname1999 and Name7 Surname7 about it. " * 50
"""
_MANY_TERMS_TIMED = {
    # The term list made and read; re.purge(): no pattern from the try before.
    "terms": "re.purge(); assert len(TermList(names, 'learnt').find(text)) == 100",
    # The reference: one bare alternation of the same names, compiled and read.
    "alternation": (
        "re.purge(); pattern = re.compile('|'.join(map(re.escape, names)), re.IGNORECASE)\n"
        "assert len(pattern.findall(text)) == 100"
    ),
}


def test_two_thousand_learnt_names_are_ready_at_the_cost_of_one_pattern() -> None:
    """Every drag process compiles the learnt names before its first question.  A term
    list of 2,000 names costs a few times one bare alternation of the same names, timed
    in the same child process (an edge class per name cost 18 s for 2,000: hundreds of
    times the alternation)."""
    from tests.conftest import cpu_seconds_in_child

    seconds = cpu_seconds_in_child(_MANY_TERMS, _MANY_TERMS_TIMED, timeout=120)
    assert seconds["terms"] <= 10 * seconds["alternation"], seconds


def test_a_learnt_persons_name_is_a_person_whose_parts_the_guard_keeps() -> None:
    """A name the files give a person is found as PERSON (a person's placeholder, and
    the guard keeps each part of it, "Schulz" alone, from the teacher); a firm's stays
    a term of the list."""
    custom = Detector()
    custom.learn(["Wolfgang Schulz", "Lighthouse Cafe"], people=["Wolfgang Schulz"])
    question = "Did Wolfgang Schulz like it?"
    found = {f.text: (f.entity, f.recognizer) for f in custom.find(question)}
    assert found["Wolfgang Schulz"] == ("PERSON", "LearntNames")
    firm = {f.text: (f.entity, f.recognizer) for f in custom.find("I work at lighthouse cafe.")}
    assert firm["lighthouse cafe"] == ("DENY_LIST", "LearntNames")
    vault = Vault(tag_of=load_policy().tag)
    sent = sanitize(question, scanner=custom, vault=vault, guard=EgressGuard(custom))
    assert "<PERSON_1>" in sent.text and "Schulz" not in sent.text
    ((entity, value),) = [(e, v) for e, v in vault.values() if v == "Wolfgang Schulz"]
    later = "Ask Schulz about it."  # a rewrite or a later line naming him by his surname
    assert value_form(entity, value, later, normalise(later)) == "part 'Schulz'"


def test_resolve_overlaps_prefers_the_longer_span() -> None:
    a = Finding("URL", 10, 20, "x.com", 0.5)
    b = Finding("EMAIL_ADDRESS", 5, 20, "me@x.com", 1.0)
    assert resolve_overlaps([a, b]) == [b]


def test_resolve_overlaps_prefers_a_rule_then_the_higher_score_over_guesses() -> None:
    rule = Finding("PERSON", 7, 12, "Selma", 0.7, "RelativeNameRecognizer")
    spacy_town = Finding("LOCATION", 7, 12, "Selma", 0.85, "SpacyRecognizer")
    assert resolve_overlaps([spacy_town, rule]) == [rule]
    # The rare-word rule's "a name of some kind" is a guess too: a known kind wins.
    spacy_person = Finding("PERSON", 4, 10, "Dipert", 0.85, "SpacyRecognizer")
    rare = Finding("NAME", 4, 10, "Dipert", 0.55, "RareWord")
    assert resolve_overlaps([rare, spacy_person]) == [spacy_person]
    assert resolve_overlaps([spacy_person, rare]) == [spacy_person]


def test_vault_is_stable_and_reversible(detector: Detector) -> None:
    vault = Vault(tag_of=load_policy().tag)
    first = vault.redact(AMELIA, detector.find(AMELIA))
    assert "Amelia" not in first.text and "athompson93" not in first.text
    assert "<PERSON_1>" in first.text and "<EMAIL_1>" in first.text and "<PHONE_1>" in first.text
    again = "Thompson also asked about alanine."
    # A part of a known name keeps its placeholder: the vault alone knows the surname,
    # and what the detector finds does not change that.
    assert vault.redact(again, []).text.startswith("<PERSON_1> also asked")
    assert vault.redact(again, detector.find(again)).text.startswith("<PERSON_1> also asked")
    assert vault.restore(first.text) == AMELIA
    assert first.counts == {"PERSON": 1, "ORGANIZATION": 1, "EMAIL_ADDRESS": 1, "PHONE_NUMBER": 1}


@pytest.mark.parametrize(
    "mangled",
    ["<person_1>", "<Person 1>", "[PERSON_1]", "&lt;PERSON_1&gt;", "PERSON_1", "< PERSON_1 >"],
)
def test_restore_tolerates_mangled_placeholders(mangled: str) -> None:
    vault = Vault()
    assert vault.placeholder("PERSON", "Amelia Thompson") == "<PERSON_1>"
    assert vault.restore(f"Ask {mangled} later.") == "Ask Amelia Thompson later."


def test_a_merged_vault_keeps_both_writers_values_and_moves_the_clashing_one() -> None:
    """Two writers of one conversation gave <PERSON_1> to two people: the stored one keeps
    it, ours moves to a number neither used, with its name's parts; new values go past."""
    stored = Vault()
    stored.placeholder("PERSON", "Brendan Okafor")
    stored.placeholder("PERSON", "Dana Kowalski")
    stored.placeholder("EMAIL_ADDRESS", "b@okafor.example")
    ours = Vault()
    assert ours.placeholder("PERSON", "Amelia Thompson") == "<PERSON_1>"
    assert ours.placeholder("PERSON", "Thompson") == "<PERSON_1>"  # her surname alone
    assert ours.merge(stored.dump()) == 1
    assert ours.restore("<PERSON_1>, <PERSON_2>, <PERSON_3>") == (
        "Brendan Okafor, Dana Kowalski, Amelia Thompson"
    )
    assert ours.placeholder("PERSON", "Thompson") == "<PERSON_3>"
    assert ours.placeholder("PERSON", "Brendan Okafor") == "<PERSON_1>"
    assert ours.placeholder("EMAIL_ADDRESS", "b@okafor.example") == "<EMAIL_ADDRESS_1>"
    assert ours.placeholder("PERSON", "Chidi Eze") == "<PERSON_4>"
    assert ours.merge(ours.dump()) == 0 and ours.merge(None) == 0


def test_restore_leaves_unknown_and_plain_words() -> None:
    vault = Vault()
    vault.placeholder("PERSON", "Amelia Thompson")
    for text in [
        "<PERSON_7> is unknown",
        "person 1 and person 2 in a puzzle",
        "a person_1 variable",
    ]:
        assert vault.restore(text) == text


@pytest.mark.parametrize(
    ("entity", "value", "text", "how"),
    [
        ("PERSON", "Amelia Thompson", "ask Amelia Thompson", "exact"),
        ("PERSON", "Amelia Thompson", "ask AMELIA   thompson", "normalised"),
        ("PERSON", "Amelia Thompson", "Thompson's article", "part 'Thompson'"),
        ("EMAIL_ADDRESS", "athompson93@gmail.com", "mail athompson93 at gmail", "local part"),
        ("PHONE_NUMBER", "(555) 201-7734", "call 555.201.7734", "digits"),
        ("CREDIT_CARD", "4111 1111 1111 1111", "card 4111-1111-1111-1111", "digits"),
        ("IBAN_CODE", "DE89370400440532013000", "iban de89 3704 0044 0532 0130 00", "digits"),
        ("USERNAME", "@jsmith", "user jsmith posted", "name without @"),
    ],
)
def test_leak_forms(entity: str, value: str, text: str, how: str) -> None:
    assert value_form(entity, value, text, normalise(text)) == how


def test_leak_does_not_fire_on_unrelated_text() -> None:
    text = "The Thompson River flows west"
    assert value_form("PERSON", "Amelia Thomas", text, normalise(text)) is None
    assert (
        value_form(
            "PHONE_NUMBER", "(555) 201-7734", "in 1955 2017 34 people", "in 1955 2017 34 people"
        )
        is None
    )


def test_guard_blocks_protected_values_and_unreplaced_data(detector: Detector) -> None:
    guard = EgressGuard(detector)
    protected = (("PERSON", "Amelia Thompson"),)
    guard.check(Outgoing(("What is the role of glutamine for <PERSON_1>?",), "", protected))
    with pytest.raises(GuardBlocked, match="PERSON from your question") as refused:
        guard.check(Outgoing(("Is Thompson right about glutamine?",), "", protected))
    # Which form it found, never the value: an error line goes into bug reports.
    assert "(a part of it)" in str(refused.value) and "Thompson" not in str(refused.value)
    with pytest.raises(GuardBlocked, match="personal data"):
        guard.check(Outgoing(("Email bob.jones@example.org about glutamine",), "", ()))
    # Text the request declares public (the teacher's own statements) is not re-judged...
    public = ("Marie Curie discovered radium.",)
    guard.check(Outgoing(("Statements: Marie Curie discovered radium.",), "", (), public=public))
    # ...but a protected value is refused wherever it appears.
    with pytest.raises(GuardBlocked):
        guard.check(
            Outgoing(
                ("Amelia Thompson discovered radium.",), "", protected, public=("Amelia Thompson",)
            )
        )


class FaultyScanner:
    """Fault injection: a detector that raises."""

    def find(self, text: str) -> list[Finding]:
        raise RuntimeError("detector crashed")


class SlowScanner:
    """Fault injection: a detector that takes too long (until the test releases it)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.done = threading.Event()

    def find(self, text: str) -> list[Finding]:
        self.release.wait(60)
        self.done.set()
        return []


def test_guard_fails_closed_on_detector_exception_and_timeout() -> None:
    with pytest.raises(GuardBlocked, match=r"privacy check failed .*RuntimeError"):
        EgressGuard(FaultyScanner()).check(Outgoing(("hello",), "", ()))
    slow = SlowScanner()
    with pytest.raises(GuardBlocked, match=r"took longer than 0\.2 s"):
        EgressGuard(slow, timeout=0.2).check(Outgoing(("hello",), "", ()))
    # The guard said no at its timeout, while the detector was still reading: it did
    # not wait for it (a guard that did would return only once the detector was done).
    assert not slow.done.is_set()
    slow.release.set()


def test_template_fragments_keep_a_json_example_as_ours() -> None:
    # Doubled braces are literal text: the example is ours, not a field to re-check
    # (its lower-case line was once read as a name and blocked every graph request).
    template = 'Statements:\n{statements}\nReply with JSON only: {{"triples": [one item each]}}'
    assert template_fragments([template]) == [
        '\nReply with JSON only: {"triples": [one item each]}',
        "Statements:\n",
    ]


def test_read_body_reads_messages_and_the_rest() -> None:
    request = egress.ChatRequest(
        "evidence",
        "m",
        ({"role": "user", "content": 'héllo\n"there"'},),
        10,
        response_format={"type": "json_object"},
    )
    texts, rest = read_body(request.payload_bytes())
    assert texts == ('héllo\n"there"',) and "json_object" in rest
    with pytest.raises(GuardBlocked, match="not JSON"):
        read_body(b"\xff\xfe")


def test_the_requests_own_field_names_never_hold_back_a_question(detector: Detector) -> None:
    """Found on MMLU's dev split: "Caplan's model" and "type 2 diabetes" read as names had
    the parts "model" and "type", which the body's own keys ("model", "type") spell, and
    the question was refused.  The other fields are read for their values, and for a
    protected value as a whole: a part of a name there is our schema's word."""
    guard = EgressGuard(detector)
    request = egress.ChatRequest(
        "evidence",
        "teacher",
        ({"role": "user", "content": "Why does <PERSON_1> matter in consultation?"},),
        10,
        response_format={"type": "json_schema", "json_schema": {"name": "evidence"}},
        protected=(("PERSON", "Caplan's model"), ("PERSON", "Evidence Type")),
    )
    guard.check_body(request.payload_bytes(), request)
    _texts, rest = read_body(request.payload_bytes())
    assert "model" not in rest.split() and "json_schema" in rest.split()
    # A protected value that a field holds whole is still refused.
    leaky = egress.ChatRequest(
        "evidence",
        "Amelia Thompson",
        ({"role": "user", "content": "Why?"},),
        10,
        protected=(("PERSON", "Amelia Thompson"),),
    )
    with pytest.raises(GuardBlocked, match="PERSON from your question"):
        guard.check_body(leaky.payload_bytes(), leaky)


def test_egress_refuses_without_a_guard_and_probe_guard_refuses_bodies() -> None:
    request = egress.ChatRequest("evidence", "m", ({"role": "user", "content": "hi"},), 10)
    endpoint = egress.Endpoint("http://127.0.0.1:9/v1", max_retries=0)
    with pytest.raises(GuardBlocked, match="no privacy guard"):
        egress.send(endpoint, request, None)
    with pytest.raises(GuardBlocked, match="needs the privacy guard"):
        egress.send(endpoint, request, egress.BodylessOnly())


def test_sanitize_keeps_a_good_rewrite_and_refuses_a_leaky_one(detector: Detector) -> None:
    def good(system: str, text: str) -> str:
        assert "Amelia" not in text  # the student only ever sees the placeholder version
        return "What is the role of glutamine in amino acid metabolism?"

    vault = Vault(tag_of=load_policy().tag)
    guard = EgressGuard(detector)
    kept = sanitize(AMELIA, scanner=detector, vault=vault, guard=guard, rewriter=good)
    assert kept.rewrite_used and kept.text == good("", "")
    assert json.dumps(kept.summary())  # types and counts only
    assert "Amelia" not in json.dumps(kept.summary())

    def leaky(system: str, text: str) -> str:
        return "What did Dr. Thompson say about glutamine?"  # copies a name back in

    refused = sanitize(AMELIA, scanner=detector, vault=vault, guard=guard, rewriter=leaky)
    assert not refused.rewrite_used and "egress guard" in refused.rewrite_note
    assert refused.text == refused.placeholder_text and "<PERSON_1>" in refused.text

    def invents(system: str, text: str) -> str:
        return "What did <PERSON_3> say?"

    assert (
        "made up a placeholder"
        in sanitize(
            AMELIA, scanner=detector, vault=vault, guard=guard, rewriter=invents
        ).rewrite_note
    )

    def called_off(system: str, text: str) -> str:  # the app closed while it wrote
        raise Interrupted("the app was closed")

    with pytest.raises(Interrupted):  # not "no rewrite", going on to the upload
        sanitize(AMELIA, scanner=detector, vault=vault, guard=guard, rewriter=called_off)


@pytest.mark.parametrize(
    ("candidate", "problem"),
    [
        ("What is the role of glutamine?", ""),
        ("What role does glutamine play in amino acid metabolism?", ""),
        ("The answer to this question is:", "lost the question"),  # seen from SmolLM2
        ("What is the role of glutamine in bitcoin mining and astrology?", "added words"),
    ],
)
def test_rewrite_must_stay_faithful(candidate: str, problem: str) -> None:
    from assistant.privacy.sanitize import drift

    original = "<PERSON_1> wrote about amino acid metabolism. What is the role of glutamine?"
    assert (problem in drift(candidate, original)) if problem else drift(candidate, original) == ""


def test_sanitize_keeps_answer_options(detector: Detector) -> None:
    question = (
        "Dr. Amelia Thompson asks:\nWhich gas do plants absorb?\nA. Oxygen\nB. Carbon dioxide"
    )
    vault = Vault(tag_of=load_policy().tag)
    result = sanitize(
        question,
        scanner=detector,
        vault=vault,
        guard=EgressGuard(detector),
        rewriter=lambda s, t: "Which gas do plants absorb?",
    )
    assert not result.rewrite_used and "dropped an answer option" in result.rewrite_note


def test_sanitize_fails_closed_when_detection_fails() -> None:
    from assistant.base.errors import PrivacyError

    with pytest.raises(PrivacyError, match=r"detector failed .*nothing was sent"):
        sanitize(
            "hello", scanner=FaultyScanner(), vault=Vault(), guard=EgressGuard(FaultyScanner())
        )


def test_the_http_hook_refuses_requests_outside_send(socket_guard: SocketLog) -> None:
    """Even code that reached the pooled client directly is stopped before connecting."""
    endpoint = egress.Endpoint("http://127.0.0.1:9/v1", max_retries=0)
    client = egress._client(endpoint)
    with pytest.raises(GuardBlocked, match=r"outside egress\.send"):
        client.models.list()
    assert socket_guard.seen == []


def test_values_kept_at_review_go_as_they_are_and_nothing_else(detector: Detector) -> None:
    """The review lets the user send a detected value as it is (a famous name the question
    is about): only that value is released, for that request, and never silently."""
    question = "Did Marie Curie write to Dr. Amelia Thompson (athompson93@gmail.com) about radium?"
    vault = Vault(tag_of=load_policy().tag)
    guard = EgressGuard(detector)
    shown = sanitize(question, scanner=detector, vault=vault, guard=guard)
    values = {r.value for r in shown.redacted.replacements}
    assert "Marie Curie" in values and "Marie Curie" not in shown.text
    chosen = shown.keeping(["Marie Curie", "not a detected value"])
    assert chosen.released == ("Marie Curie",)
    assert "Marie Curie" in chosen.text and "Thompson" not in chosen.text
    assert chosen.summary()["kept_by_user"] == {"PERSON": 1}
    assert "Marie" not in json.dumps(chosen.summary())  # types and counts, never values
    assert shown.keeping([]).text == shown.text  # toggled back: as detected
    assert chosen.keeping([]).text == shown.text
    # The guard lets the released value through, and still refuses the others.
    protected = tuple(vault.values())
    guard.check(Outgoing((chosen.text,), "", protected, released=chosen.released))
    with pytest.raises(GuardBlocked):
        guard.check(Outgoing((chosen.text,), "", protected))  # not released: refused
    leaky = chosen.text.replace(chosen.redacted.replacements[0].placeholder, "Amelia Thompson")
    with pytest.raises(GuardBlocked):
        guard.check(Outgoing((leaky,), "", protected, released=chosen.released))


def test_a_common_word_in_a_false_name_does_not_block_later_questions(
    detector: Detector,
) -> None:
    """spaCy reads "W. Which" (ARC: "Z scratches W. Which of these…") as a PERSON; its
    part "Which" must not make every later question with "Which" a leak."""
    protected = (("PERSON", "W. Which"), ("PERSON", "Theresa May"))
    guard = EgressGuard(detector)
    guard.check(
        Outgoing(("Which structures are common to plant and animal cells?",), "", protected)
    )
    with pytest.raises(GuardBlocked):  # a name part that is also a word stays protected
        guard.check(Outgoing(("What did May say about cells?",), "", protected))


class FindsNothingScanner:
    """Fake: a detector that misses everything (the second question's case)."""

    def find(self, text: str) -> list[Finding]:
        return []


def test_a_value_from_an_earlier_question_keeps_its_placeholder(detector: Detector) -> None:
    """Within a conversation, a value protected earlier is replaced when it comes back,
    even where the detector misses it this time, and the request then passes the guard."""
    vault = Vault(tag_of=load_policy().tag)
    guard = EgressGuard(detector)
    first = sanitize(AMELIA, scanner=detector, vault=vault, guard=guard)
    person = next(r.placeholder for r in first.redacted.replacements if r.entity == "PERSON")
    later = sanitize(
        "What else has Thompson written, and is ATHOMPSON93@gmail.com still hers?",
        scanner=FindsNothingScanner(),
        vault=vault,
        guard=guard,
    )
    assert "thompson" not in later.text.lower() and person in later.text
    assert later.counts == {"PERSON": 1, "EMAIL_ADDRESS": 1}
    guard.check(Outgoing((later.text,), "", tuple(vault.values())))
    # Without the earlier question, the same text is not touched (nothing is known).
    fresh = sanitize(
        "What else has Thompson written?",
        scanner=FindsNothingScanner(),
        vault=Vault(tag_of=load_policy().tag),
        guard=guard,
    )
    assert fresh.text == "What else has Thompson written?"


class LineStartScanner:
    """A fake detector: "Nordlys" anywhere, and "ESS" only with no word before it on its
    line: a detector whose findings depend on the words around them (spaCy's do; the
    real-detector case is the test after the next)."""

    def find(self, text: str) -> list[Finding]:
        found = []
        for name, anywhere in (("Nordlys", True), ("ESS", False)):
            at = text.find(name)
            before = text[text.rfind("\n", 0, max(at, 0)) + 1 : at]  # its line, before it
            if at >= 0 and (anywhere or not any(ch.isalpha() for ch in before)):
                found.append(Finding("ORGANIZATION", at, at + len(name), name, 0.9, "fake"))
        return found


class CompanyHints:
    """A fake generaliser: every organisation placeholder is "a company"."""

    def hints(self, replacements: object, values: object) -> dict[str, str]:
        return {r.placeholder: "a company" for r in replacements}  # type: ignore[attr-defined]


def test_what_the_guard_would_find_in_the_described_text_is_replaced_not_refused() -> None:
    """The guard reads the question with the descriptions taken out, so the words around
    a placeholder change: a name found only there is replaced by sanitize beforehand
    (PUPA-TNB: 9 of 12 refusals on the unseen split), and the request then passes."""
    scanner = LineStartScanner()
    vault, guard = Vault(tag_of=load_policy().tag), EgressGuard(scanner)
    question = "I work at Nordlys (ESS) on battery storage. What is a BMS?"
    result = sanitize(
        question,
        scanner=scanner,
        vault=vault,
        guard=guard,
        generaliser=CompanyHints(),  # type: ignore[arg-type]
    )
    assert "ESS" not in result.text and "Nordlys" not in result.text
    assert {r.value for r in result.redacted.replacements} == {"Nordlys", "ESS"}
    guard.check(
        Outgoing((result.text,), "", tuple(vault.values()), public=tuple(result.hints.values()))
    )
    assert vault.restore(result.text.replace(" (a company)", "")) == question


@pytest.mark.parametrize(
    ("name", "short"),
    [
        ("Crown Point Corporation", ["Crown Point"]),
        ("Epee Inc.", ["Epee"]),
        (
            "the Toboggan Brewing Company",
            ["Toboggan Brewing Company", "Toboggan Brewing", "Toboggan"],
        ),
        # spaCy's span ran on past the legal form: the name ends there.
        (
            "Toboggan Brewing Company Introduction",
            ["Toboggan Brewing Company", "Toboggan Brewing", "Toboggan"],
        ),
        ("Safran Aerosystems Services", ["Safran"]),
        ("Smith & Co.", ["Smith"]),
        ("National Bank", []),  # "National" alone names no firm
        ("Global Services Ltd", ["Global Services"]),
        ("Google", []),  # nothing to drop
    ],
)
def test_an_organisations_short_forms(name: str, short: list[str]) -> None:
    assert org_short_forms(name) == short


def test_an_organisation_named_again_shorter_gets_its_placeholder() -> None:
    """Written from PUPA-TNB's seen half: "Crown Point Corporation ... Crown Point
    purchased", "Epee Inc. ... Epee earned" (a fake finding stands for the detector)."""
    text = (
        "Crown Point Corporation holds shares of Epee Inc. and Epic Systems. Crown Point "
        "bought more; EPEE earned $43,100. Epic Systems wrote an epic; so did the crown."
    )
    names = ["Crown Point Corporation", "Epee Inc.", "Epic Systems"]
    findings = [
        Finding("ORGANIZATION", text.index(n), text.index(n) + len(n), n, 0.9) for n in names
    ]
    vault = Vault(tag_of=load_policy().tag)
    out = vault.redact(text, findings).text
    assert out == (
        "<ORG_1> holds shares of <ORG_2> and <ORG_3>. <ORG_1> bought more; <ORG_2> earned "
        "$43,100. <ORG_3> wrote an epic; so did the crown."
    )
    # The guard reads a short form left behind as the organisation.
    left = "Crown Point bought more"
    assert value_form("ORGANIZATION", names[0], left, normalise(left)) == "part 'Crown Point'"
    assert value_form("ORGANIZATION", names[2], "an epic tale", "an epic tale") is None


def test_a_finding_inside_a_placeholder_is_none() -> None:
    text = "high-<ORG_14> glass, said <PERSON_1> Jones to Dr. <PERSON_2>."
    inside = Finding("NRP", text.index("ORG_14"), text.index("ORG_14") + 6, "ORG_14", 0.85)
    at = text.index("<PERSON_1>")
    past = Finding("PERSON", at, at + 16, "<PERSON_1> Jones", 0.85)
    at = text.index("Dr.")
    title = Finding("PERSON", at, at + 14, "Dr. <PERSON_2>", 0.85)
    kept = outside_placeholders(text, [inside, past, title])
    assert [(f.text, text[f.start : f.end]) for f in kept] == [("Jones", "Jones")]


class PlaceholderTagger:
    """Fake: the first look finds the firm; a later look tags the inside of its
    placeholder ("ORG_1") and nothing else: the contract, whatever a detector does with
    a placeholder (the real detector on the same question is tested below)."""

    def find(self, text: str) -> list[Finding]:
        out = []
        for word in ("Nordlys Biotech", "ORG_1"):
            at = text.find(word)
            if at >= 0:
                out.append(
                    Finding("NRP" if "_" in word else "ORGANIZATION", at, at + len(word), word, 0.9)
                )
        return out


def test_sanitize_ignores_what_a_detector_finds_inside_a_placeholder() -> None:
    scanner = PlaceholderTagger()
    vault = Vault(tag_of=load_policy().tag)
    guard = EgressGuard(scanner)
    out = sanitize("I work at Nordlys Biotech in sales.", scanner=scanner, vault=vault, guard=guard)
    assert out.text == "I work at <ORG_1> in sales."
    assert vault.values() == [("ORGANIZATION", "Nordlys Biotech")]
    guard.check(Outgoing((out.text,), "", tuple(vault.values())))


@pytest.mark.parametrize(
    "question",
    [
        "I work at Nordlys Biotech in sales. How do I ask for a raise?",
        "I work at Nordlys (ESS) on battery storage. What is a BMS?",
    ],
)
def test_the_real_detector_leaves_a_question_the_guard_passes(
    detector: Detector, question: str
) -> None:
    """The two cases above with spaCy and Presidio themselves: the firm is replaced,
    nothing is found inside a placeholder, and the guard passes what sanitize made."""
    vault, guard = Vault(tag_of=load_policy().tag), EgressGuard(detector)
    generaliser = Generaliser.from_policy(load_policy().generalise)
    out = sanitize(question, scanner=detector, vault=vault, guard=guard, generaliser=generaliser)
    assert "Nordlys" not in out.text and "<ORG_1>" in out.text, out.text
    assert not any(re.fullmatch(r"[A-Z]+_\d+", v) for _e, v in vault.values())  # no ORG_1
    guard.check(Outgoing((out.text,), "", tuple(vault.values()), public=tuple(out.hints.values())))


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("How do I export my repos from github.com?", []),  # a public site, the subject
        ("I read it on nature.com and allegro.pl", []),
        ("my blog is nature-notes.org, how do I get more readers?", ["nature-notes.org"]),
        ("my site is bakery.com, how do I add a shop?", ["bakery.com"]),  # called theirs
        ("see https://github.com/jdoe42/dotfiles", ["https://github.com/jdoe42/dotfiles"]),
        ("LinkedIn: /in/jane-doe-42 and X: @jane", ["/in/jane-doe-42", "@jane"]),
    ],
)
def test_public_sites_stay_and_personal_links_go(
    detector: Detector, text: str, found: list[str]
) -> None:
    assert [f.text for f in detector.find(text)] == found


@pytest.mark.parametrize(
    ("question", "surname"),
    [
        ("My doctor is Dr. Sarah Oh at the clinic. Should I ask Oh about the dose?", "Oh"),
        ("My colleague Tuan Do wrote the plan. How do I give Do feedback?", "Do"),
        ("Our new lead Jisoo An replaces me next week. What should I tell An in an email?", "An"),
        ("My landlord Minh Le raised the rent. What should Le do about the heating?", "Le"),
    ],
)
def test_a_short_surname_written_alone_is_replaced_too(
    detector: Detector, question: str, surname: str
) -> None:
    """Issue 30, item 4: a two-letter word is part of a name where the name writes it with
    a capital, and is protected as written (the everyday word stays: "do", "an")."""
    vault = Vault(tag_of=load_policy().tag)
    sent = sanitize(question, scanner=detector, vault=vault, guard=EgressGuard(detector))
    assert sent.text is not None
    assert surname not in sent.text.split() and f"{surname}." not in sent.text, sent.text
    assert sent.text.count("<PERSON_1>") == 2, sent.text
    if surname in ("Do", "An"):  # the everyday word, in lower case, is still there
        assert surname.lower() in sent.text.lower().replace("<person_1>", "").split()


@pytest.mark.parametrize(
    ("question", "value"),
    [
        ("My Aadhaar is 2345 6789 0123, is it safe to share?", "2345 6789 0123"),
        ("Can you check my PAN ABCDE1234F for the tax form?", "ABCDE1234F"),
        ("My NI number is QQ 12 34 56 C, what band am I in?", "QQ 12 34 56 C"),
        ("Mitt fødselsnummer er 01018512345, hva betyr sifrene?", "01018512345"),
        ("Patient MRN 4482913 needs a refill letter.", "4482913"),
        ("I was born on the third of April nineteen eighty-five, when can I retire?",
         "third of April nineteen eighty-five"),
        ("My car AB12 CDE was towed from the station, who do I call?", "AB12 CDE"),
        ("我的身份证号是 110101199003074514，帮我填表", "110101199003074514"),
        ("주민등록번호는 900101-1234567 입니다", "900101-1234567"),
    ],
)  # fmt: skip
def test_identifiers_of_other_countries_and_a_birth_date_in_words_are_replaced(
    detector: Detector, question: str, value: str
) -> None:
    """Issue 30, item 1 (its identifiers): each was sent as written before."""
    vault = Vault(tag_of=load_policy().tag)
    sent = sanitize(question, scanner=detector, vault=vault, guard=EgressGuard(detector))
    assert sent.text is not None and "<" in sent.text, sent.text
    digits = "".join(ch for ch in value if ch.isdigit())
    assert value not in sent.text and (not digits or digits[:4] not in sent.text), sent.text


@pytest.mark.parametrize(
    "question",
    [
        "The passport of 1923 was issued to whom?",
        "What is sin 3045 degrees in radians?",
        "How many digits does a TFN have, 8 or 9?",
    ],
)
def test_an_identifier_label_without_an_identifier_changes_nothing(
    detector: Detector, question: str
) -> None:
    vault = Vault(tag_of=load_policy().tag)
    sent = sanitize(question, scanner=detector, vault=vault, guard=EgressGuard(detector))
    assert sent.text == question


@pytest.mark.parametrize(
    ("question", "name"),
    [
        ("My manager 王伟 keeps changing the deadline, how do I push back?", "王伟"),
        ("Should I ask 田中太郎 about the contract before Friday?", "田中太郎"),
        ("Write a birthday message for my friend 김민수, he turns 30.", "김민수"),
        ("Can you help me thank राहुल शर्मा for the referral?", "राहुल"),
        ("My landlord عبدالله keeps the deposit, what are my rights?", "عبدالله"),
        # vowel signs and points join a name's letters (they are not letters to Python)
        ("Please email রাহুল about the invoice.", "রাহুল"),
        ("Should I ask சீதா before Friday?", "சீதா"),
        ("Ask مُحَمَّد about the lease.", "مُحَمَّد"),
    ],
)
def test_a_name_in_another_script_inside_latin_text_is_replaced(
    detector: Detector, question: str, name: str
) -> None:
    """Issue 30, item 1 (names in other scripts, in an English text)."""
    vault = Vault(tag_of=load_policy().tag)
    sent = sanitize(question, scanner=detector, vault=vault, guard=EgressGuard(detector))
    assert sent.text is not None and name not in sent.text, sent.text


@pytest.mark.parametrize(
    ("question", "script"),
    [
        ("我的同事李娜在腾讯升职了，我该怎么向老板要求加薪？", "CJK"),
        ("मेरे दोस्त राहुल शर्मा को क्या उपहार दूं?", "DEVANAGARI"),
        ("Мой друг Алексей Смирнов живёт в Казани. Что ему подарить?", "CYRILLIC"),
        ("Translate 怎么回复这封邮件 into English.", "CJK"),
        ("Call Mr. 王 today about the lease.", "CJK"),  # one character: still unread
    ],
)
def test_text_in_a_script_the_detector_cannot_read_is_marked_unread(
    detector: Detector, question: str, script: str
) -> None:
    """Issue 30, item 1: a run nothing here could read is named, for the review (or a
    refusal); once the local model has read the question, nothing is unread."""
    from assistant.privacy.reader import Reading

    vault = Vault(tag_of=load_policy().tag)
    sent = sanitize(question, scanner=detector, vault=vault, guard=EgressGuard(detector))
    assert script in sent.unread and script in sent.unread_line, sent.unread
    read = sanitize(
        question,
        scanner=detector,
        vault=Vault(tag_of=load_policy().tag),
        guard=EgressGuard(detector),
        read=Reading([], 0.1, 0, 0),
    )
    assert read.unread == () and read.unread_line == ""
    # A reading the model stopped early (a loop, its token limit) left the rest unread.
    stopped = sanitize(
        question,
        scanner=detector,
        vault=Vault(tag_of=load_policy().tag),
        guard=EgressGuard(detector),
        read=Reading([], 0.1, 3, 3, complete=False),
    )
    assert script in stopped.unread, stopped.unread
    # Each says why, and a refusal without a review says what helps (not "turn the
    # reader on" when it was on).
    from assistant.privacy.review import approved

    assert sent.unread_line.endswith("and privacy.reader is off")
    assert stopped.unread_line.endswith("and the local reader stopped before the end of it")
    with pytest.raises(PrivacyError, match="turn the reader on"):
        approved(sent, "never", None)
    with pytest.raises(PrivacyError, match="ask it in shorter parts") as refused:
        approved(stopped, "never", None)
    assert "turn the reader on" not in str(refused.value)


@pytest.mark.parametrize(
    "question",
    [
        "What is Δx when α = 2 and β = 3?",
        "My manager 王伟 keeps changing the deadline, how do I push back?",  # replaced
        "Is Crème brûlée from Île-de-France?",
        "Is a 5 µm filter fine for the 1º stage?",  # Latin-1's own letters
    ],
)
def test_text_the_detector_read_or_replaced_is_not_unread(
    detector: Detector, question: str
) -> None:
    vault = Vault(tag_of=load_policy().tag)
    sent = sanitize(question, scanner=detector, vault=vault, guard=EgressGuard(detector))
    assert sent.unread == (), sent.text


def test_greek_symbols_and_a_quoted_chinese_phrase_stay(detector: Detector) -> None:
    for question in (
        "What is Δx when α = 2 and β = 3?",
        "Translate 怎么回复这封邮件 into English.",
    ):
        vault = Vault(tag_of=load_policy().tag)
        sent = sanitize(question, scanner=detector, vault=vault, guard=EgressGuard(detector))
        assert sent.text == question


def test_letters_styled_as_mathematics_are_symbols_not_another_script(
    detector: Detector,
) -> None:
    """ "E = ℎ𝜈 where ℎ is a constant": one to three styled letters are Latin or
    Greek symbols, neither replaced nor unread; a name in a decorative font is still
    text nothing here reads."""
    question = "If E = ℎ𝜈 and ℎ is a constant, what is 𝜈 for 𝑚𝑐 = 2?"
    vault = Vault(tag_of=load_policy().tag)
    sent = sanitize(question, scanner=detector, vault=vault, guard=EgressGuard(detector))
    assert sent.text == question and sent.unread == ()
    styled = "Please forward this to 𝓜𝓪𝓻𝔂 tomorrow."
    vault = Vault(tag_of=load_policy().tag)
    sent = sanitize(styled, scanner=detector, vault=vault, guard=EgressGuard(detector))
    assert "𝓜𝓪𝓻𝔂" not in sent.text


def test_no_country_recognizer_finds_anything_in_the_bundled_controls(detector: Detector) -> None:
    """README: Presidio's recognizers for other countries are on, "each one that changes
    none of the bundled controls" (the MMLU questions without personal data): each is
    loaded, finds what it is for, and finds nothing in any control."""
    from drag_bench.privacy import load_bundled

    names = set(load_policy().country_recognizers)
    loaded = set(detector.recognizers)
    assert names and names <= loaded, sorted(names - loaded)
    found = detector.find("My Aadhaar is 2345 6789 0124 and my PAN is ABCDE1234F.")
    assert "InAadhaarRecognizer" in {f.recognizer for f in found}
    controls = [item for item in load_bundled() if item.control]
    assert len(controls) >= 200
    hits = [
        (item.id, f.recognizer, f.text)
        for item in controls
        for f in detector.find(item.text)
        if f.recognizer in names
    ]
    assert hits == []


def test_a_value_found_as_two_entities_gets_the_first_ones_placeholder_in_every_run() -> None:
    """The same text, the same placeholders, whatever Python's hash seed (a set's order
    once decided it: PUPA-TNB queries came out <PERSON_3> in one run, <ORG_1> in the next)."""
    import subprocess
    import sys

    script = (
        "from assistant.privacy.placeholders import Vault\n"
        "from assistant.privacy.policy import load_policy\n"
        "v = Vault(tag_of=load_policy().tag)\n"
        "found = [('PERSON', 'DAN'), ('ORGANIZATION', 'DAN'), ('PERSON', 'Tom'),\n"
        "         ('ORGANIZATION', 'Ikea')]\n"
        "print(v.redact_values('Stay as DAN. Tom and Ikea, DAN.', found).text)\n"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in range(1, 9)
    }
    assert runs == {"Stay as <PERSON_1>. <PERSON_2> and <ORG_1>, <PERSON_1>."}, runs
