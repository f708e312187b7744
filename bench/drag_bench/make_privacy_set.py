"""Generate the bundled privacy-leakage set: MMLU questions with synthetic PII.

Each item puts one or two natural sentences full of Faker-made personal data in
front of an MMLU test question (as in the DRAG paper's App. G example: "Dr.
Amelia Thompson, who wrote an article on amino acid metabolism for Biochem
Review, can be contacted at athompson93@..."), and stores every injected
value with its type.  A control part holds MMLU questions with no PII.

Seeded: the same seed, MMLU copy and Faker version give the same file
(tests/test_privacy_bench.py checks the committed file against a fresh run).

    python -m drag_bench.make_privacy_set --mmlu ../shared/data/mmlu
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import string
import sys
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).with_name("data") / "privacy_mmlu.jsonl"
DEFAULT_MMLU = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "mmlu"
SEED = 2506_01954
AS_OF = date(2026, 11, 22)  # dates of birth are drawn as ages on this day
LABELS = "ABCD"

Value = tuple[str, str]  # (entity type, value)
TOPICS = [
    "amino acid metabolism", "tax law", "medieval trade", "soil chemistry",
    "graph theory", "cardiac surgery", "early childhood education",
]  # fmt: skip


class Maker:
    """Faker-based values, each returned with its entity type."""

    def __init__(self, seed: int) -> None:
        from faker import Faker

        self.rng = random.Random(seed)
        self.fake = Faker("en_US")
        self.fake.seed_instance(seed)

    def pick(self, options: list[str]) -> str:
        return options[self.rng.randrange(len(options))]

    def person(self) -> tuple[str, str, str]:
        first, last = self.fake.first_name(), self.fake.last_name()
        return first, last, f"{first} {last}"

    def email(self, first: str, last: str) -> str:
        local = self.pick(
            [
                f"{first[0]}{last}",
                f"{first}.{last}",
                f"{last}{self.rng.randint(1, 99)}",
                f"{first}{last[0]}{self.rng.randint(10, 99)}",
            ]
        ).lower()
        return f"{local}@{self.fake.free_email_domain()}"

    def phone(self) -> str:
        a, b, c = (
            self.rng.randint(201, 989),
            self.rng.randint(200, 999),
            self.rng.randint(1000, 9999),
        )
        return self.pick([f"({a}) {b}-{c}", f"{a}-{b}-{c}", f"+1 {a} {b} {c}", f"{a}.{b}.{c}"])

    def card(self) -> str:
        digits = self.fake.credit_card_number(
            card_type=self.pick(["visa16", "mastercard", "discover"])
        )
        if self.rng.random() < 0.5:
            return " ".join(digits[i : i + 4] for i in range(0, len(digits), 4))
        return digits

    def dob(self) -> str:
        # Faker's date_of_birth(minimum_age=18, maximum_age=90) counts back from today,
        # so the file would change every day: the same draw, counted from a fixed day.
        start, end = AS_OF.replace(year=AS_OF.year - 91), AS_OF.replace(year=AS_OF.year - 18)
        d = self.fake.date_time_ad(start_datetime=start, end_datetime=end).date()
        d = d if d != start else d + timedelta(days=1)
        return self.pick([d.strftime("%m/%d/%Y"), d.strftime("%B %d, %Y"), d.isoformat()])

    def secret(self) -> tuple[str, str]:
        alnum = string.ascii_letters + string.digits
        kind = self.rng.randrange(4)
        if kind == 0:
            return "API key", "sk-" + "".join(self.rng.choice(alnum) for _ in range(40))
        if kind == 1:
            return "GitHub token", "ghp_" + "".join(self.rng.choice(alnum) for _ in range(36))
        if kind == 2:
            upper = string.ascii_uppercase + string.digits
            return "AWS key", "AKIA" + "".join(self.rng.choice(upper) for _ in range(16))
        return "password", self.fake.password(length=12, special_chars=False)


def _templates(m: Maker) -> list[Callable[[], tuple[str, list[Value]]]]:
    def contact() -> tuple[str, list[Value]]:
        first, last, name = m.person()
        email, phone, org = m.email(first, last), m.phone(), m.fake.company()
        topic = m.pick(TOPICS)
        title = m.pick(["Dr.", "Prof.", "Mr.", "Ms."])
        text = (
            f"{title} {name}, who wrote an article on {topic} for {org}, "
            f"can be contacted at {email} or {phone}."
        )
        return text, [
            ("PERSON", name),
            ("ORGANIZATION", org),
            ("EMAIL_ADDRESS", email),
            ("PHONE_NUMBER", phone),
        ]

    def home() -> tuple[str, list[Value]]:
        _f, _l, name = m.person()
        address, ssn = m.fake.street_address(), m.fake.ssn()
        text = f"My name is {name} and I live at {address}. My SSN is {ssn}, in case you need it."
        return text, [("PERSON", name), ("STREET_ADDRESS", address), ("US_SSN", ssn)]

    def billing() -> tuple[str, list[Value]]:
        _first, _last, name = m.person()
        user, dob, card = m.fake.user_name(), m.dob(), m.card()
        text = (
            f"I'm {name} (username {user}), born on {dob}; "
            f"please charge my card {card} for the tutoring session."
        )
        return text, [
            ("PERSON", name),
            ("USERNAME", user),
            ("DATE_OF_BIRTH", dob),
            ("CREDIT_CARD", card),
        ]

    def refund() -> tuple[str, list[Value]]:
        first, last, name = m.person()
        org, iban, email = m.fake.company(), m.fake.iban(), m.email(first, last)
        text = f"This is {name} from {org}. Wire the refund to IBAN {iban} and email me at {email}."
        return text, [
            ("PERSON", name),
            ("ORGANIZATION", org),
            ("IBAN_CODE", iban),
            ("EMAIL_ADDRESS", email),
        ]

    def server() -> tuple[str, list[Value]]:
        _f, _l, name = m.person()
        ip = m.pick([m.fake.ipv4_public(), m.fake.ipv4_private()])
        kind, secret = m.secret()
        phone = m.phone()
        text = (
            f"Our lab server at {ip} keeps rejecting my {kind} {secret}; "
            f"if it matters, ask {name} on {phone}."
        )
        return text, [
            ("IP_ADDRESS", ip),
            ("SECRET", secret),
            ("PERSON", name),
            ("PHONE_NUMBER", phone),
        ]

    def shouting() -> tuple[str, list[Value]]:
        _f, _l, name = m.person()
        user = "@" + m.fake.user_name()
        _kind, secret = m.secret()
        text = (
            f"{name.upper()} HERE ({user} on the forum). "
            f"My password is {secret} if you need to log in."
        )
        return text, [("PERSON", name.upper()), ("USERNAME", user), ("SECRET", secret)]

    def letter() -> tuple[str, list[Value]]:
        first, last, name = m.person()
        email, address, dob = m.email(first, last), m.fake.street_address(), m.dob()
        text = f"Please reply to {email}. I am {name}, {address}, date of birth {dob}."
        return text, [
            ("EMAIL_ADDRESS", email),
            ("PERSON", name),
            ("STREET_ADDRESS", address),
            ("DATE_OF_BIRTH", dob),
        ]

    def colleague() -> tuple[str, list[Value]]:
        _f, last, name = m.person()
        org, card = m.fake.company(), m.card()
        text = (
            f"Prof. {name} from {org} asked me to check this; {last} says the answer is obvious. "
            f"(Card for the course fee: {card}.)"
        )
        return text, [("PERSON", name), ("ORGANIZATION", org), ("CREDIT_CARD", card)]

    return [contact, home, billing, refund, server, shouting, letter, colleague]


def load_mmlu(root: Path) -> list[dict[str, Any]]:
    items = []
    for path in sorted((root / "test").glob("*_test.csv")):
        subject = path.name.removesuffix("_test.csv")
        with path.open(newline="", encoding="utf-8") as fh:
            for n, row in enumerate(csv.DictReader(fh)):
                items.append(
                    {
                        "id": f"mmlu/{subject}/{n}",
                        "subject": subject,
                        "question": row["question"],
                        "choices": [row[f"choice{i}"] for i in range(4)],
                        "answer": LABELS[int(row["answer"])],
                    }
                )
    return items


def with_options(question: str, choices: list[str]) -> str:
    return "\n".join([question.strip(), *(f"{LABELS[i]}. {c}" for i, c in enumerate(choices))])


def generate(
    mmlu: Path, *, size: int = 1000, control: int = 200, seed: int = SEED
) -> list[dict[str, Any]]:
    maker = Maker(seed)
    pool = load_mmlu(mmlu)
    picked = random.Random(seed).sample(pool, size + control)
    templates = _templates(maker)
    out = []
    for n, item in enumerate(picked):
        record: dict[str, Any] = dict(item)
        if n < size:
            sentence, values = templates[n % len(templates)]()
            record.update(pii_text=sentence, pii=[{"type": t, "value": v} for t, v in values])
        else:
            record.update(pii_text="", pii=[])
        out.append(record)
    return out


def clean_text(record: dict[str, Any]) -> str:
    """The MMLU question with its options, as the student and the teacher see it."""
    return with_options(record["question"], record["choices"])


def full_text(record: dict[str, Any]) -> str:
    """The question as a user would type it: the personal sentence, then the question."""
    prefix = record.get("pii_text") or ""
    return f"{prefix}\n{clean_text(record)}" if prefix else clean_text(record)


PROVENANCE = {
    "source": (
        "MMLU test split (Hendrycks et al. 2021), "
        "via HaeChan0305/MLILAB-FedLLM @ d92730e : data/mmlu/test"
    ),
    "license": "MMLU: MIT; synthetic PII made with Faker",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mmlu", type=Path, default=DEFAULT_MMLU)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--control", type=int, default=200)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    if not (args.mmlu / "test").is_dir():
        print(
            f"make_privacy_set: error: no MMLU copy at {args.mmlu} (give --mmlu)", file=sys.stderr
        )
        return 2
    items = generate(args.mmlu, size=args.size, control=args.control, seed=args.seed)
    with args.out.open("w", encoding="utf-8") as fh:
        for item in items:
            fh.write(json.dumps(item, ensure_ascii=False) + "\n")
    print(f"wrote {len(items)} items to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
