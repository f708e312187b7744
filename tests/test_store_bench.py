"""drag bench store --scale on a small synthetic cache: real SQLite, both recalls."""

from __future__ import annotations

from pathlib import Path

from drag_bench import storescale as bench


def test_the_scale_run_times_both_recalls_and_grows_the_held_corpus(tmp_path: Path) -> None:
    (row,) = bench.run_scale([400], tmp_path, queries=3)
    assert row["triples"] == 400 and row["entities"] == 200
    # Seeds found by embedding lead to the triples around them, for the product's recall.
    assert row["triples_found_mean"] > 0
    assert row["query_ms"]["p50"] > 0 and row["query_ms_before"]["p50"] > 0
    assert row["grow_s"] >= 0  # one more cached question was taken in, not read again
    assert not (tmp_path / "scale-400.db").exists()
