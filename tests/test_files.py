"""Reading, cutting and scoring the user's own files: pure logic, no model.

The index and the answers with the real spaCy, ONNX Runtime, SQLite and llama.cpp are
in tests/test_files_integration.py."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from drag_bench.localdocs import evidence_times, load_questions, part_of
from drag_bench.localdocs.scoring import content_words, score

from assistant.files import chunks, readers
from assistant.privacy.entities import name_key, name_parts, personal, spellings
from tests.conftest import need_data

CHAT = (
    "Time: 20260105_11:00\nLiHua: Lunch on the 8th?\n"
    "WolfgangSchulz: Yes! Here is the plan:\n1. noodles\n2. a walk\n"
)


def test_a_chat_export_reads_as_messages_with_sender_and_time() -> None:
    units = readers.chat_units(CHAT)
    assert units is not None
    assert [(u.speaker, u.time) for u in units] == [
        ("LiHua", "2026-01-05 11:00"),
        ("WolfgangSchulz", "2026-01-05 11:00"),
    ]
    # A numbered list goes on the message it belongs to.
    assert units[1].text == "Yes! Here is the plan:\n1. noodles\n2. a walk"


def test_prose_with_a_label_or_two_is_not_a_chat() -> None:
    text = "Notes from Tuesday.\nSummary: we agreed.\nThe rest of the day was quiet.\nMore prose.\n"
    assert readers.chat_units(text) is None


def test_labels_are_no_senders_and_nothing_above_a_chat_is_lost() -> None:
    """Meeting notes and READMEs write "Label: text" on every line: their labels are not
    people (a sender's name is learnt as a person's), so the file is prose.  A title
    above a chat export is kept; a long Time: line is no sender called Time."""
    notes = "Date: Monday\nAttendees: Ana, Bo\nDecision: ship it\nAction: Bo writes the plan\n"
    assert readers.chat_units(notes) is None
    readme = "Note: run it twice.\nWarning: it is slow.\nTip: use two cores.\n"
    assert readers.chat_units(readme) is None
    export = (
        "Family group export, January\nTime: 2026-01-05 10:00\nA note before anyone wrote.\n"
        "Alice: I will draft the plan.\nTime: 2026-01-05 10:00 in the evening, after dinner\n"
    )
    units = readers.chat_units(export)
    assert units is not None
    assert [(u.speaker, u.text) for u in units] == [
        ("", "Family group export, January\nA note before anyone wrote."),
        ("Alice", "I will draft the plan.\nTime: 2026-01-05 10:00 in the evening, after dinner"),
    ]
    # Speakers named A and B are speakers; so is a person called Price.
    units = readers.chat_units("Alice: dinner?\nPrice: yes, at 8\nAlice: fine\nPrice: see you\n")
    assert units is not None and [u.speaker for u in units] == ["Alice", "Price"] * 2
    units = readers.chat_units("A: hi there\nB: hello\nA: lunch?\n")
    assert units is not None and [u.speaker for u in units] == ["A", "B", "A"]


def test_a_chunk_keeps_whole_messages_and_never_joins_two_chat_times(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    long = "word " * 300
    path.write_text(
        f"Time: 20260105_11:00\nAmy: {long}\nBo: short\nTime: 20260106_09:00\nAmy: next day\n"
    )
    doc = readers.read(path)
    cut = chunks.chunk(doc, limit=800)
    assert doc.kind == "chat"
    assert all(len(c.text) <= 800 for c in cut)
    assert {c.time for c in cut} == {"2026-01-05 11:00", "2026-01-06 09:00"}
    assert cut[-1].text == "Amy: next day" and cut[-1].speakers == ("Amy",)
    # The long message is cut at spaces; nothing is lost.
    assert "".join(c.text for c in cut if c.time.startswith("2026-01-05")).count("word") == 300


def test_an_email_reads_its_sender_subject_and_body(tmp_path: Path) -> None:
    path = tmp_path / "m.eml"
    path.write_bytes(
        b"From: Ana Ruiz <ana@example.org>\r\nSubject: Keys\r\nDate: Tue, 3 Mar 2026 10:00:00 +0000"
        b"\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>The keys are with <b>Tom</b>.</p>"
        b"<script>alert(1)</script>"
    )
    doc = readers.read(path)
    assert doc.kind == "email"
    assert doc.units[0].text == "E-mail from Ana Ruiz <ana@example.org>: Keys"
    assert [u.text for u in doc.units[1:]] == ["The keys are with Tom."]
    assert doc.units[1].time == "2026-03-03 10:00"


@pytest.mark.parametrize(
    ("markup", "text"),
    [
        ("<div>a &amp; b</div>c<br/>d", "\n\na & b\n\nc\nd"),
        ("x<!-- hidden -->y<!-- never closed <p>z", "xy"),
        ("<SCRIPT type=x>bad()</script >ok<style>p {}</STYLE>!", "ok!"),
        ("<script>never closed", ""),
        ("1 < 2 and 3 > 2", "1 < 2 and 3 > 2"),  # a "<" that opens no tag is text
        ("a <b and no end", "a <b and no end"),
        ('<a title="x">link</a> &#233;t&eacute;', "link été"),
        # Inputs on which Python's html.parser takes quadratic time: read in one pass.
        ("<a " * 20000, "<a " * 20000),
        ("t" + "<!--" * 20000, "t"),
        ('<a b="' * 20000, '<a b="' * 20000),
    ],
)
def test_an_html_body_is_read_as_text_in_one_pass(markup: str, text: str) -> None:
    assert readers._html_text(markup) == text


def test_an_e_mail_header_of_thousands_of_encoded_words_is_read_cut_in_little_memory() -> None:
    """Python's header parser takes memory quadratic in a value's encoded words (8,000 of
    them took 0.9 GB): values are cut before they are parsed.  Peak Python memory while
    reading 4,000 (56 KB), which took about 230 MB uncut."""
    import tracemalloc

    raw = ("From: " + "=?utf-8?q?a?= " * 4000 + "<a@x.example>\nSubject: s\n\nThe body.\n").encode()
    tracemalloc.start()
    try:
        document = readers.read(Path("huge-header.eml"), raw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * 1024 * 1024, peak
    assert (
        document.units[0].text.startswith('E-mail from "a a a')
        and len(document.units[0].text) < 200
    )
    assert [u.text for u in document.units[1:]] == ["The body."]


def test_a_mailbox_reads_every_message(tmp_path: Path) -> None:
    path = tmp_path / "box.mbox"
    path.write_text(
        "From a@x Mon Jan  1 00:00:00 2026\nFrom: A <a@x.org>\nSubject: one\n\nfirst body\n\n"
        "From b@x Mon Jan  1 00:00:00 2026\nFrom: B <b@x.org>\nSubject: two\n\nsecond body\n"
    )
    texts = [u.text for u in readers.read(path).units]
    assert texts == [
        "E-mail from A <a@x.org>: one",
        "first body",
        "E-mail from B <b@x.org>: two",
        "second body",
    ]


def _pdf_of(objects: list[bytes]) -> bytes:
    """A PDF of ``objects`` (numbered from 1, the catalog first), its cross-reference
    table computed."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def _pdf(text: str) -> bytes:
    """A one-page PDF with ``text`` in Helvetica, its cross-reference table computed."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return _pdf_of(objects)


def test_a_pdf_reads_its_text_with_the_page(tmp_path: Path) -> None:
    path = tmp_path / "letter.pdf"
    path.write_bytes(_pdf("The lease ends in May."))
    doc = readers.read(path)
    assert doc.kind == "pdf"
    assert [(u.text, u.page) for u in doc.units] == [("The lease ends in May.", 1)]


def test_a_pdf_locked_with_an_empty_password_is_read_and_one_with_a_password_is_not(
    tmp_path: Path,
) -> None:
    """Many PDFs are encrypted only to restrict printing or copying (an empty user
    password): they open without one, as in any viewer."""
    import io

    import pypdf

    def locked(user_password: str) -> bytes:
        writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(_pdf("Rent is due."))))
        writer.encrypt(user_password=user_password, owner_password="owner", algorithm="AES-128")
        out = io.BytesIO()
        writer.write(out)
        return out.getvalue()

    doc = readers.read(tmp_path / "open.pdf", locked(""))
    assert [u.text for u in doc.units] == ["Rent is due."]
    with pytest.raises(readers.Unreadable, match="an encrypted PDF \\(it needs a password\\)"):
        readers.read(tmp_path / "closed.pdf", locked("secret"))


def test_an_e_mail_body_in_an_unknown_charset_is_read_not_dropped() -> None:
    raw = b"From: a@x.example\nContent-Type: text/plain; charset=x-nonexistent\n\nbody text\n"
    assert [u.text for u in readers.read(Path("odd.eml"), raw).units] == [
        "E-mail from a@x.example",
        "body text",
    ]


def test_what_cannot_be_read_is_skipped_with_its_reason_and_the_rest_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readers, "MAX_FILE_BYTES", 100)
    (tmp_path / "ok.md").write_text("fine")
    (tmp_path / "huge.md").write_text("x" * 101)
    (tmp_path / "blob.txt").write_bytes(b"\x00\x01binary")
    (tmp_path / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8")
    (tmp_path / ".hidden.md").write_text("not read inside a folder")
    (tmp_path / "loop").symlink_to(tmp_path)
    (tmp_path / "gone.md").symlink_to(tmp_path / "nowhere")
    walked = list(readers.walk([tmp_path, tmp_path / "missing"]))
    found = sorted(w.path.name for w in walked if isinstance(w, readers.Found))
    reasons = {w.path.name: w.reason for w in walked if isinstance(w, readers.Skipped)}
    assert found == ["blob.txt", "latin.txt", "ok.md"]
    assert reasons == {
        "gone.md": "a broken link",
        "loop": "a link to a folder (name the folder itself to index it)",
        "photo.jpg": "not a kind of file drag reads (.jpg)",
        "missing": "no such file or folder",
        "huge.md": "larger than 100 bytes",
    }
    with pytest.raises(readers.Unreadable, match=r"^a binary file \(it holds NUL bytes\)$"):
        readers.read(tmp_path / "blob.txt")
    with pytest.raises(readers.Unreadable, match=r"^not UTF-8 text \(a bad byte at offset 3\)$"):
        readers.read(tmp_path / "latin.txt")


def test_a_nul_anywhere_is_binary_and_utf16_with_its_bom_is_text(tmp_path: Path) -> None:
    late = tmp_path / "late.txt"
    late.write_bytes(b"text " * 3000 + b"\x00 and more")
    with pytest.raises(readers.Unreadable, match=r"^a binary file"):
        readers.read(late)
    wide = tmp_path / "wide.txt"
    wide.write_bytes("Notes from Kraków: the lease ends in May.".encode("utf-16"))
    assert [u.text for u in readers.read(wide).units] == [
        "Notes from Kraków: the lease ends in May."
    ]


def test_an_unreadable_file_is_skipped_with_the_system_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Root reads a 0000 file, so the system's refusal is what this fake raises.
    path = tmp_path / "secret.md"
    path.write_text("x")
    real_open = os.open

    def refuse(name: Any, *args: Any, **kwargs: Any) -> int:
        if Path(name) == path:
            raise PermissionError(13, "Permission denied")
        return real_open(name, *args, **kwargs)

    monkeypatch.setattr(readers.os, "open", refuse)
    with pytest.raises(readers.Unreadable, match=r"^cannot read it: Permission denied$"):
        readers.read_bytes(path)


def test_a_name_has_one_key_however_it_is_written() -> None:
    assert (
        name_key("WolfgangSchulz") == name_key("Wolfgang Schulz") == name_key("wolfgang schulz's")
    )
    assert spellings("LiHua") == ["LiHua", "Li Hua"] and spellings("Ana Ruiz") == ["Ana Ruiz"]


def test_learnt_names_leave_out_common_words_the_files_write_in_lower_case() -> None:
    common = {"also", "dinner", "the", "gym", "rose"}
    found = ["Also", "Dinner's", "the gym", "Quillan", "LiHua", "東京", "Rose"]
    assert personal([(n, False) for n in found], common) == sorted(
        ["LiHua", "Li Hua", "Quillan", "東京"]
    )
    # A chat's sender is a person by the file's own structure: kept all the same.
    assert personal([("Rose", True), ("Also", False)], common) == ["Rose"]


def test_each_word_of_a_learnt_persons_name_is_a_name_of_its_own() -> None:
    """A question writes "marta" for the files' Marta Nowicka (an exploratory test of the
    app sent it as written): each word of a person's name of two words or more is
    learnt, in any case; a word of two letters or an everyday word only as written; a
    stop word, a country or one letter never."""
    everyday = frozenset({"rose", "will"})
    people = ["Marta Nowicka", "LiHua", "Rose Park", "Will Jordan", "J. Smith", "Quillan"]
    parts, cased = name_parts(people, everyday, frozenset({"the"}))
    assert parts == ["Marta", "Nowicka", "Li", "Hua", "Rose", "Park", "Will", "Smith"]
    assert cased == ["Li", "Rose", "Will"]


def test_a_folder_reached_twice_is_a_loop_and_a_link_inside_a_folder_is_not_followed(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.md").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path)
    walked = list(readers.walk([tmp_path / "link", tmp_path]))
    reasons = [w.reason for w in walked if isinstance(w, readers.Skipped)]
    # The second name of a folder read already is read once, without a word (no loop).
    assert reasons == ["a link to a folder (name the folder itself to index it)"]
    assert [w.path.name for w in walked if isinstance(w, readers.Found)] == ["a.md"]
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "b.md").write_text("y")
    for order in ([tmp_path, inner], [inner, tmp_path]):
        walked = list(readers.walk(order))
        assert sorted(w.path.name for w in walked if isinstance(w, readers.Found)) == [
            "a.md",
            "b.md",
        ]
        assert not [w for w in walked if isinstance(w, readers.Skipped) and "loop" in w.reason]


def test_a_tree_a_thousand_folders_deep_is_walked(tmp_path: Path) -> None:
    deep = tmp_path
    for _ in range(1200):  # deeper than Python's recursion limit
        deep = deep / "d"
        deep.mkdir()
    (deep / "bottom.md").write_text("found")
    (tmp_path / "top.md").write_text("found")
    try:
        walked = list(readers.walk([tmp_path]))
        assert sorted(w.path.name for w in walked if isinstance(w, readers.Found)) == [
            "bottom.md",
            "top.md",
        ]
    finally:  # from the bottom up: pytest's own clean-up would recurse as deep
        (deep / "bottom.md").unlink()
        while deep != tmp_path:
            deep.rmdir()
            deep = deep.parent


def test_the_size_limit_reads_in_megabytes_by_default() -> None:
    assert readers.too_large() == "larger than 20 MB"


@pytest.mark.parametrize(
    ("reply", "gold", "kind", "right", "error"),
    [
        (
            "They planned the Champions League match against Man City.",
            "Champions League against Manchester City in 2022",
            "Single",
            True,
            False,
        ),
        (
            "Real Madrid won the league.",
            "Champions League against Manchester City in 2022",
            "Single",
            False,
            True,
        ),
        ("Your files do not say.", "Insufficient information", "Null", True, False),
        ("The curtain was white.", "Insufficient information", "Null", False, True),
        ("Yes, he asked first.", "Yes", "Multi", True, False),
        ("No, it was later.", "Yes", "Multi", False, True),
        ("The chats don't mention it.", "Nachos with cheese", "Single", False, False),
        ("Two weeks.", "2 weeks", "Single", True, False),
        ("YurikoYamamoto", "Yuriko Yamamoto", "Single", True, False),
    ],
)
def test_the_scorer_reads_a_reply_as_a_reader_would(
    reply: str, gold: str, kind: str, right: bool, error: bool
) -> None:
    verdict = score(reply, gold, kind)
    assert (verdict.right, verdict.error) == (right, error)


def test_the_scorer_sets_aside_case_plurals_and_the_users_own_name() -> None:
    assert content_words("LiHua's favourite Snacks") == ["favourite", "snack"]


def test_the_benchmark_parts_are_fixed_halves_and_evidence_times_read_as_chat_times() -> None:
    # A fixed hash: these two land where they always did, whatever the run.
    assert part_of("What are LiHua's favorite snacks for the game?") == "report"
    assert part_of("What color was the curtain that Li Hua chose for his living room?") == "tune"
    csv_path = need_data(
        Path(__file__).resolve().parents[2] / "shared/data/lihuaworld/lihua_dev.csv"
    )
    parts = [part_of(q["Question"]) for q in load_questions(csv_path)]
    assert len(parts) == 192 and 80 <= parts.count("report") <= 112
    assert evidence_times("20261005_10:05<and>20261014_20:00") == {
        "2026-10-05 10:05",
        "2026-10-14 20:00",
    }
    assert evidence_times("N/A") == set()
    # Two rows of MiniRAG's file read as meant: a gold answer holding its evidence after a
    # tab, and an evidence written as a chat's "Time:" header.
    rows = {q["Question"]: q for q in load_questions(csv_path)}
    tabbed = rows['What does EmilyBurnett think is the main motive for the "Man in Black"?']
    assert tabbed["Gold Answer"] == "To find deeper meaning and fulfillment in Westworld"
    assert evidence_times(tabbed["Evidence"]) == {"2026-09-16 16:00"}
    headed = rows["Who comes up with the idea of picking up drinks on the way to hot pot?"]
    assert evidence_times(headed["Evidence"]) == {"2026-09-30 16:00"}
    assert all(evidence_times(q["Evidence"]) or q["Evidence"] == "N/A" for q in rows.values())


def test_the_benchmark_reads_each_budget_as_a_row_of_its_own() -> None:
    from drag_bench.localdocs import _budgets, path_of

    assert _budgets("400,0") == [400, 0]
    for bad in ("400,x", "-1", "400,400"):
        with pytest.raises(ValueError, match="--read-tokens"):
            _budgets(bad)
    item = {"method": "minirag"}
    assert path_of(item) == "minirag"  # a run of before --read-tokens: whole passages
    assert path_of({**item, "read_tokens": 0}) == "minirag, whole passages"
    assert path_of({**item, "read_tokens": 400}) == "minirag, 400 tokens"
    # The run that measured shorter headings (issue 51, not kept) named its rows by them.
    shorter = {**item, "read_tokens": 500, "headings": "short"}
    assert path_of(shorter) == "minirag, 500 tokens, short headings"
    # A run that measured the answer's decodings side by side names its rows by them.
    assert (
        path_of({**item, "read_tokens": 500, "decoding": "plain"}) == "minirag, 500 tokens, plain"
    )


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--headings", ""),
        ("--headings", "name,name"),
        ("--headings", "title"),
        ("--decoding", ""),
        ("--decoding", "plain,plain"),
        ("--decoding", "fast"),
    ],
)
def test_the_benchmark_refuses_rows_it_cannot_read(
    option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from drag_bench.localdocs import main

    argv = ["--docs", str(tmp_path), "--questions", "q.csv", "--out", str(tmp_path / "o")]
    assert main([*argv, option, value]) == 2
    assert option.removeprefix("--") in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_benchmark_can_take_its_rows_in_turns() -> None:
    from drag_bench.localdocs import in_turn

    rows = [("minirag", 500), ("minirag", 0), ("vector", 500)]
    assert in_turn(rows, 1, alternate=False) == in_turn(rows, 2, alternate=False) == rows
    firsts = [in_turn(rows, n, alternate=True)[0] for n in range(1, 7)]
    assert firsts == rows + rows  # each row first in its turn
    assert all(sorted(in_turn(rows, n, alternate=True)) == sorted(rows) for n in range(1, 5))


def test_the_benchmark_stores_a_source_as_a_path_inside_the_docs_however_they_were_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from drag_bench.localdocs import _relative

    chat = tmp_path / "shared" / "LiHua-World" / "week40" / "a.txt"
    chat.parent.mkdir(parents=True)
    chat.write_text("Time: 2026-10-05 10:05\n", "utf-8")
    monkeypatch.chdir(tmp_path / "shared")
    for docs in ("../shared/LiHua-World", "LiHua-World", str(tmp_path / "shared/LiHua-World")):
        assert _relative(str(chat), Path(docs)) == "week40/a.txt", docs
    # A linked folder inside the docs: named through the link, as the index names it.
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "shared" / "LiHua-World" / "linked").symlink_to(tmp_path / "elsewhere")
    linked = tmp_path / "shared" / "LiHua-World" / "linked" / "b.txt"
    linked.write_text("Time: 2026-10-06 10:05\n", "utf-8")
    assert _relative(str(linked), Path("../shared/LiHua-World")) == "linked/b.txt"


def test_the_student_reads_each_passage_under_its_source_and_is_told_how_to_say_no() -> None:
    from assistant.drag import answer

    messages = answer.build_files_messages(
        "Where is the noodle bar?", [("chats/a.txt, 2026-01-05 11:00", "Wolfgang: Kings Road.")]
    )
    assert "reply exactly: Your files do not say." in messages[0]["content"]
    assert messages[1]["content"].endswith(
        "[chats/a.txt, 2026-01-05 11:00]\nWolfgang: Kings Road.\n\n"
        "Question: Where is the noodle bar?"
    )


def test_a_file_has_one_name_in_the_index_however_its_path_was_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "a.md").write_text("Lunch at noon.\n", encoding="utf-8")
    monkeypatch.chdir(notes / "sub")
    typed = [Path("../a.md"), Path("./../../notes/sub/../a.md"), notes / "a.md"]
    names = {f.path for p in typed for f in readers.walk([p]) if isinstance(f, readers.Found)}
    assert names == {notes / "a.md"}


def test_a_path_whose_dots_follow_a_link_keeps_the_name_the_system_reads(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "sub").mkdir()
    (tmp_path / "a.md").write_text("the a beside the link\n", encoding="utf-8")
    (tmp_path / "target" / "a.md").write_text("the a the system reads\n", encoding="utf-8")
    (tmp_path / "link").symlink_to(tmp_path / "target" / "sub")
    # link/.. is target/, not tmp_path/: the written form would name the other a.md.
    through = tmp_path / "link" / ".." / "a.md"
    assert readers.absolute(through) == through
    assert (
        readers.absolute(tmp_path / "target" / "sub" / ".." / "a.md")
        == tmp_path / "target" / "a.md"
    )
    gone = tmp_path / "x" / ".." / "gone.md"  # not there: as it was indexed
    assert readers.absolute(gone) == tmp_path / "gone.md"


def test_a_name_with_a_line_break_is_one_line_of_the_list(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from assistant.cli.files import _print_list
    from assistant.store.files import Source

    crafted = "/notes/a.md\nfake.md  text  1 KB  1 chunks  indexed 2026-01-01 00:00"
    _print_list([Source(1, crafted, "text", 10, 0.0, "2026-01-01T00:00:00+00:00", 1)])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("/notes/a.md\\nfake.md")
    # A line separator is a line break once shown: escaped too.
    _print_list([Source(1, crafted.replace("\n", "\u2028"), "text", 10, 0.0, "2026-01-01", 1)])
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_a_passages_file_name_is_one_line_of_the_sources() -> None:
    """Issue 47, item 13: drag ask --files printed a file name's line break raw in its
    sources (and the student's prompt read it so); written as in the list now."""
    from assistant.cli.ask import _format_result
    from assistant.core.results import AskResult, ScoredPassage

    crafted = "/notes/a.md\n  2. /notes/fake.md, 2026-01-01 00:00"
    passage = ScoredPassage(1, "Kings Road.", crafted, "", 0, 1.0, 1.0, 0.0)
    assert passage.label == "/notes/a.md\\n  2. /notes/fake.md, 2026-01-01 00:00"
    result = AskResult("Where?", "none", 5, 5, source="files", passages=[passage])
    shown = _format_result(result, streamed=True).splitlines()
    assert [ln for ln in shown if ln.lstrip().startswith(("1.", "2."))] == ["  1. " + passage.label]


def test_a_passages_heading_is_its_files_name_and_where() -> None:
    """Issue 51 (``--headings name``): the student may read a passage under its file's
    name and time or page, without the folders; on one line, as the label is."""
    from assistant.core.results import ScoredPassage

    chat = ScoredPassage(1, "x", "/home/ana/chats/week40/1005.txt", "2026-10-05 10:05", 0, 1, 1, 0)
    assert chat.heading == "1005.txt, 2026-10-05 10:05"
    assert chat.label == "/home/ana/chats/week40/1005.txt, 2026-10-05 10:05"
    pdf = ScoredPassage(1, "x", "/home/ana/docs/lease.pdf", "", 3, 1, 1, 0)
    assert pdf.heading == "lease.pdf, page 3"
    odd = ScoredPassage(1, "x", "/notes/a\nb.md", "", 0, 1, 1, 0)
    assert odd.heading == "a\\nb.md"


def test_a_skipped_files_name_is_written_as_in_the_list() -> None:
    """The skipped line and the list write a name one way (safetext.name_line): a line
    break is an escape, not a space that would make two names read as one."""
    odd = Path("/notes/a\u2028b.md" + os.fsdecode(b"\xe9"))
    line = readers.Skipped(odd, "too large").line()
    assert line == "skipped /notes/a\\u2028b.md\\udce9: too large"


def test_a_header_over_the_limit_is_cut_between_addresses() -> None:
    """Cut headers (over 4,000 characters) end at a comma or a space, whole addresses (a
    cut inside one could stop Python's parser)."""
    import email.utils

    many = ", ".join(
        email.utils.formataddr((f"Person {n} Q", f"p{n}@x.example")) for n in range(400)
    )
    raw = f"From: {many}\nSubject: a lot\n\nBody one.\n".encode()
    units = readers.read(Path("many.eml"), raw).units
    assert units[0].text.startswith("E-mail from Person 0 Q <p0@x.example>, Person 1 Q")
    assert [u.text for u in units[1:]] == ["Body one."]


# -- issue 47, items 6-8: files that cannot poison or stall -------------------------------


def _nested_message(depth: int) -> str:
    """An e-mail of ``depth`` multiparts, one inside the other."""
    head = "".join(
        f'Content-Type: multipart/mixed; boundary="b{n}"\n\n--b{n}\n' for n in range(depth)
    )
    return f"From: Deep <d@x.org>\nSubject: deep\n{head}Content-Type: text/plain\n\ndeep body\n"


def test_one_bad_message_leaves_out_that_message_not_the_mailbox(tmp_path: Path) -> None:
    """Item 7: a thousand nested multiparts raised RecursionError and the whole mailbox
    left the index.  The others are read, and the document says one was left out."""
    path = tmp_path / "box.mbox"
    path.write_text(
        "From a@x Mon Jan  1 00:00:00 2026\nFrom: A <a@x.org>\nSubject: one\n\nfirst body\n\n"
        f"From d@x Mon Jan  1 00:00:00 2026\n{_nested_message(1000)}\n"
        "From b@x Mon Jan  1 00:00:00 2026\nFrom: B <b@x.org>\nSubject: two\n\nsecond body\n"
    )
    doc = readers.read(path)
    texts = [u.text for u in doc.units]
    assert texts[:2] == ["E-mail from A <a@x.org>: one", "first body"]
    assert texts[-2:] == ["E-mail from B <b@x.org>: two", "second body"]
    assert "deep body" not in texts
    assert doc.cut == "1 message(s) in it could not be read and were left out"


def test_a_pipe_put_in_a_files_place_is_not_waited_on(tmp_path: Path) -> None:
    """A file replaced by a named pipe after the folder was walked: opening it waited for
    a writer for ever (`drag index` hung).  It is skipped as no regular file."""
    fifo = tmp_path / "notes.txt"
    os.mkfifo(fifo)
    said: list[str] = []

    def read() -> None:
        try:
            readers.read_bytes(fifo)
        except readers.Unreadable as exc:
            said.append(str(exc))

    reading = threading.Thread(target=read, daemon=True)
    reading.start()
    reading.join(timeout=30)
    if reading.is_alive():  # the old way: let it go (a writer comes), then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a pipe waited for a writer")
    assert said == ["not a regular file"]


@pytest.mark.parametrize(
    ("header", "shown"),
    [
        ("From: marta@\n", "E-mail from marta@"),  # the address parser raised IndexError
        ("From: m@x\nDate: Mon, 3 Mar 2026 10:00:00 +99999999999999999999\n", "E-mail from m@x"),
    ],
    ids=["bad-from", "bad-date-zone"],
)
def test_a_header_the_parser_fails_on_is_read_as_written(
    tmp_path: Path, header: str, shown: str
) -> None:
    """One bad header dropped the whole e-mail ("could not be read (IndexError)")."""
    path = tmp_path / "dinner.eml"
    path.write_text(header + "Subject: Dinner\n\nMeet in Berlin.\n")
    texts = [u.text for u in readers.read(path).units]
    assert texts == [f"{shown}: Dinner", "Meet in Berlin."]


def test_a_character_reference_of_thousands_of_digits_is_left_as_written(
    tmp_path: Path,
) -> None:
    """html.unescape raises ValueError for it: the e-mail was dropped."""
    path = tmp_path / "page.eml"
    path.write_text("From: m@x\nContent-Type: text/html\n\n<p>Meet.</p>&#" + "0" * 4400 + "65;\n")
    texts = [u.text for u in readers.read(path).units]
    assert texts[0] == "E-mail from m@x" and texts[1].startswith("Meet.")


def test_an_e_mail_of_too_many_parts_is_not_parsed(tmp_path: Path) -> None:
    """Python's parser builds every part first: 2.8 million empty parts took 171 s and
    1.5 GB of memory.  Past the budget the e-mail is skipped with its reason."""
    path = tmp_path / "parts.eml"
    parts = "--B\n\nx\n" * (readers.MAX_MAIL_PARTS + 1)
    path.write_text(f"From: a@b\nContent-Type: multipart/mixed; boundary=B\n\n{parts}--B--\n")
    with pytest.raises(readers.Unreadable, match=r"^an e-mail of more than 2,000 parts$"):
        readers.read(path)


def test_a_mailbox_is_read_for_its_budget_of_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mailbox of 50,000 small messages was parsed whole, though the index keeps 4,000
    passages: it is read up to its budget, and the document says so."""
    monkeypatch.setattr(readers, "MAX_MAILBOX_MESSAGES", 3)
    path = tmp_path / "box.mbox"
    path.write_text(
        "".join(
            f"From a@x Mon Jan  1 00:00:00 2026\nFrom: A <a@x.org>\nSubject: s{i}\n\nbody {i}\n\n"
            for i in range(5)
        )
    )
    doc = readers.read(path)
    assert [u.text for u in doc.units if u.text.startswith("body")] == [
        "body 0",
        "body 1",
        "body 2",
    ]
    assert doc.cut == "only its first 3 messages were read"


def test_a_link_to_a_file_outside_the_named_folder_is_skipped(tmp_path: Path) -> None:
    """Item 8: it was indexed under the link's name (and --forget by its real path said
    "not in the index").  A link to a file inside the folder is read once, as the file;
    the file outside, named itself, is read."""
    outside = tmp_path / "private" / "diary.md"
    outside.parent.mkdir()
    outside.write_text("dear diary")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("a")
    (notes / "diary.md").symlink_to(outside)
    (notes / "again.md").symlink_to(notes / "a.md")
    walked = list(readers.walk([notes]))
    assert [w.path.name for w in walked if isinstance(w, readers.Found)] == ["a.md"]
    assert [(w.path.name, w.reason) for w in walked if isinstance(w, readers.Skipped)] == [
        ("again.md", "a link to a.md, read under its own name"),
        ("diary.md", "a link to a file outside the folder you named (name the file to index it)"),
    ]
    named = list(readers.walk([notes / "diary.md"]))
    assert [type(w).__name__ for w in named] == ["Found"]


def test_a_link_inside_the_folder_that_sorts_before_its_file_leaves_the_file_its_name(
    tmp_path: Path,
) -> None:
    """A link named before its file ("0-latest.md" to "report.md") took the file's one
    reading under the link's name: --forget by the file's own name said "not in the
    index".  The link is skipped with its reason (so that an earlier run's reading under
    its name is forgotten).  A link to a file the walk does not read by its own name (a
    hidden folder, a name without a suffix drag reads, before or after the link) is
    still read through the link."""
    notes = tmp_path / "notes"
    (notes / ".hidden").mkdir(parents=True)
    (notes / "report.md").write_text("the report")
    (notes / "0-latest.md").symlink_to(notes / "report.md")
    (notes / ".hidden" / "kept.md").write_text("kept")
    (notes / "0-kept.md").symlink_to(notes / ".hidden" / "kept.md")
    (notes / "plain").write_text("no suffix")
    (notes / "0-plain.md").symlink_to(notes / "plain")
    (notes / "README").write_text("no suffix, named before its link")
    (notes / "readme.md").symlink_to(notes / "README")
    walked = list(readers.walk([notes]))
    found = [w.path.name for w in walked if isinstance(w, readers.Found)]
    assert found == ["0-kept.md", "0-plain.md", "readme.md", "report.md"]
    skipped = {w.path.name: w.reason for w in walked if isinstance(w, readers.Skipped)}
    assert skipped["0-latest.md"] == "a link to report.md, read under its own name"
    # A second link to a file only links reach: said (so that what an earlier run read
    # under its name is forgotten), not read twice.
    (notes / "1-kept.md").symlink_to(notes / ".hidden" / "kept.md")
    walked = list(readers.walk([notes]))
    assert "1-kept.md" not in [w.path.name for w in walked if isinstance(w, readers.Found)]
    skipped = {w.path.name: w.reason for w in walked if isinstance(w, readers.Skipped)}
    assert skipped["1-kept.md"] == f"the same file as {notes / '0-kept.md'}, read under that name"
    # The same name given twice (a folder and a file in it) is read once, without a word:
    # a Skipped name that is the one read would have its reading forgotten.
    walked = list(readers.walk([notes, notes / "report.md"]))
    assert [w.path.name for w in walked].count("report.md") == 1
    # A link named, then its folder: read under the link's name, which is skipped under
    # no reason (the index would forget the reading it just made); the file's own name
    # is said to be the same file.
    walked = list(readers.walk([notes / "0-latest.md", notes]))
    found = [w.path.name for w in walked if isinstance(w, readers.Found)]
    skipped = [w.path.name for w in walked if isinstance(w, readers.Skipped)]
    assert "0-latest.md" in found and "0-latest.md" not in skipped
    assert "report.md" not in found and "report.md" in skipped


def _pdf_pages(pages: int, line: str, repeats: int) -> bytes:
    """A PDF whose ``pages`` pages all draw one compressed content stream: a small file
    whose text is ``pages`` times the stream's."""
    import zlib

    body = b"BT /F1 12 Tf 72 720 Td " + b"(%s) Tj 0 -14 Td " % line.encode() * repeats + b"ET"
    stream = zlib.compress(body, 9)
    first_page = 5
    kids = " ".join(f"{first_page + n} 0 R" for n in range(pages)).encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ] + [
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R "
        b"/Resources << /Font << /F1 4 0 R >> >> >>"
    ] * pages
    return _pdf_of(objects)


