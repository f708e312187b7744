"""The privacy benchmark: its bundled set, its scoring, and whole runs under the socket guard."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from drag_bench import privacy as leakage
from drag_bench.make_privacy_set import DEFAULT_MMLU, generate

from tests.conftest import SocketLog, loopback_address, need_data


def test_bundled_set_shape() -> None:
    items = leakage.load_bundled()
    assert len(items) == 1200
    assert sum(i.control for i in items) == 200
    kinds = Counter(t for i in items for t, _v in i.pii)
    assert set(kinds) == {
        "PERSON",
        "ORGANIZATION",
        "EMAIL_ADDRESS",
        "PHONE_NUMBER",
        "STREET_ADDRESS",
        "US_SSN",
        "CREDIT_CARD",
        "IBAN_CODE",
        "DATE_OF_BIRTH",
        "IP_ADDRESS",
        "USERNAME",
        "SECRET",
    }
    for item in items:
        assert all(value in item.text for _t, value in item.pii), item.id


def test_generator_regenerates_the_bundled_file() -> None:
    need_data(DEFAULT_MMLU / "test")
    fresh = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in generate(DEFAULT_MMLU))
    assert fresh == leakage.bundled_path().read_text("utf-8")


def test_scoring_forms() -> None:
    item = leakage.Item(
        "x",
        "Amelia Thompson, (555) 201-7734",
        (("PERSON", "Amelia Thompson"), ("PHONE_NUMBER", "(555) 201-7734")),
    )
    body = leakage.evidence_body("Does THOMPSON know 555.201.7734?").decode()
    scored = leakage.score(item, leakage.Outcome(body))
    person, phone = scored["values"]
    old = ("type", "exact", "normalised", "partial")
    assert {k: person[k] for k in old} == {
        "type": "PERSON", "exact": False, "normalised": False, "partial": True
    }  # fmt: skip
    assert {k: phone[k] for k in old} == {
        "type": "PHONE_NUMBER", "exact": False, "normalised": False, "partial": True
    }  # fmt: skip
    # The unit scorer's verdicts, beside the guard's forms.
    assert (person["unit"], phone["unit"]) == ("token", "digits")
    assert person["category"] == "PERSON" and phone["category"] == "NUMBER"
    refused = leakage.score(item, leakage.Outcome(None))
    assert refused["blocked"] and not any(v["partial"] for v in refused["values"])


def test_scoring_ignores_the_prompts_own_words() -> None:
    # "Vide" is inside the prompt's "evidence": a leak only where the question has it.
    item = leakage.Item("x", "", (("PERSON", "Vide"),))
    clean = leakage.evidence_body("<PERSON_1>, can I speak to your boss?").decode()
    assert not leakage.score(item, leakage.Outcome(clean))["values"][0]["exact"]
    leaky = leakage.evidence_body("Vide, can I speak to your boss?").decode()
    assert leakage.score(item, leakage.Outcome(leaky))["values"][0]["exact"]


def test_other_dataset_formats(tmp_path: Path) -> None:
    generic = tmp_path / "g.jsonl"
    generic.write_text(
        '{"text": "Mail bob@example.org", "pii": ["bob@example.org"]}\n{"text": "hi"}\n'
    )
    items = leakage.load_dataset(str(generic))
    assert items[0].pii == (("UNKNOWN", "bob@example.org"),) and items[1].control
    research = tmp_path / "r.json"
    research.write_text(
        json.dumps(
            [
                {
                    "full_text": "Call Ann Lee in Paris",
                    "spans": [
                        {"entity_type": "PERSON", "entity_value": "Ann Lee"},
                        {"entity_type": "GPE", "entity_value": "Paris"},
                    ],
                }
            ]
        )
    )
    (item,) = leakage.load_dataset(str(research))
    assert item.pii == (("PERSON", "Ann Lee"),)  # places are out of scope by policy


def test_whole_run_without_teacher_opens_no_connection(
    tmp_path: Path, socket_guard: SocketLog
) -> None:
    code = leakage.main(["--limit", "8", "--no-teacher", "--out", str(tmp_path)])
    assert code == 0
    summary = json.loads((tmp_path / "privacy-summary.json").read_text())
    assert set(summary) == {"full", "presidio-default"}
    assert summary["full"]["injected"] > 20
    assert summary["full"]["leaked"]["partial"] <= summary["presidio-default"]["leaked"]["partial"]
    assert (tmp_path / "privacy-summary.md").read_text().startswith("## Privacy leakage")
    png = (tmp_path / "privacy-leakage.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    assert len((tmp_path / "privacy-items.jsonl").read_text().splitlines()) == 2 * 9
    assert socket_guard.seen == []  # a whole benchmark run: no traffic at all
    # --resume picks up the finished items instead of redoing them.
    assert leakage.main(["--limit", "8", "--no-teacher", "--out", str(tmp_path), "--resume"]) == 0
    assert len((tmp_path / "privacy-items.jsonl").read_text().splitlines()) == 2 * 9


def test_ids_run_only_the_items_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = leakage.load_dataset("bundled")
    picked = [items[3].id, items[7].id]
    args = ["--ids", ",".join(picked), "--methods", "full", "--no-teacher", "--out"]
    assert leakage.main([*args, str(tmp_path)]) == 0
    rows = [json.loads(ln) for ln in (tmp_path / "privacy-items.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(picked)
    unknown = ["--ids", "nope/1", "--methods", "full", "--no-teacher", "--out", str(tmp_path)]
    assert leakage.main(unknown) == 1
    assert "--ids: not in this split: nope/1" in capsys.readouterr().err


def test_categories_measure_the_product_as_a_user_has_set_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--categories runs the full stack with privacy.categories overrides: a firm the
    question is only about stays under the policy's contextual default and is replaced
    when the user has set organisations to strict."""
    data = tmp_path / "q.csv"
    data.write_text(
        "conversation_hash,user_query,pii_units\n0abc,What is the history of Siemens?,Siemens\n"
    )
    common = ["--dataset", str(data), "--no-teacher", "--methods", "full"]
    rates = {}
    for extra in ([], ["--categories", "ORGANIZATION=strict"]):
        out = tmp_path / f"out{len(extra)}"
        assert leakage.main([*common, "--out", str(out), *extra]) == 0
        summary = json.loads((out / "privacy-summary.json").read_text())
        rates.update({name: s["unit_leaked"] for name, s in summary.items()})
    assert rates == {"full": 1, "full ORGANIZATION=strict": 0}
    capsys.readouterr()
    for bad in ("FOO=strict", "ORGANIZATION", "ORGANIZATION=loose"):
        code = leakage.main([*common, "--out", str(tmp_path / "bad"), "--categories", bad])
        err = capsys.readouterr().err.strip()
        assert code == 1 and err.startswith("bench privacy: error: privacy.categories")
        assert "\n" not in err


