"""The run: every (method, size) cell, each in its own process, into one JSON report."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..registry import resolve
from .cell import measure_cell
from .config import ScaleConfig
from .report import fit_report

logger = logging.getLogger(__name__)


def _run_isolated(method: str, size: int, config: ScaleConfig) -> dict[str, Any]:
    """Run :func:`measure_cell` in a child process, with the config's timeout."""
    with tempfile.TemporaryDirectory(prefix="graphrag-scale-cell-") as tmp:
        result = Path(tmp) / "cell.json"
        log = Path(tmp) / "cell.log"
        request = {"method": method, "size": size, "config": asdict(config), "out": str(result)}
        cmd = [sys.executable, "-m", "llama_index_graphrag_ext.eval.scale", json.dumps(request)]
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
        if config.blas_threads:
            for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                env[name] = str(config.blas_threads)
        with open(log, "w") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
            try:
                proc.wait(timeout=config.timeout)
            except subprocess.TimeoutExpired:
                return {"error": f"timeout: over {config.timeout:.0f} s (build and queries)"}
            finally:  # also when this process is interrupted: leave no orphan behind
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        if proc.returncode == 0 and result.is_file():
            return json.loads(result.read_text())
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        return {"error": f"exit code {proc.returncode}: " + " | ".join(tail)}


def run_scale(
    config: ScaleConfig,
    out: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Measure every (method, size) cell, smallest sizes first; return the report.

    With ``out``, the JSON report is rewritten after every cell, and cells it
    already holds without an error are kept rather than measured again (so a
    run can be extended to a bigger size later). A method that fails or times
    out at one size is skipped at the larger ones.
    """
    for name in config.methods:  # fail fast on typos
        resolve(name, config.options)
    previous: dict[str, dict] = {}
    history: list[dict] = []
    if out and Path(out).is_file():
        loaded = json.loads(Path(out).read_text())
        previous = loaded.get("cells", {})
        history = [*loaded.get("history", []), *([loaded["run"]] if "run" in loaded else [])]
    report: dict[str, Any] = {
        "run": {
            "methods": config.methods,
            "sizes": sorted(config.sizes),
            "benchmarks": [Path(b).name for b in config.benchmarks],
            "queries_per_set": config.queries_per_set,
            "top_k": config.top_k,
            "embed_model": config.embed_model,
            "calibrate_with": config.calibrate_with,
            "embed_cache": config.embed_cache,
            "timeout_s": config.timeout,
            "blas_threads": config.blas_threads,
            "seed": config.seed,
            "cpus": os.cpu_count(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
        "cells": dict(previous),
        "history": history,  # the earlier invocations that wrote cells of this file
    }
    failed: set[str] = set()
    for size in sorted(config.sizes):
        for method in config.methods:
            key = cell_key(method, size)
            if key in previous and "error" not in previous[key]:
                logger.info("%s: kept from %s", key, out)
                continue
            if method in failed:
                report["cells"][key] = {
                    "method": method,
                    "chunks": size,
                    "skipped": "failed at a smaller size",
                }
                continue
            logger.warning("scale: %s at %d chunks", method, size)
            start = time.perf_counter()
            try:
                if config.isolate:
                    row = _run_isolated(method, size, config)
                else:
                    row = measure_cell(method, size, config)
            except Exception as exc:  # one broken method must not lose the others' results
                logger.exception("scale cell %s failed", key)
                row = {"error": f"{type(exc).__name__}: {exc}"}
            row = {"method": method, "chunks": size, **row}
            row["cell_seconds"] = round(time.perf_counter() - start, 1)
            if "error" in row:
                failed.add(method)
                logger.warning("scale: %s failed: %s", key, row["error"])
            report["cells"][key] = row
            report["fits"] = fit_report(report)
            if out:
                write_json(report, out)
    report["fits"] = fit_report(report)
    if out:
        write_json(report, out)
    return report


def cell_key(method: str, size: int) -> str:
    """The report's key of one cell."""
    return f"{method}@{size}"


def write_json(report: dict[str, Any], path: str | os.PathLike) -> None:
    """Write the report atomically (a crash mid-write keeps the previous file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
