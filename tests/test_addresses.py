"""Street addresses as other countries write them in Latin letters (issue 48): the
street word first ("Via Roma 45"), after the number ("9 rue de l’artisanat"), joined to
the name ("Hauptstraße 5") or apart, a postcode and town after it.  Text in a script the
detector cannot read is marked unread, for the local reader.  The real detector
(Presidio, spaCy, the policy's patterns)."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pytest
import regex

from assistant.privacy.detector import Detector
from assistant.privacy.findings import Finding
from assistant.privacy.policy import load_policy
from tests.conftest import LINEAR_AT_MOST, linear_growth, need_data


@pytest.fixture(scope="module")
def detector() -> Detector:
    return Detector()


def addresses(findings: list[Finding]) -> list[str]:
    return [f.text for f in findings if f.entity == "STREET_ADDRESS"]


@pytest.mark.parametrize(
    ("text", "address"),
    [
        # The seen half's miss (PUPA-TNB/122), a firm's address in a French tender.
        (
            "Immeuble A, 9 rue de l’artisanat- Z.I la Charguia II -2035 Tunis Carthage »",
            "9 rue de l’artisanat- Z.I la Charguia II -2035 Tunis Carthage",
        ),
        ("My flat is at 14 avenue Jean Jaurès, 69007 Lyon.", "14 avenue Jean Jaurès, 69007 Lyon"),
        ("We met at 12 rue Cler during my trip.", "12 rue Cler"),
        ("Write to me at Hauptstraße 5, 10115 Berlin.", "Hauptstraße 5, 10115 Berlin"),
        ("Our office: Via Roma 45, 00184 Roma.", "Via Roma 45, 00184 Roma"),
        ("Ship it to Rua Augusta 100, Lisboa.", "Rua Augusta 100"),
        ("Deliver to Avenida Paulista 1578, São Paulo.", "Avenida Paulista 1578"),
        ("Send it to Calle de Alcalá 20 please.", "Calle de Alcalá 20"),
        ("The address is Kungsgatan 12, 111 43 Stockholm.", "Kungsgatan 12, 111 43 Stockholm"),
        ("Prinsengracht 263, 1016 GV Amsterdam", "Prinsengracht 263, 1016 GV Amsterdam"),
        ("ul. Marszałkowska 10, 00-590 Warszawa", "ul. Marszałkowska 10, 00-590 Warszawa"),
        ("Karl Johans gate 5, 0154 Oslo", "Karl Johans gate 5, 0154 Oslo"),
        ("She moved to Berliner Straße 12 in May.", "Berliner Straße 12"),
        ("Meet me outside Váci utca 5, Budapest", "Váci utca 5"),
        ("Jl. Sudirman No. 5, Jakarta", "Jl. Sudirman No. 5"),
        ("Carrera 7 # 71-21, Bogotá", "Carrera 7 # 71-21"),
        ("Our office is at Otto-Hahn-Straße 5 now.", "Otto-Hahn-Straße 5"),
        ("Prinsengracht 263A, 1016 GV Amsterdam", "Prinsengracht 263A, 1016 GV Amsterdam"),
        ("Rua Augusta 100, 1100-053 Lisboa", "Rua Augusta 100, 1100-053 Lisboa"),
        # Brazil's postcode (five digits, a dash, three), as the other street forms read it.
        ("Rua Augusta 100, 01310-100 São Paulo", "Rua Augusta 100, 01310-100 São Paulo"),
        ("Alameda Santos 200, 01418-000 São Paulo", "Alameda Santos 200, 01418-000 São Paulo"),
        ("Kungsgatan 12 B, 111 43 Stockholm", "Kungsgatan 12 B, 111 43 Stockholm"),
        ("Via Garibaldi 12, Milano", "Via Garibaldi 12"),
        ("We met at 12 rue Cler. Then we left.", "12 rue Cler"),
        ("Hauptstraße 5, 10115 Berlin Mitte today", "Hauptstraße 5, 10115 Berlin Mitte"),
        # MoreStreetFormsRecognizer: the forms the review of the above found sent whole.
        ("Send it to Chaussée de Wavre 12, 1050 Ixelles.", "Chaussée de Wavre 12, 1050 Ixelles"),
        ("Our flat: Rue de Rivoli 99", "Rue de Rivoli 99"),
        ("Rue de la Loi 16, 1000 Bruxelles", "Rue de la Loi 16, 1000 Bruxelles"),
        ("Rue Neuve 123, 1000 Bruxelles", "Rue Neuve 123, 1000 Bruxelles"),
        ("Quai du Mont-Blanc 19, 1201 Genève", "Quai du Mont-Blanc 19, 1201 Genève"),
        ("Avenue Louise 54, 1050 Bruxelles", "Avenue Louise 54, 1050 Bruxelles"),
        ("Boulevard Anspach 1, 1000 Bruxelles", "Boulevard Anspach 1, 1000 Bruxelles"),
        ("Rue de la Loi 16 bte 3, 1000 Bruxelles", "Rue de la Loi 16 bte 3, 1000 Bruxelles"),
        ("Plaza Mayor 1, 28012 Madrid", "Plaza Mayor 1, 28012 Madrid"),
        ("Carrer de Mallorca 401\nBarcelona", "Carrer de Mallorca 401"),
        ("Calea Victoriei nr. 155, București", "Calea Victoriei nr. 155"),
        ("Av. Chapultepec Núm. 480\n", "Av. Chapultepec Núm. 480"),
        ("Av. Vallarta Num. 1234, Guadalajara", "Av. Vallarta Num. 1234"),
        ("Av. da Liberdade 110, 1250-146 Lisboa", "Av. da Liberdade 110, 1250-146 Lisboa"),
        ("Calle 5 de Febrero s/n", "Calle 5 de Febrero s/n"),
        ("Vestergade 12, 2. th., 1456 København K", "Vestergade 12, 2. th., 1456 København K"),
        ("Kalliotie 8 C 21, 00200 Helsinki", "Kalliotie 8 C 21, 00200 Helsinki"),
        ("Rantatie 5\n", "Rantatie 5"),
        ("Str. Lipscani nr. 5, București", "Str. Lipscani nr. 5"),
        ("Bd. Unirii nr. 12 is my address", "Bd. Unirii nr. 12"),
        ("Av. Juárez #45, Ciudad de México", "Av. Juárez #45"),
        ("Av. Reforma No. 222, Ciudad de México", "Av. Reforma No. 222"),
        ("Calle 5 de Mayo 32, Puebla", "Calle 5 de Mayo 32"),
        ("Rua 25 de Março 100", "Rua 25 de Março 100"),
        ("Vestergade 12, 1456 København K", "Vestergade 12, 1456 København K"),
        ("Nørregade 7\nKøbenhavn", "Nørregade 7"),
        ("Mannerheimintie 5, 00100 Helsinki", "Mannerheimintie 5, 00100 Helsinki"),
        # From the review of 2026-12-07: a short name before the street word, Brazil's
        # comma before the number and the neighbourhood after it.
        ("Itäväylä 5\n", "Itäväylä 5"),
        ("Algade 3, 9000 Aalborg", "Algade 3, 9000 Aalborg"),
        ("Av. Paulista, 1578 - Bela Vista, São Paulo", "Av. Paulista, 1578 - Bela Vista"),
        ("Alameda Santos, 2100 – Jardim Paulista - SP", "Alameda Santos, 2100 – Jardim Paulista"),
        ("Av. Paulista, 1578, 01310-200 São Paulo", "Av. Paulista, 1578, 01310-200 São Paulo"),
        ("Rua Augusta, 500 – Consolação.", "Rua Augusta, 500 – Consolação"),
    ],
)
def test_a_street_as_its_country_writes_it_is_an_address(
    detector: Detector, text: str, address: str
) -> None:
    assert addresses(detector.find(text)) == [address]


@pytest.mark.parametrize(
    "text",
    [
        "It covers 5 square miles of land.",
        "I sent 3 via email yesterday.",
        "Via Amazon 2 packages arrived today.",
        "In 2020 Berlin was quiet.",
        "She finished in 10 place overall.",
        "Take 2 routes to work, or Route 66.",
        "Watergate 5 was a scandal, Highway 61 a record.",
        "The Corso 3 was sold out.",
        "Ronda Rousey 2 fights a year, a Carrera 4 on the track.",
        # From an adversarial review: a sentence's end after the number, English street
        # words in capitals, words that end as a street word does.
        "Via Lemma 2, the sum converges.",
        "Install it Via Python 3.11 today.",
        "Ronda Rousey 2.",
        "The patient: Av. Age 45 years.",
        "Real Madrid won 3 Av. Goals per game.",
        "Top 5 Avenue Restaurants in NYC",
        "Chapter 3 Boulevard Of Broken Dreams",
        "Departure Gate 12 is closed.",
        "Connect the NAND gate 2 inputs.",
        "Aligned with Bowtie 2, the Brigade 2 attacked, Blockade 3.",
        "Instr. 3 plays the melody, Version Str. 2",
        # Look-alikes of MoreStreetFormsRecognizer's forms.
        "Rue McClanahan 5 episodes were filmed.",
        "Rue the day 5 times over.",
        "Avenue Q 2 tickets, please.",
        "Boulevard Of Broken Dreams 3 times",
        "Impasse 2, the sequel.",
        "Av. Temp No. 3 was low.",
        "Cinco de Mayo 5 times",
        "The Brigade 2\nRenegade 3\nNecktie 3",
        "Cutie 3\nAuntie 2, Nora said",
        # From a second review of MoreStreetFormsRecognizer: a year, a count after the
        # number, a list of names and scores, a title, a string quartet, a volume.
        "the Chemin des Dames 1917 offensive",
        "Wine list:\nChemin des Rois 2015, Bordeaux",
        "Why did the Quai d'Orsay 2 weeks later protest?",
        "In Chemin De Fer 6 decks are used",
        "Emmy nominations: Rue McClanahan 5, Betty White 21",
        "Scores so far:\nRue Smith 12\nTom Jones 9",
        "Tony wins: Avenue Q 3, Wicked 3",
        "Which won an Oscar?\nBoulevard Nights 1979\nGrease 1978",
        "Beer flight: Boulevard Tank 7, Sierra Nevada",
        "Rue McClanahan 1934–2010 American actress",
        "Beethoven's Str. Quartet No. 14",
        "Team stats: Av. Rating #1 in the league",
        "Av. Goals No. 2, Messi is first",
        "Zeitschrift für Physik, Bd. XII, Nr. 4",
        "Calle 13 de Marzo 2020 album",
        "Who won the Open at Carnoustie 2018, Molinari or Woods?",
        "Jets secondary: Revis 24, Cromartie 31, Pace 97",
        "Everton strikers: Beattie 9, Yakubu 22",
        "Dog show results:\nSheltie 2\nCorgi 5",
        "Mountie 4, Cowboy 3",
        "Khobragade 5, Sharma 3",
        "Informatie 2\nLocatie 3",
        "The Fire-Brigade 2\nLight-Brigade 3",
        "Agatha Christie 1920, Poirot",
        "Route du Rhum 2018 winners",
        # From the review of those forms: "Av." an average, Alameda a county, a firm.
        "Team stats: Av. Rating, 4.5 stars",
        "Season high:\nAv. Goals, 1999",
        "Av. Rating, 4",
        "Team stats\nAv. Points, 23\nAv. Rebounds, 11\n",
        "Top scorer: Av. Goals, 3 - Liverpool.",
        "Av. Points, 102 - Lakers, 98 - Celtics",
        "Mean (Av. Score, 85 - Excellent)",
        "County cases:\nAlameda County, 312\n",
        "Nurse, Alameda Health System, 2016 - Present\n",
        "Analyst at Estrada Partners, 2019 - Present.",
    ],
)
def test_words_that_only_look_like_a_street_are_no_address(detector: Detector, text: str) -> None:
    assert addresses(detector.find(text)) == []


def test_the_benchmark_can_measure_the_detector_without_these_streets() -> None:
    """`drag bench privacy --without world-streets`: the same policy less these patterns."""
    from drag_bench.privacy import without_part

    without = Detector(policy=without_part("world-streets"))
    text = "Send it to Calle de Alcalá 20, or to 742 Evergreen Terrace."
    assert addresses(without.find(text)) == ["742 Evergreen Terrace"]
    assert addresses(Detector().find(text)) == ["Calle de Alcalá 20", "742 Evergreen Terrace"]
    fewer = Detector(policy=without_part("more-streets"))
    text = "Send it to Rue de la Loi 16, 1000 Bruxelles, or to Calle de Alcalá 20."
    assert addresses(fewer.find(text)) == ["Calle de Alcalá 20"]
    assert addresses(Detector().find(text)) == [
        "Rue de la Loi 16, 1000 Bruxelles",
        "Calle de Alcalá 20",
    ]


SHARED = Path(__file__).parents[2] / "shared" / "data"


STREET_RECOGNIZERS = ("WorldStreetAddressRecognizer", "MoreStreetFormsRecognizer")


def _street_patterns() -> list[regex.Pattern[str]]:
    """The policy's patterns of both street recognizers, compiled as Presidio does."""
    streets = [r for r in load_policy().recognizers if r["name"] in STREET_RECOGNIZERS]
    assert len(streets) == len(STREET_RECOGNIZERS)
    flags = regex.IGNORECASE | regex.MULTILINE | regex.DOTALL  # Presidio's
    return [regex.compile(p["regex"], flags) for r in streets for p in r["patterns"]]


