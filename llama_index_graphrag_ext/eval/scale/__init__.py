"""Growth curves: how each LLM-free method's cost grows with the corpus (``graphrag-ext scale``).

Each (method, size) cell runs in its own process under a timeout, so one
method's memory never shows in another's figures. A cell measures:

* ``index_seconds`` (the registry's ``build``), ``embed_seconds`` (embeddings the
  shared cache did not hold) and ``index_seconds_with_embed`` (plus
  ``embed_seconds_est``, a timed sample of every text the build embedded, scaled);
* ``retained_mb`` (resident memory kept after ``gc`` and ``malloc_trim``) and
  ``peak_mb``, both over the process before the build; ``vectors_mb`` (float32);
* ``disk_mb`` (the persisted index);
* ``p50_ms`` / ``p95_ms`` (retrieval latency, query embedding included, after one
  warm-up) and ``query_embed_ms`` (the real embedder's time per question).

With ``--embed-model hash:384``
([`HashEmbedding`][llama_index_graphrag_ext.core.hash_embedding.HashEmbedding])
corpora too large to embed can be measured; ``--calibrate-with`` times the real
embedder on samples. Growth exponents are log-log slopes
([`fit_exponent`][llama_index_graphrag_ext.eval.scale.report.fit_exponent]).
Modules, in run order: `config`, `corpus`, `embedders`, `cell`, `run`, `report`, `cli`.
"""

from ..._lazy import lazy_exports

#: Public name -> the module defining it, imported on first use (see ``_lazy``).
_EXPORTS = {
    "make_embedder": "...core.defaults",
    "measure_cell": ".cell",
    "add_arguments": ".cli",
    "config_from_args": ".cli",
    "DEFAULT_METHODS": ".config",
    "DEFAULT_SIZES": ".config",
    "TARGET_MEMORY_RATIO": ".config",
    "TARGET_P50_MS": ".config",
    "TARGET_TIME_EXPONENT": ".config",
    "ScaleConfig": ".config",
    "MAX_PASSAGE_CHARS": ".corpus",
    "default_benchmark_dirs": ".corpus",
    "load_pool": ".corpus",
    "perturb": ".corpus",
    "query_set": ".corpus",
    "split_sentences_rule": ".corpus",
    "synthesize": ".corpus",
    "MeteredEmbedding": ".embedders",
    "fit_exponent": ".report",
    "fit_report": ".report",
    "format_scale_table": ".report",
    "plot_scale": ".report",
    "cell_key": ".run",
    "run_scale": ".run",
    "write_json": ".run",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "DEFAULT_METHODS",
    "DEFAULT_SIZES",
    "MAX_PASSAGE_CHARS",
    "TARGET_MEMORY_RATIO",
    "TARGET_P50_MS",
    "TARGET_TIME_EXPONENT",
    "MeteredEmbedding",
    "ScaleConfig",
    "add_arguments",
    "cell_key",
    "config_from_args",
    "default_benchmark_dirs",
    "fit_exponent",
    "fit_report",
    "format_scale_table",
    "load_pool",
    "make_embedder",
    "measure_cell",
    "perturb",
    "plot_scale",
    "query_set",
    "run_scale",
    "split_sentences_rule",
    "synthesize",
    "write_json",
]
