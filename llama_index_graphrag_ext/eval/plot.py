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


def plot_cost(report: dict[str, Any], path: str | os.PathLike) -> bool:
    """Write recall@5 against cost, one point per method: index seconds (left) and the
    median query time (right), both on log scales. ``False`` (nothing written) when
    fewer than two methods carry both figures."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [
        (name, r["recall@5"], r["index_seconds"], r["query_ms_p50"])
        for name, r in report["methods"].items()
        if r.get("recall@5") is not None and r.get("index_seconds") and r.get("query_ms_p50")
    ]
    if len(rows) < 2:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.6), dpi=120, sharey=True)
    for ax, column, label in ((axes[0], 2, "index seconds"), (axes[1], 3, "query p50 (ms)")):
        for name, recall, *costs in rows:
            cost = costs[column - 2]
            ax.scatter(cost, recall, s=22)
            ax.annotate(name, (cost, recall), fontsize=7, xytext=(4, 3), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_xlabel(f"{label} (log scale)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("recall@5")
    fig.suptitle(f"{report['bench']}: recall@5 against cost (up and left is better)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