def _question_sets() -> Iterator[str]:
    """Every text of the question sets and chats beside the checkout, none an address:
    ARC-Challenge's test questions, MedMCQA's validation questions, every MMLU question
    (dev and test) and LiHuaWorld's chats."""
    for name in ("arc/arc_challenge_test.jsonl", "medmcqa/validation.jsonl"):
        with need_data(SHARED / name).open(encoding="utf-8") as handle:
            yield from handle
    for path in sorted(need_data(SHARED / "mmlu").glob("*/*.csv")):
        with path.open(encoding="utf-8", newline="") as handle:
            yield from (" ".join(row) for row in csv.reader(handle))
    for path in sorted(need_data(SHARED / "lihuaworld" / "LiHua-World").rglob("*.txt")):
        yield path.read_text("utf-8")


def test_no_street_of_these_patterns_is_in_twenty_thousand_questions_and_chats() -> None:
    """The words these patterns ask for ("Via", "square", a number before a name) are in
    questions about anything; a street as they read it is not (docs/benchmarks.md)."""
    patterns = _street_patterns()
    texts = list(_question_sets())
    assert len(texts) > 20_000
    found = [m.group() for t in texts for p in patterns for m in p.finditer(t)]
    assert found == []


# Texts made to make a pattern try again and again (a name's words that read two ways,
# a word that a pattern could start again inside), each an expression of K as
# conftest.linear_growth builds them: about 20,000 characters whole.  A first version's
# patterns took seconds (a name starting after any dot or hyphen) or minutes (repeats
# nested in repeats) on such texts.
_HOSTILE = {
    "elided articles": "\"1 rue D'A D'A D'A D'A D'A D'A D'A x \" * (550 // K)",
    "capitals": '("Via " + "Aa " * 50 + "x ") * (130 // K)',
    "joined words": '("Aaaa" + "weg" * 5 + " ") * (1000 // K)',
    "dots": '"A." * (10_000 // K)',
    "hyphens": '"A-" * (10_000 // K)',
    "apostrophes": '"A\'" * (10_000 // K)',
    "dots and hyphens": '"Ab.Cd-" * (3_300 // K)',
    "articles": '("Rue " + "de " * 7 + "Aa ") * (1400 // K)',
    "number marks": '("Str. " + "Aa " * 5 + "No. ") * (1000 // K)',
    "joined street words": '("Aaaa" + "tie" * 5 + " 5 ") * (1000 // K)',
}


@pytest.mark.parametrize("name", sorted(_HOSTILE))
def test_no_street_pattern_backtracks_on_a_text_made_for_it(name: str) -> None:
    whole, pieces = linear_growth(
        "from tests.test_addresses import _street_patterns\npatterns = _street_patterns()",
        "for p in patterns: list(p.finditer(text))",
        _HOSTILE[name],
    )
    assert whole <= LINEAR_AT_MOST * pieces, (name, whole, pieces)


@pytest.mark.parametrize(
    "text",
    [
        "Москва, ул. Тверская, д. 7, кв. 12",
        "地址：北京市朝阳区建国路88号",
        "住所：東京都千代田区丸の内1-1-1です",
        "서울특별시 강남구 테헤란로 152 에서 만나요",
        "العنوان: شارع التحرير رقم 5",
    ],
)
def test_a_street_in_a_script_the_detector_cannot_read_is_left_to_the_reader(
    detector: Detector, text: str
) -> None:
    """Not one of these patterns: the text is marked unread, so it goes only once the
    local reader has read it (or the user, at review)."""
    assert detector.unreadable(text)
