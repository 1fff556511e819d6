"""Growth curves: how each LLM-free method's cost grows with the corpus (``graphrag-ext scale``).

Each (method, size) cell runs in its own Python process, so one method's
memory never shows in another's figures and a slow or crashing method is cut
off by a timeout without blocking the rest. A cell measures:

* ``index_seconds``: wall time of the method's builder (the registry's
  ``build``), and ``embed_seconds``, the part of it spent computing
  embeddings that the shared cache (``--embed-cache``) did not hold;
  ``index_seconds_no_embed`` is the difference, and
  ``index_seconds_with_embed`` adds an estimate of embedding every text the
  build asked for (``embed_seconds_est``: a timed sample of those texts,
  encoded fresh, scaled to their count).
* ``retained_mb``: resident memory the built index keeps (after garbage
  collection and ``malloc_trim``) over the process before the build;
  ``peak_mb``: the highest resident memory during the build, over the same
  baseline. ``vectors_mb`` is what the vectors alone take as float32
  (texts the build embedded x dimension x 4 bytes).
* ``disk_mb``: the size of the index persisted to a temporary folder.
* ``p50_ms`` / ``p95_ms``: retrieval latency over a fixed question set
  (including the query's embedding by the run's embedder), after one untimed
  warm-up query; ``query_embed_ms``: the real embedder's time per question.

With ``--embed-model hash:384`` the run uses
[`HashEmbedding`][llama_index_graphrag_ext.testing.embeddings.HashEmbedding], a
near-free stand-in of MiniLM's dimension, so corpora too large to embed on
the machine can still be measured; the real embedder (``--calibrate-with``)
is then timed on samples for ``embed_seconds_est`` and ``query_embed_ms``.

Growth exponents are least-squares slopes on log-log axes (see
[`fit_exponent`][llama_index_graphrag_ext.eval.scale.report.fit_exponent]).

The modules, in the order a run uses them:

* `config`: the defaults, the issue's targets and `ScaleConfig`;
* `corpus`: the synthetic corpora (benchmark passages pooled, cut, perturbed);
* `embedders`: the run's embedder and the meter that counts its texts and seconds;
* `cell`: one (method, size) cell built and measured in this process
  (`python -m llama_index_graphrag_ext.eval.scale` runs one in a child process);
* `run`: every cell, isolated and time-limited, into one JSON report;
* `report`: exponent fits, targets, tables and the log-log plot;
* `cli`: the ``graphrag-ext scale`` flags.
"""

from ...core.defaults import make_embedder
from .cell import measure_cell
from .cli import add_arguments, config_from_args
from .config import (
    DEFAULT_METHODS,
    DEFAULT_SIZES,
    TARGET_MEMORY_RATIO,
    TARGET_P50_MS,
    TARGET_TIME_EXPONENT,
    ScaleConfig,
)
from .corpus import (
    MAX_PASSAGE_CHARS,
    default_benchmark_dirs,
    load_pool,
    perturb,
    query_set,
    split_sentences_rule,
    synthesize,
)
from .embedders import MeteredEmbedding
from .report import fit_exponent, fit_report, format_scale_table, plot_scale
from .run import cell_key, run_scale, write_json

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
