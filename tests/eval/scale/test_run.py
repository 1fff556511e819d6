"""A tiny end-to-end scale run: cells in and out of a child process, the report, the CLI."""

from __future__ import annotations

import json

import pytest

from llama_index_graphrag_ext.cli import main
from llama_index_graphrag_ext.core.config import ConfigError
from llama_index_graphrag_ext.core.llm.cache import LLMCache
from llama_index_graphrag_ext.eval.scale import (
    ScaleConfig,
    cell_key,
    format_scale_table,
    plot_scale,
    run_scale,
)


def _config(musique_slice, book_set, **kw) -> ScaleConfig:
    return ScaleConfig(
        methods=["dense", "bm25"],
        sizes=[60, 30],
        benchmarks=[str(musique_slice), str(book_set)],
        queries_per_set=4,
        embed_model="mock:16",
        calibrate_with=None,
        isolate=False,
        calibration_texts=8,
        **kw,
    )


def test_tiny_scale_run_writes_valid_json(musique_slice, book_set, tmp_path):
    out = tmp_path / "scale.json"
    cache = tmp_path / "embed.sqlite"
    report = run_scale(_config(musique_slice, book_set, embed_cache=str(cache)), out=out)
    saved = json.loads(out.read_text())
    assert saved["cells"].keys() == report["cells"].keys()
    assert set(saved["cells"]) == {cell_key(m, s) for m in ("dense", "bm25") for s in (30, 60)}
    for key, row in saved["cells"].items():
        assert "error" not in row, (key, row)
        assert row["chunks"] in (30, 60)
        assert row["queries"] == 5  # 4 musique questions and the book set's one
        assert row["index_seconds"] >= row["index_seconds_no_embed"] >= 0
        assert 0 <= row["p50_ms"] <= row["p95_ms"]
    dense = saved["cells"]["dense@60"]
    assert dense["embedded_texts"] == 60 and dense["dimension"] == 16
    assert dense["vectors_mb"] == pytest.approx(60 * 16 * 4 / 2**20, abs=0.01)
    assert dense["disk_mb"] > 0  # the VectorStoreIndex was persisted and measured
    assert saved["cells"]["bm25@60"]["disk_mb"] > 0  # its docstore too
    assert saved["fits"]["dense"]["sizes"] == [30, 60]
    assert saved["fits"]["bm25"]["targets"]["memory_within_2x_vectors_at_largest"] is None
    # The shared cache now holds every chunk's vector.
    assert len(LLMCache(cache)) >= 60

    table = format_scale_table(saved)
    assert "| dense | 30 |" in table and "| bm25 |" in table
    plot_scale(saved, tmp_path / "scale.png")
    assert (tmp_path / "scale.png").stat().st_size > 5000

    # Cells already in the report are kept, not measured again.
    again = run_scale(_config(musique_slice, book_set), out=out)
    assert again["cells"]["dense@30"] == saved["cells"]["dense@30"]


def test_timeout_is_recorded_and_larger_sizes_skipped(musique_slice, book_set, tmp_path):
    config = _config(musique_slice, book_set, timeout=0.2)
    config.methods, config.isolate = ["bm25"], True
    report = run_scale(config, out=tmp_path / "scale.json")
    assert report["cells"]["bm25@30"]["error"].startswith("timeout")
    assert report["cells"]["bm25@60"]["skipped"] == "failed at a smaller size"
    assert "bm25" not in report["fits"]


def test_unknown_method_fails_fast(musique_slice, book_set):
    config = _config(musique_slice, book_set)
    config.methods = ["no-such-method"]
    with pytest.raises(ConfigError, match="unknown method"):
        run_scale(config)


def test_cli_scale_runs_a_cell_in_a_child_process(musique_slice, book_set, tmp_path, capsys):
    out = tmp_path / "cli.json"
    code = main(
        [
            "scale",
            "--methods",
            "bm25",
            "--sizes",
            "40",
            "--benchmarks",
            f"{musique_slice},{book_set}",
            "--queries-per-set",
            "2",
            "--embed-model",
            "mock:8",
            "--calibrate-with",
            "none",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    row = json.loads(out.read_text())["cells"]["bm25@40"]
    assert row["queries"] == 3 and row["p50_ms"] > 0
    assert "| bm25 | 40 |" in printed
