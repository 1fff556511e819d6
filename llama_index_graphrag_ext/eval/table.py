"""The runner's report as a Markdown table, with the paired-interval column and LLM-step notes."""

from __future__ import annotations

from typing import Any

#: The method every other one is compared with (``ΔR@5`` and its interval).
REFERENCE = "dense"
#: Resamples and seed of the paired bootstrap (fixed: a report is reproducible).
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0

COLUMNS = (
    ("recall@2", "R@2", "{:.3f}"),
    ("recall@5", "R@5", "{:.3f}"),
    ("recall@10", "R@10", "{:.3f}"),
    ("all@5", "all@5", "{:.3f}"),
    ("em", "EM", "{:.3f}"),
    ("f1", "F1", "{:.3f}"),
    ("acc", "Acc", "{:.3f}"),
    ("index_seconds", "index s", "{:.1f}"),
    ("index_vs_embed", "idx/embed", "{:.2f}"),
    ("query_ms_p50", "q p50 ms", "{:.1f}"),
    ("query_ms_p95", "q p95 ms", "{:.1f}"),
    ("llm_calls_index", "LLM calls idx", "{:d}"),
    ("llm_tokens_index", "LLM tok idx", "{:d}"),
    ("llm_calls_query", "LLM calls q", "{:d}"),
    ("llm_tokens_query", "LLM tok q", "{:d}"),
    ("fallbacks", "fallbacks", "{}"),
    ("peak_rss_mb", "peak RSS MB", "{:.0f}"),
)


#: Header of the paired-interval column (see :func:`add_paired_intervals`).
DELTA_HEADER = f"ΔR@5 vs {REFERENCE} [95% CI]"
#: What the interval means, printed under a table that has the column.
DELTA_NOTE = (
    f"ΔR@5 vs {REFERENCE}: mean per-question difference in R@5 from `{REFERENCE}` in the "
    "same run, with a paired bootstrap 95% interval over the questions "
    f"({BOOTSTRAP_RESAMPLES:,} resamples, seed {BOOTSTRAP_SEED}). A difference whose "
    "interval contains 0 is not a claim that either method retrieves better."
)


def window_notes(report: dict[str, Any]) -> list[str]:
    """How many passages were longer than the embedder's window, when the run counted them."""
    window = report.get("run", {}).get("embed_window")
    if not window:
        return []
    return [
        f"{window['passages_over']} of {report['passages']} passages exceed the embedder's "
        f"window of {window['tokens']} word pieces"
        + (" (pooled over windows)" if window.get("pooled") else " (truncated)")
    ]


def delta_cell(row: dict[str, Any]) -> str:
    """The paired-interval cell of a row: ``+0.030 [-0.005, +0.065]`` (empty without one)."""
    delta = row.get(f"vs_{REFERENCE}")
    if not delta:
        return ""
    return f"{delta['mean']:+.3f} [{delta['low']:+.3f}, {delta['high']:+.3f}]"


def format_table(report: dict[str, Any], *, drop_zero: bool = False) -> str:
    """The report as a Markdown table (columns without any value are left out).

    ``drop_zero`` also leaves out columns that are zero for every method.
    """
    rows = report["methods"]
    cols = [c for c in COLUMNS if any(r.get(c[0]) is not None for r in rows.values())]
    if drop_zero:
        cols = [c for c in cols if any(r.get(c[0]) not in (None, 0) for r in rows.values())]
    with_delta = any(r.get(f"vs_{REFERENCE}") for r in rows.values())
    if with_delta:  # right after the recall columns
        after = sum(1 for c in cols if c[0].startswith("recall@"))
        cols.insert(after, (f"vs_{REFERENCE}", DELTA_HEADER, None))
    header = ["method", "tier", *[c[1] for c in cols]]
    lines = [
        f"{report['bench']}: {report['questions']} questions, {report['passages']} passages"
        + (" (corpus sample)" if report.get("run", {}).get("sampled") else "")
        + "".join(f"; {line}" for line in window_notes(report)),
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    notes = []
    for name, row in rows.items():
        if "error" in row:
            lines.append(f"| {name} | {row['tier']} | error: {row['error']} |")
            continue
        cells = [name, row["tier"] + (" FAILED" if "failed" in row else "")]
        for key, _, fmt in cols:
            value = row.get(key)
            if fmt is None:
                cells.append("(reference)" if name == REFERENCE else delta_cell(row))
            else:
                cells.append("" if value is None else fmt.format(value))
        lines.append("| " + " | ".join(cells) + " |")
        notes.extend(f"- {name}: {line}" for line in step_notes(row))
    if with_delta:
        lines += ["", DELTA_NOTE]
    if notes:
        lines += ["", "LLM steps:", *notes]
    return "\n".join(lines)


def step_notes(row: dict[str, Any]) -> list[str]:
    """One line per LLM step of a result row (tier, LLM, fallbacks), then its verdict."""
    out = []
    for r in row.get("llm_steps", []):
        who = f"{r['llm_class']}({r['model']})" if r.get("llm_class") else "no LLM"
        line = f"{r['step']}: {r['tier']} via {who}, {r['items']} item(s)"
        if r.get("fallbacks"):
            reasons = ", ".join(f"{k} x{v}" for k, v in r.get("reasons", {}).items())
            line += f", {r['fallbacks']} fell back to {r['stand_in']} ({reasons})"
        if r.get("note"):
            line += f"; runs LLM-free: {r['note']}"
        out.append(line)
    for key in ("failed", "warning"):
        if key in row:
            out.append(f"{key.upper()}: {row[key]}")
    return out
