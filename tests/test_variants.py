"""Issue 14, items 1-4: a value must not leave through a variant of itself.

The real detector, vault and egress guard: for every value the detector finds, no
variant of it (case, Unicode normal forms, zero-width characters, a line break,
other separators, another date format) is in what would be sent.  Each
``test_item_*`` failed on the main branch before this change.
"""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assistant.base.errors import GuardBlocked
from assistant.base.textform import normalise
from assistant.privacy.detector import Detector
from assistant.privacy.guard import EgressGuard, Outgoing, value_form
from assistant.privacy.placeholders import Vault
from assistant.privacy.policy import load_policy
from assistant.privacy.sanitize import sanitize


@pytest.fixture(scope="module")
def detector() -> Detector:
    return Detector()


@pytest.fixture(scope="module")
def guard(detector: Detector) -> EgressGuard:
    return EgressGuard(detector)


def sent(text: str, detector: Detector, guard: EgressGuard) -> tuple[str | None, Vault]:
    """What the real sanitize -> guard path would send for ``text`` (None: refused)."""
    vault = Vault(tag_of=load_policy().tag)
    try:
        result = sanitize(text, scanner=detector, vault=vault, guard=guard)
    except GuardBlocked:
        return None, vault
    try:  # what egress.send would do with it
        guard.check(Outgoing((result.text,), "", tuple(vault.values())))
    except GuardBlocked:
        return None, vault
    return result.text, vault