@pytest.mark.integration
def test_whole_run_through_the_real_teacher(
    tmp_path: Path,
    teacher_server: str,
    teacher_env: dict[str, str],
    socket_guard: SocketLog,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The upload path for real (egress.send to llama_cpp.server): only the teacher is
    contacted, and no injected value is among the bytes written to the socket."""
    socket_guard.allowed.add(loopback_address(teacher_server))
    for key, value in teacher_env.items():
        monkeypatch.setenv(key, value)
    assert leakage.main(["--limit", "4", "--methods", "full", "--out", str(tmp_path)]) == 0
    records = [json.loads(x) for x in (tmp_path / "privacy-items.jsonl").read_text().splitlines()]
    assert len(records) == 5 and socket_guard.seen
    sent = socket_guard.sent_text()
    assert sent.count("POST /v1/chat/completions") == sum(not r["blocked"] for r in records)
    items = {i.id: i for i in leakage.load_bundled()}
    for record in records:
        for _type, value in items[record["id"]].pii:
            assert value not in sent
    # Each upload of the benchmark is in the ledger too, byte for byte.
    from assistant.store import Store, ledger

    with Store(Path(os.environ["DRAG_STORE_DATABASE"])) as store:
        rows = ledger.select(store.db)
    assert len(rows) == sent.count("POST /v1/chat/completions")
    assert all(bytes(r["request"]) in bytes(socket_guard.sent) for r in rows)


@pytest.mark.integration
def test_utility_with_and_without_pii(
    tmp_path: Path,
    teacher_server: str,
    teacher_env: dict[str, str],
    socket_guard: SocketLog,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    socket_guard.allowed.add(loopback_address(teacher_server))
    for key, value in teacher_env.items():
        monkeypatch.setenv(key, value)
    assert leakage.main(["--utility", "2", "--out", str(tmp_path)]) == 0
    rows = [json.loads(x) for x in (tmp_path / "privacy-utility.jsonl").read_text().splitlines()]
    summary = json.loads((tmp_path / "privacy-utility.json").read_text())
    assert len(rows) == summary["questions"] == 2
    assert summary["accuracy_clean"] == sum(r["clean"]["correct"] for r in rows) / 2
    flips = sum(r["clean"]["correct"] and not r["pii"]["correct"] for r in rows)
    assert summary["right_to_wrong"] == flips and 0 < summary["mcnemar_p"] <= 1
    items = {i.id: i for i in leakage.load_bundled()}
    for row in rows:  # the teacher got the sanitized text: no injected value in it
        assert row["sent"] and all(v not in row["sent"] for _t, v in items[row["id"]].pii)


def test_cached_readings_are_taken_from_the_file_by_the_same_reader_only(
    tmp_path: Path,
) -> None:
    """--reader-cache: a second run of the same reader reads nothing again; another
    reader (model or grammar) reads for itself.  The reader here is a fake that counts
    its calls: what is tested is the cache's bookkeeping."""
    from assistant.privacy.findings import Finding
    from assistant.privacy.reader import Reading

    calls: list[str] = []

    def fake_read(question: str) -> Reading:
        calls.append(question)
        start = question.index("Ada")
        return Reading([Finding("PERSON", start, start + 3, "Ada", 0.9, "reader")], 1.5, 1, 0)

    path = tmp_path / "readings.jsonl"
    first = leakage.cached_reads(fake_read, path, "0.5b fallback")
    made = first("Ask Ada about it")
    assert calls == ["Ask Ada about it"]
    again = leakage.cached_reads(fake_read, path, "0.5b fallback")("Ask Ada about it")
    assert calls == ["Ask Ada about it"] and again == made
    leakage.cached_reads(fake_read, path, "0.5b always")("Ask Ada about it")
    leakage.cached_reads(fake_read, path, "0.5b fallback")("Tell Ada")
    assert calls == ["Ask Ada about it", "Ask Ada about it", "Tell Ada"]
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"key": "a line a stopped run cut sh')  # read past, not fatal
    leakage.cached_reads(fake_read, path, "0.5b fallback")("Tell Ada")
    assert len(calls) == 3


def test_the_lihua_privacy_set_is_what_its_generator_makes() -> None:
    from drag_bench import make_lihua_privacy

    need_data(make_lihua_privacy.DEFAULT_LIHUA / "lihua_dev.csv")
    fresh = "".join(
        json.dumps(r, ensure_ascii=False) + "\n"
        for r in make_lihua_privacy.generate(make_lihua_privacy.DEFAULT_LIHUA)
    )
    assert make_lihua_privacy.DEFAULT_OUT.read_text("utf-8") == fresh


def test_a_lihua_question_names_its_people_however_they_are_written() -> None:
    from drag_bench.make_lihua_privacy import spellings, units

    names = spellings("WolfgangSchulz") | spellings("LiHua") | spellings("Sage")
    assert names == {"WolfgangSchulz", "Wolfgang Schulz", "Wolfgang", "Schulz", "LiHua",
                     "Li Hua", "Hua", "Sage"}  # fmt: skip
    assert units("Did Wolfgang Schulz call LiHua?", names) == ["Wolfgang Schulz", "LiHua"]
    assert units("What did Wolfgang and Sage eat?", names) == ["Wolfgang", "Sage"]
    assert units("Is sage a herb? Do Wolfgangs exist?", names) == []  # as words, capitalised


def test_the_lihua_text_names_set_is_what_its_generator_makes_from_the_labels() -> None:
    from drag_bench import make_lihua_privacy as make

    need_data(make.DEFAULT_LIHUA / "lihua_dev.csv")
    fresh = "".join(
        json.dumps(r, ensure_ascii=False) + "\n"
        for r in make.generate_text(make.DEFAULT_LIHUA, make.labels())
    )
    assert make.DEFAULT_TEXT_OUT.read_text("utf-8") == fresh
    # Every labelled name was one of the candidates read by hand, and none is a sender's.
    chats = make.DEFAULT_LIHUA / "LiHua-World"
    candidates, senders = make.candidates(chats), make.all_spellings(chats)
    for name in make.labels():
        words = max(make.CAPITALISED.findall(name), key=len)  # "123 Sunny Street": the street
        assert any(words in c for c in candidates), name
        assert not set(name.split()) & senders, name


def test_a_chat_line_gets_its_labelled_names_and_its_senders_names_as_units(
    tmp_path: Path,
) -> None:
    from drag_bench import make_lihua_privacy as make

    week = tmp_path / "LiHua-World" / "week1"
    week.mkdir(parents=True)
    (week / "20260101_0900.txt").write_text(
        "Time: 20260101_0900\n"
        "WolfgangSchulz: Meet me at The Java Spot, Li Hua? It is on Main St.\n"
        "LiHua: Sure, Wolfgang!\n"
        "LiHua: See you at the java spot.\n",
        encoding="utf-8",
    )
    items = make.generate_text(tmp_path, {"Java Spot": "ORG", "Main St": "LOCATION"})
    assert items == [
        {
            "id": "lihua-text-week1-20260101_0900-0",
            "text": "Meet me at The Java Spot, Li Hua? It is on Main St.",
            "pii": [
                {"type": "ORG", "value": "Java Spot"},
                {"type": "LOCATION", "value": "Main St"},
                {"type": "PERSON", "value": "Li Hua"},
            ],  # longest first
        }
    ]  # the line with only a sender's name, and the name written in lower case, are not in
    assert make.candidates(tmp_path / "LiHua-World") == {"The Java Spot": 1, "Main St": 1}


def test_learnt_from_refuses_a_file_that_is_not_a_drag_store_and_leaves_it_as_it_was(
    tmp_path: Path,
) -> None:
    import sqlite3

    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    conn.close()
    before = other.read_bytes()
    with pytest.raises(ValueError, match="not a drag store"):
        leakage.learnt_detector({}, other)
    assert other.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [
        "other.db"
    ]


def test_a_cached_reading_that_stopped_early_stays_one(tmp_path: Path) -> None:
    """A reading that stopped before the end of the text is refused by the upload path;
    taken from --reader-cache it must still say so (the cache once dropped the flag, and
    a second run sent what the first refused)."""
    from assistant.privacy.reader import Reading

    path = tmp_path / "readings.jsonl"

    def stopped(_question: str) -> Reading:
        return Reading([], 2.0, 3, 3, complete=False)

    leakage.cached_reads(stopped, path, "0.5b fallback")("Ask Ada about it")
    again = leakage.cached_reads(stopped, path, "0.5b fallback")

    def never(_question: str) -> Reading:
        raise AssertionError("read again: the cache missed")

    reading = leakage.cached_reads(never, path, "0.5b fallback")("Ask Ada about it")
    assert reading is not None and reading.complete is False
    assert again is not None


def test_units_the_rule_calls_public_are_counted_apart_and_listed() -> None:
    """The figures without the public units (a listed company, a well-known platform)
    sit beside those with every unit, and the public units are named (issue 48)."""
    item = leakage.Item(
        "x",
        "I sell on Etsy as moonfern, and my broker holds Oracle Corporation",
        (("ORG", "Etsy"), ("ORG", "moonfern"), ("ORG", "Oracle Corporation")),
    )
    body = leakage.evidence_body("I sell on Etsy as <ORG_1>, my broker holds Oracle Corporation")
    summary = leakage.summarise([leakage.score(item, leakage.Outcome(body.decode()))])
    assert summary["units"] == 3 and summary["unit_leaked_whole"] == 2
    assert summary["public_units"] == ["Etsy", "Oracle Corporation"]
    assert summary["without_public"]["units"] == 1
    assert summary["without_public"]["unit_leaked_whole"] == 0
    assert "without the 2 public units" in leakage.render({"full": summary}, "t")


def test_a_reading_that_fails_is_refused_and_its_time_is_counted() -> None:
    """A question the reader could not read is refused, and the seconds it spent are in
    its record, so that the reader's p50 and p95 count every question (issue 48: the two
    slowest long pastes once had no time).  The reader is a fake that works 50 ms (by
    the clock, no sleep) and then fails."""
    import time

    from drag_bench.privacy.datasets import Item
    from drag_bench.privacy.methods import make_full

    from assistant.base.errors import PrivacyError
    from assistant.privacy.detector import Detector

    def fake_failing_read(question: str) -> None:
        until = time.perf_counter() + 0.05
        while time.perf_counter() < until:
            pass
        raise PrivacyError("the local reader stopped before the end of the question")

    run = make_full(Detector(), None, read=fake_failing_read)
    outcome = run(Item("q1", "Ask Ada Lovelace about it", (("PERSON", "Ada Lovelace"),)))
    assert outcome.sent is None and "stopped before the end" in outcome.note
    assert outcome.seconds["read"] >= 0.05
