"""Benchmark adapters: each method's names in the runner, one module per method.

A module here turns a method's index and retriever (or query engine) into
``register_method`` builders, ``(documents, BenchContext) -> BenchSystem``, so
the method packages themselves know nothing of the runner. The registry
imports these modules on first lookup (``BUILTIN_MODULES`` in
[`registry`][llama_index_graphrag_ext.eval.registry]):

* `baselines`: ``dense``, ``bm25``
* `qcg`: ``qcg-sentences``, ``qcg``
* `cue`: ``cue-0.0``, ``cue-<alpha>`` and their ablations
* `chainrag`: ``chainrag-retriever`` (and its edge ablations), ``chainrag``
* `fgrag`: ``fgrag``, ``fgrag-llm``
* `lprag`: ``lprag-pseudo[-<predictor>...]``, ``lprag[-<predictor>...]``
* `compose`: the fusions (``fusion-<mode>:<parts>``), ``shared:<part>`` and aliases
"""
