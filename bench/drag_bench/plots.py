"""PNG plots for the benchmarks (matplotlib, headless Agg backend)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def grouped_bars(
    path: Path,
    groups: Mapping[str, Mapping[str, float]],
    *,
    title: str,
    ylabel: str,
    percent: bool = True,
) -> Path:
    """One cluster of bars per group (x axis), one bar per series (legend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(groups)
    series = sorted({name for values in groups.values() for name in values})
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(labels) + 2), 4.2), dpi=120)
    for i, name in enumerate(series):
        xs = [x + (i - (len(series) - 1) / 2) * width for x in range(len(labels))]
        ys = [groups[label].get(name, 0.0) * (100 if percent else 1) for label in labels]
        ax.bar(xs, ys, width=width, label=name)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel + (" (%)" if percent else ""))
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
