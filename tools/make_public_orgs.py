"""Build ``data/public-orgs.tsv``, the companies this product calls public (issue 48):
the members of 20 stock indices (S&P 500, S&P 600, NASDAQ 100, DOW JONES, FTSE 100,
DAX, CAC 40, NIKKEI 225 …), with their tickers, as packaged by pytickersymbols.

Provenance: pytickersymbols 1.17.10 (MIT, portfolio+; its index lists are built from
Wikipedia's): ``pytickersymbols/indices_data.py``.  The output keeps a company's name,
its name without a legal form ("Oracle Corporation" -> "Oracle"; not when that is one
word spaCy's model reads as a person's name: "Rogers"), its ticker and the first index
it was found in.  Well-known platforms that are no listed company (Etsy's
brand is, "Google" is Alphabet's) are hand-written in ``data/public-platforms.txt``.

    pip download --no-deps pytickersymbols==1.17.10 && unzip pytickersymbols-1.17.10-*.whl -d pts
    python tools/make_public_orgs.py pts/pytickersymbols/indices_data.py

The output is committed; tests check its provenance line and a few entries.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

OUT = Path(__file__).resolve().parents[1] / "assistant" / "privacy" / "data" / "public-orgs.tsv"
HEADER = (
    "# pytickersymbols 1.17.10 (MIT, portfolio+; index lists from Wikipedia): "
    "name, short name, ticker, index"
)


# Legal forms and the like at the end of a company's name ("Oracle Corporation").
LEGAL = re.compile(
    r"(?:[\s,]+(?:inc\.?|incorporated|corp\.?|corporation|company|co\.?|plc|p\.l\.c\.|ag|"
    r"se|n\.?v\.?|s\.?a\.?|s\.?p\.?a\.?|ltd\.?|limited|kgaa|& co\.?|oyj|"
    r"asa|ab|gmbh|llc|\(the\)))+\s*$",
    re.IGNORECASE,
)


def short(name: str) -> str:
    """``name`` without its legal form, when what is left is no short word ("News" of
    "News Corp" is any news)."""
    cut = re.sub(r"^the\s+", "", LEGAL.sub("", name).strip(" ,"), flags=re.IGNORECASE)
    return cut if len(cut) >= 5 or (" " in cut and len(cut) >= 3) else name


def person_like(words: list[str]) -> set[str]:
    """Those of ``words`` that spaCy's model (the product's) reads as a person's name in a
    plain sentence: a short form such as "Rogers" (of "Rogers Corporation") is a surname
    too, and is not listed on its own."""
    import spacy

    from assistant.privacy.engine import spacy_model
    from assistant.privacy.policy import load_policy

    nlp = spacy.load(spacy_model(load_policy().model), disable=["parser"])
    out = set()
    for word in words:
        for template in ("I talked to {} yesterday.", "Ask {} about it."):
            doc = nlp(template.format(word))
            if any(e.label_ == "PERSON" and e.text == word for e in doc.ents):
                out.add(word)
    return out


def main(source: str) -> int:
    spec = importlib.util.spec_from_file_location("indices_data", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows: dict[str, tuple[str, str, str]] = {}
    for index, data in sorted(module.INDICES.items()):
        for company in data["companies"]:
            name = " ".join(str(company["name"]).split())
            ticker = str(company.get("symbol") or "").split(".")[0]
            if name and "\t" not in name:
                rows.setdefault(name, (short(name), ticker, index))
    ones = [s for n, (s, _t, _i) in rows.items() if s != n and " " not in s]
    people = person_like(ones)
    rows = {n: (n if s in people else s, t, i) for n, (s, t, i) in rows.items()}
    print(f"{len(people)} short forms read as people's names, not listed: {sorted(people)}")
    lines = [HEADER] + [f"{n}\t{s}\t{t}\t{i}" for n, (s, t, i) in sorted(rows.items())]
    OUT.write_text("\n".join(lines) + "\n", "utf-8")
    print(f"{len(rows)} companies -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