def test_a_pdf_is_read_within_its_budget_of_characters_and_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 6: pages that share one compressed stream expand a small file to far more
    text than its bytes (pypdf then ran past 240 s at 800 MB).  The text is read in a
    child process: cut at the budget of characters, with the reason; over its memory
    budget it stops, and past the time budget it is stopped (here budgets no Python
    can start within)."""
    from assistant.files import pdftext

    data = _pdf_pages(40, "The lease ends in May and the rent is due.", 50)
    assert len(data) < 20_000
    whole = readers.read(tmp_path / "lease.pdf", data)
    assert whole.cut == "" and {u.page for u in whole.units} == set(range(1, 41))
    text_chars = sum(len(u.text) for u in whole.units)
    assert text_chars > 40 * len(data) // 20  # far more text than bytes
    monkeypatch.setattr(readers, "MAX_TEXT_CHARS", 10_000)
    cut = readers.read(tmp_path / "lease.pdf", data)
    assert cut.cut == "its text is longer than 10,000 characters"
    assert sum(len(u.text) for u in cut.units) <= 10_000 and cut.units[0].page == 1
    monkeypatch.setattr(pdftext, "MEMORY_BYTES", 1 << 20)  # less than Python itself needs
    with pytest.raises(readers.Unreadable, match=r"needed more than 1 MB of memory"):
        readers.read(tmp_path / "lease.pdf", data)
    monkeypatch.setattr(pdftext, "SECONDS", 0.001)
    with pytest.raises(readers.Unreadable, match=r"took longer than 0\.001 s"):
        readers.read(tmp_path / "lease.pdf", data)


def test_the_learnt_names_are_bounded_senders_first() -> None:
    """Issue 47, item 5: the list is bounded (every question's detector compiles it)."""
    from assistant.privacy.entities import MAX_LEARNT, personal

    found = [(f"Name{i} Surname{i}", False) for i in range(MAX_LEARNT + 50)]
    learnt = personal([*found, ("Chat Sender", True)], set())
    assert len(learnt) == MAX_LEARNT and "Chat Sender" in learnt


def test_the_pdf_reader_runs_no_code_from_the_folder_drag_runs_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A json.py or pypdf.py in the folder drag index runs from (a cloned project) is not
    imported by the PDF's child process (python -m put that folder first)."""
    planted = tmp_path / "project"
    planted.mkdir()
    marker = tmp_path / "ran"
    for name in ("json.py", "pypdf.py"):
        (planted / name).write_text(f"open({str(marker)!r}, 'w').write('{name}')\n")
    monkeypatch.chdir(planted)
    doc = readers.read(planted / "letter.pdf", _pdf("The lease ends in May."))
    assert [u.text for u in doc.units] == ["The lease ends in May."]
    assert not marker.exists(), marker.read_text()


def test_a_pages_text_with_a_line_separator_is_one_item() -> None:
    """The child's lines are JSON in ASCII: U+2028 or U+0085 in a page's text split the
    line (and the pages after it were lost without a word)."""
    import contextlib
    import io

    from assistant.files import pdftext

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        pdftext._emit({"page": 1, "text": "one\u2028two\x85three"})
        pdftext._emit({"page": 2, "text": "four"})
    pages = pdftext.parse(out.getvalue().encode("ascii"))
    assert pages.pages == [(1, "one\u2028two\x85three"), (2, "four")] and pages.stopped == ""


def test_an_e_mail_of_many_lines_that_start_with_two_dashes_is_read(tmp_path: Path) -> None:
    """The parts budget counts the boundaries the e-mail declares, not every line that
    starts with "--" (a patch removing thousands of SQL comments was dropped whole)."""
    path = tmp_path / "patch.eml"
    removed = "-- an old comment\n" * (readers.MAX_MAIL_PARTS + 1)
    path.write_text(f"From: dev@x\nSubject: [PATCH] tidy\n\n{removed}")
    texts = [u.text for u in readers.read(path).units]
    assert texts[0] == "E-mail from dev@x: [PATCH] tidy" and "-- an old comment" in texts[1]