def fold(text: str) -> str:
    """The test's own normal form (not the code under test's): NFKC, case-folded,
    format characters dropped, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return " ".join(unicodedata.normalize("NFKC", text.casefold()).split())


def assert_gone(value: str, out: str | None) -> None:
    """The value is gone from what is sent, and something is sent: a guard that refused
    the question would leak nothing too, and pass a test that only looked for the value."""
    assert out is not None, "refused: sanitize left a variant that only the guard caught"
    assert fold(value) not in fold(out)
    digits = re.sub(r"\D", "", fold(value))
    if len(digits) >= 6:
        assert digits not in re.sub(r"\D", "", fold(out))


# -- the normal form ------------------------------------------------------------------------


def test_normal_form_equates_what_a_reader_cannot_tell_apart() -> None:
    from assistant.base.textform import normalise

    assert normalise("Kova\u0301cs") == normalise("KOVÁCS") == "kovács"
    assert normalise("４１１１\u200b1111") == "41111111"
    assert normalise("a\u00adb  c\n d") == "ab c d"


def test_a_view_maps_each_character_back_to_the_original() -> None:
    from assistant.base.textform import view

    text = "Kova\u0301cs 536-22-\n8471 x"
    v = view(text, join_lines=True)
    assert v.text == "Kovács 536-22-8471 x"
    start = v.text.index("536")
    assert text[slice(*v.span(start, start + 11))] == "536-22-\n8471"
    assert text[slice(*v.span(0, 6))] == "Kova\u0301cs"


def test_dates_in_any_format_are_one_date() -> None:
    from assistant.base.textform import date_spans

    (_, _, a), (_, _, b) = date_spans("03/04/1985 and 3/4/85")[:2]
    assert a & b
    assert date_spans("April 3rd, 1985")[0][2] & a
    assert not date_spans("3.14159 and 2024")  # numbers are not dates


def test_a_compact_date_is_read_only_where_asked() -> None:
    """A day written ``20260405`` (LiHuaWorld's questions) is one for the files' search;
    the privacy checks do not read eight digits as a day."""
    from assistant.base.textform import dates_in

    assert dates_in("Time: 20260405 10:00", compact=True) == {(26, 4, 5)}
    assert dates_in("April 5, 2026") == dates_in("20260405", compact=True)
    assert not dates_in("Time: 20260405 10:00")
    assert not dates_in("order 20261399", compact=True)  # no thirteenth month


# -- each numbered item ---------------------------------------------------------------------


def test_item_1_a_lower_case_surname_after_the_full_name(
    detector: Detector, guard: EgressGuard
) -> None:
    text = "Dr. Amelia Thompson prescribed warfarin. I think thompson made a mistake, what now?"
    out, _ = sent(text, detector, guard)
    assert_gone("thompson", out)
    assert (
        value_form("PERSON", "Amelia Thompson", "ask thompson", "ask thompson") == "part 'Thompson'"
    )


def test_item_1_a_common_word_in_a_name_is_not_a_leak_in_lower_case() -> None:
    assert value_form("PERSON", "Will Smith", "what will happen", "what will happen") is None
    assert value_form("PERSON", "Will Smith", "ask Will", "ask will") == "part 'Will'"


def test_item_2_decomposed_accents(detector: Detector, guard: EgressGuard) -> None:
    text = "Miklós Kovács is my landlord. Can Kova\u0301cs keep my deposit?"
    out, _ = sent(text, detector, guard)
    assert out is not None and "Kova" not in out
    all_nfd = unicodedata.normalize("NFD", "Miklós Kovács is my landlord. Can he keep it?")
    out, _ = sent(all_nfd, detector, guard)
    assert_gone("Kovács", out)
    assert_gone("Miklós", out)


@pytest.mark.parametrize(
    ("text", "value", "pieces"),
    [
        ("My SSN is 536-22-\n8471, is that valid?", "536228471", ["8471"]),
        (
            "Card 4111\u200b1111\u200b1111\u200b1111 was charged twice.",
            "4111111111111111",
            ["4111"],
        ),
        (
            "My IBAN is DE89 3704 0044\n0532 0130 00 please check it",
            "DE89370400440532013000",
            ["3704", "0044", "0532", "0130"],
        ),
        (
            "Email me at amelia.thompson@\nexample.com today",
            "amelia.thompson@example.com",
            ["amelia", "thompson", "example.com"],
        ),
    ],
)
def test_item_3_values_split_by_a_line_break_or_a_zero_width_space(
    detector: Detector, guard: EgressGuard, text: str, value: str, pieces: list[str]
) -> None:
    out, _ = sent(text, detector, guard)
    assert out is not None, "redacted, not refused"
    assert_gone(value, out)
    for piece in pieces:  # every piece of it, too
        assert fold(piece) not in fold(out), (piece, out)
    if "@" in text:  # found as what it is: one e-mail address
        assert re.fullmatch(r"Email me at <EMAIL_1> today", out), out


def test_item_4_two_letter_surnames(detector: Detector, guard: EgressGuard) -> None:
    out, _ = sent("Dr. Wei Li is my doctor. Should I ask Li about statins?", detector, guard)
    assert out is not None and not re.search(r"\bLi\b", out)
    assert value_form("PERSON", "Wei Li", "Should I ask Li?", "should i ask li?") == "part 'Li'"
    assert value_form("PERSON", "Maria de la Cruz", "de la", "de la") is None  # particles alone


def test_item_4_a_street_name_repeated_alone(detector: Detector, guard: EgressGuard) -> None:
    text = "I live at 221 Baker Street. Is Baker Street in a flood zone?"
    out, _ = sent(text, detector, guard)
    assert out is not None and "Baker" not in out
    flat = "is baker street in a flood zone?"
    assert value_form("STREET_ADDRESS", "221 Baker Street", flat, flat) == "part 'Baker Street'"


def test_item_4_a_date_of_birth_in_another_format(guard: EgressGuard) -> None:
    text = "someone born 3/4/1985"
    assert (
        value_form("DATE_OF_BIRTH", "03/04/1985", text, normalise(text)) == "date in another format"
    )
    with pytest.raises(GuardBlocked):
        guard.check(Outgoing((text,), "", (("DATE_OF_BIRTH", "03/04/1985"),)))
    vault = Vault(tag_of=load_policy().tag)
    vault.placeholder("DATE_OF_BIRTH", "03/04/1985")
    redacted = vault.redact("born March 4, 1985 or 1985-04-03?", [])
    assert "1985" not in redacted.text
    redacted = vault.redact("born on March the 4th, 1985", [])
    assert "1985" not in redacted.text


# -- property tests: any variant of a detected value ----------------------------------------

VALUES = [
    ("My SSN is {v}, is that normal?", "536-22-8471"),
    ("Call me on {v} after six.", "(555) 201-7734"),
    ("Pay with card {v} please.", "4111 1111 1111 1111"),
    ("Write to {v} about it.", "amelia.thompson@example.com"),
    ("My name is {v}. How do I renew a passport?", "Amelia Thompson"),
    ("My landlord {v} kept the deposit. Can he do that?", "Miklós Kovács"),
]


def _variant(value: str, how: str, where: int) -> str:
    cut = max(1, min(len(value) - 1, where % max(1, len(value))))
    if how == "upper":
        return value.upper()
    if how == "lower":
        return value.lower()
    if how == "nfd":
        return unicodedata.normalize("NFD", value)
    if how == "nfkc-wide":  # full-width digits and letters
        return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in value)
    if how == "zero-width":
        return value[:cut] + "\u200b" + value[cut:]
    if how == "soft-hyphen":
        return value[:cut] + "\u00ad" + value[cut:]
    if how == "line-break" and re.search(r"[\d@]", value):
        return re.sub(r"([-@ ])", r"\1\n", value, count=1)
    if how == "separators" and re.search(r"\d", value):
        return re.sub(r"[\s().-]+", ".", value).strip(".")
    return value


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    item=st.sampled_from(VALUES),
    how=st.sampled_from(
        [
            "upper",
            "lower",
            "nfd",
            "nfkc-wide",
            "zero-width",
            "soft-hyphen",
            "line-break",
            "separators",
        ]
    ),
    where=st.integers(min_value=1, max_value=40),
)
def test_no_variant_of_a_detected_value_leaves(
    detector: Detector, guard: EgressGuard, item: tuple[str, str], how: str, where: int
) -> None:
    template, value = item
    first = template.format(v=value)
    assert any(value in f.text or f.text in value for f in detector.find(first))
    text = first + " Also: " + _variant(value, how, where) + " again."
    out, _ = sent(text, detector, guard)
    assert_gone(value, out)
    assert out is not None
    for part in re.findall(r"[^\W\d_]{4,}", value):
        assert fold(part) not in fold(out)


# -- issue 47, item 11: encoded forms of a found value --------------------------------------


class NoFindings:
    """A fake detector that finds nothing: the guard's second look is left out, so what
    is judged is its comparison with the protected values alone."""

    def find(self, text: str) -> list[object]:
        return []


PROTECTED = (
    ("PERSON", "Wolfgang Schulz"),
    ("US_SSN", "536-22-8471"),
    ("EMAIL_ADDRESS", "ws.1988@mailbox.example"),
)


@pytest.mark.parametrize(
    ("outgoing", "form"),
    [
        ("See https://x.example/p?n=%57%6F%6C%66%67%61%6E%67", "percent-encoded"),
        ("See https://x.example/p?n=%2557%256F%256C%2566%2567%2561%256E%2567", "percent"),
        ("Ask W&#111;lfgang about it", "HTML character references"),
        ("Ask W&#x6F;lfgang about it", "HTML character references"),
        ("Ask W o l f g a n g about it", "letters spaced apart"),
        ("Ask W.o.l.f.g.a.n.g about it", "letters spaced apart"),
        ("The number is ५३६-२२-८४७१.", "another script's digits"),
        ("The number is ৫৩৬২২৮৪৭১.", "another script's digits"),
        ("Write to ws dot 1988 at mailbox dot example", "'dot' and 'at'"),
        ("Write to ws [dot] 1988 (at) mailbox [dot] example", "'dot' and 'at'"),
        ("See %53 c h u l z", "encoded"),
        ("The number is &#37;35&#37;33&#37;36-22-8471.", "encoded"),
        ("Ask W o l f g a n g S c h u l z about it", "letters spaced apart"),
    ],
)
def test_an_encoded_form_of_a_found_value_is_refused(outgoing: str, form: str) -> None:
    guard = EgressGuard(NoFindings())  # type: ignore[arg-type]
    with pytest.raises(GuardBlocked, match="nothing was sent") as refused:
        guard.check(Outgoing((outgoing,), "", PROTECTED))
    assert form in str(refused.value), str(refused.value)
    said = str(refused.value).lower()  # the form, never the value
    assert not [v for v in ("olfgang", "536", "1988") if v in said], said


@pytest.mark.parametrize(
    "outgoing",
    [
        "Meet at noon, then walk to the station.",
        "What does %20 mean in a URL, and what is &amp; in HTML?",
        "The U.S.A. and the U.K. signed it in १९४७.",
        "Spell it out: a b c d e f.",
    ],
)
def test_decoding_finds_nothing_in_text_without_the_values(outgoing: str) -> None:
    EgressGuard(NoFindings()).check(Outgoing((outgoing,), "", PROTECTED))  # type: ignore[arg-type]
