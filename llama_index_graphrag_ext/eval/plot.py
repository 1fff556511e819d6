"""Grouped bar chart of recall@2/5/10 per method."""

from __future__ import annotations

import os
from typing import Any

from .runner import RECALL_KS


def plot_recall(report: dict[str, Any], path: str | os.PathLike) -> None:
    """Write a PNG (or any format matplotlib knows by suffix) of recall@k per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = [n for n, r in report["methods"].items() if r.get("recall@5") is not None]
    width = 0.8 / len(RECALL_KS)
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(names) + 2), 3.6), dpi=120)
    for i, k in enumerate(RECALL_KS):
        values = [report["methods"][n].get(f"recall@{k}") or 0.0 for n in names]
        bars = ax.bar(x + (i - (len(RECALL_KS) - 1) / 2) * width, values, width, label=f"R@{k}")
        ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
    ax.set_xticks(x, names, rotation=20, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("recall")
    ax.set_title(
        f"{report['bench']}: {report['questions']} questions, {report['passages']} passages"
    )
    ax.legend(ncols=len(RECALL_KS), fontsize=8, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
