"""The results page of the documentation, generated from the runner's JSON reports.

``graphrag-ext report RUN.json ... --out docs/results.md --plots DIR`` renders each
report as a section: the setting, the reproducing command (rebuilt from the
report, so it cannot drift), the table, a recall plot and the methods' facts.
The page is a pure function of the JSON files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .table import COLUMNS, format_table, window_notes

HEADER = """# Results

Every table on this page is generated from the JSON report the benchmark
runner wrote for that run (`docs/assets/bench/*.json`), by

```bash
graphrag-ext report docs/assets/bench/*.json --out docs/results.md --plots docs/assets/bench
```

Each section gives the command that reproduces it. Recall is deterministic;
times depend on the machine: these runs were taken on 2 CPU cores shared with
other jobs, so compare times **within** one table (every method of a table ran
in one process on the same corpus), not across tables. Runs marked *embedding
cache* used `--embed-cache`: the first method to embed a passage pays for it and
later methods (and later runs) read it, so their index seconds leave out
embedding the passages; `idx/embed` relates each to encoding the corpus once.

The first four sections were taken with the presets as they ship, BM25 fused
into each graph method: a Python user who builds a method with
`config="default"` (or the preset a row names) gets exactly the ranking its row
measured. The later sections were taken before, and name methods as they were
called then (`cue-0.0`, `qcg-sentences`, ...); [Run names](benchmarks.md#run-names)
gives each old name's new one, which ranks as it did with `/bm25_weight=0`.
"""


def load_reports(paths: Sequence[str | os.PathLike]) -> list[tuple[Path, dict[str, Any]]]:
    """Read reports, ordered by file name (name them ``01-...json`` to order sections)."""
    out = []
    for path in sorted(Path(p) for p in paths):
        report = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(report, dict) or "methods" not in report or "run" not in report:
            raise ValueError(f"{path} is not a benchmark runner report")
        out.append((path, report))
    return out


def _data_name(data: str) -> str:
    """A bundled set by its name (the command then runs from any folder of a checkout)."""
    from .data import bundled_sets

    name = Path(str(data)).name
    return name if name in bundled_sets() else str(data)


def reproduce_command(report: dict[str, Any]) -> str:
    """The ``graphrag-ext bench`` command line that reproduces ``report``."""
    run = report["run"]
    parts = [
        "graphrag-ext bench",
        f"--data {_data_name(run['data'])}",
        "--methods " + ",".join(report["methods"]),
    ]
    if report["questions"] < run.get("corpus_questions", report["questions"]):
        parts.append(f"--limit {report['questions']}")
    if run.get("sampled"):
        parts.append(f"--max-passages {run.get('sample_passages', report['passages'])}")
    if run.get("titles_dropped"):
        parts.append("--no-titles")
    if run.get("passages_joined"):
        parts.append(f"--join-passages {run['passages_joined']}")
    if run.get("top_k", 10) != 10:
        parts.append(f"--top-k {run['top_k']}")
    if run.get("answer"):
        parts.append("--answer")
    for key, value in sorted((run.get("options") or {}).items()):
        parts.append(f"--set {key}={value}")
    if run.get("embed_floor_seconds") is not None:
        parts.append("--floor")
    if run.get("embed_cache"):
        parts.append("--embed-cache emb.sqlite")
    return " \\\n    ".join(parts)


def _no_llm_calls(report: dict[str, Any]) -> bool:
    rows = [r for r in report["methods"].values() if "error" not in r]
    keys = [c[0] for c in COLUMNS if c[0].startswith("llm_")]
    return bool(rows) and all(r.get(k) == 0 for r in rows for k in keys)


def _facts(report: dict[str, Any]) -> list[str]:
    lines = []
    for name, row in report["methods"].items():
        info = row.get("info")
        if info:
            shown = ", ".join(f"{k}={_short(v)}" for k, v in info.items() if _short(v) != "")
            lines.append(f"- `{name}`: {shown}")
        if row.get("llm"):
            lines.append(f"- `{name}` LLM: {row['llm']}")
    return lines


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        text = json.dumps(value, sort_keys=True)
        return text if len(text) <= 120 else ""
    return str(value)


def render_section(
    path: Path, report: dict[str, Any], plot: str | None, cost_plot: str | None = None
) -> str:
    """One report as a Markdown section (its recall plot, and its recall-against-cost plot)."""
    run = report["run"]
    title = report.get("title") or f"{report['bench']}: {', '.join(report['methods'])}"
    lines = [f"## {title}", ""]
    if report.get("note"):
        lines += [report["note"], ""]
    setting = [
        f"{report['questions']} questions",
        f"{report['passages']} passages"
        + (" (corpus sample)" if run.get("sampled") else "")
        + (", titles dropped" if run.get("titles_dropped") else "")
        + (
            f", each a document of {run['passages_joined']} joined passages"
            if run.get("passages_joined")
            else ""
        ),
        f"embedder {run.get('embed_model', '?')}",
        f"{run.get('cpus', '?')} CPUs",
        f"started {run.get('started', '?')}",
    ]
    if run.get("embed_cache"):
        setting.append("embedding cache")
    setting += window_notes(report)
    lines += ["*" + "; ".join(setting) + f"; report `{path.name}`.*", ""]
    lines += ["```bash", reproduce_command(report), "```", ""]
    # Drop the caption line, and LLM columns that are zero throughout (said below).
    table = format_table(report, drop_zero=True).split("\n", 2)[2]
    lines += [table, ""]
    if _no_llm_calls(report):
        lines += ["No LLM calls were made (the LLM call and token columns are all zero).", ""]
    if plot:
        lines += [f"![recall@k, {title}]({plot})", ""]
    if cost_plot:
        lines += [f"![recall@5 against index and query time, {title}]({cost_plot})", ""]
    facts = _facts(report)
    if facts:
        lines += ['??? info "What the methods reported"', ""]
        lines += ["    " + f for f in facts]
        lines.append("")
    return "\n".join(lines)


def render_page(
    paths: Sequence[str | os.PathLike],
    *,
    plots_dir: str | os.PathLike | None = None,
    page_dir: str | os.PathLike = "docs",
    write_plots: bool = True,
) -> str:
    """The whole results page, linking one recall plot per report in ``plots_dir``.

    Args:
        plots_dir: Where the plots live (``None``: no plots).
        page_dir: The folder of the page, for relative links.
        write_plots: Draw the plots (off: only link them, e.g. to check the page).
    """
    sections = [HEADER]
    for path, report in load_reports(paths):
        plot = cost_plot = None
        if plots_dir is not None:
            png = Path(plots_dir) / (path.stem + ".png")
            cost = Path(plots_dir) / (path.stem + "-cost.png")
            if write_plots:
                from .plot import plot_cost, plot_recall

                png.parent.mkdir(parents=True, exist_ok=True)
                plot_recall(report, png)
                if not plot_cost(report, cost):
                    cost.unlink(missing_ok=True)
            plot = os.path.relpath(png, page_dir).replace(os.sep, "/")
            if cost.is_file():
                cost_plot = os.path.relpath(cost, page_dir).replace(os.sep, "/")
        sections.append(render_section(path, report, plot, cost_plot))
    return "\n".join(sections).rstrip() + "\n"
