"""The local MiniLM cross-encoder, and the FlagEmbedding reranker path it stands in for.

``build_minilm_cross_encoder`` writes an untrained one-label cross-encoder; these
tests check the plumbing (offline build and load, one score per pair, ordering,
LlamaIndex's ``FlagEmbeddingReranker`` agreeing with ``FlagReranker``), never the
quality of the scores, which is nil.

FlagEmbedding 1.4.2 imports ``transformers.modeling_attn_mask_utils`` when the
package is imported, and transformers removed that module in 5.10, so the
project pins ``transformers<5.10``; ``test_transformers_pin_keeps_flagembedding_importable``
says so if that stops holding. FlagEmbedding is imported inside the tests that
use it, so the builder tests still run (and the pin test explains) if it breaks.
"""

from __future__ import annotations

import contextlib
import filecmp
import json
import math
import socket

import pytest
from safetensors import safe_open
from support.cross_encoder import build_minilm_cross_encoder

QUERY = "Which river flows through Paris?"
PASSAGES = [
    "The Seine flows through Paris before reaching the English Channel at Le Havre.",
    "Bananas are rich in potassium.",
    "The Thames runs through London.",
    "Paris is the capital and most populous city of France, on the river Seine.",
    "A sonnet has fourteen lines.",
    "Rivers carry water from mountains to the sea, shaping valleys on the way.",
]
PAIRS = [[QUERY, p] for p in PASSAGES]


@contextlib.contextmanager
def _no_network():
    """Fail any outbound connection: 'offline' is enforced, not assumed."""

    def refuse(*args, **kwargs):
        raise OSError("network access attempted in an offline test")

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(socket.socket, "connect", refuse)
        mp.setattr(socket.socket, "connect_ex", refuse)
        mp.setattr(socket, "create_connection", refuse)
        yield


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    with _no_network():
        return build_minilm_cross_encoder(tmp_path_factory.mktemp("minilm-ce"), seed=0)


def _classifier(path):
    with safe_open(str(path / "model.safetensors"), "pt") as f:
        return f.get_tensor("classifier.weight"), f.get_tensor("classifier.bias")


# ------------------------------------------------------------------------- the builder


def test_builds_offline_in_the_reranker_layout(model_path):
    names = {p.name for p in model_path.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "vocab.txt"} <= names
    assert not [n for n in names if n.startswith(".building-")]
    config = json.loads((model_path / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert len(config["id2label"]) == 1  # one output label: a relevance logit
    # The bi-encoder's tokenizer padded everything to 128 tokens; the copy must not.
    tokenizer = json.loads((model_path / "tokenizer.json").read_text())
    assert tokenizer["padding"] is None and tokenizer["truncation"] is None
    weight, bias = _classifier(model_path)
    assert tuple(weight.shape) == (1, 384) and float(bias.abs().sum()) == 0.0


def test_build_is_idempotent_and_seeded(model_path, tmp_path):
    stamp = model_path / "minilm_cross_encoder.json"
    before = (stamp.stat().st_mtime_ns, (model_path / "model.safetensors").stat().st_mtime_ns)
    assert build_minilm_cross_encoder(model_path, seed=0) == model_path
    after = (stamp.stat().st_mtime_ns, (model_path / "model.safetensors").stat().st_mtime_ns)
    assert after == before  # reused, not rewritten

    with _no_network():
        again = build_minilm_cross_encoder(tmp_path / "again", seed=0)
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        assert filecmp.cmp(model_path / name, again / name, shallow=False), name

    # Another seed rebuilds the folder in place with another head.
    with _no_network():
        reseeded = build_minilm_cross_encoder(again, seed=1)
    assert json.loads((reseeded / "minilm_cross_encoder.json").read_text())["seed"] == 1
    w0, _ = _classifier(model_path)
    w1, _ = _classifier(reseeded)
    assert not bool((w0 == w1).all())


def test_refuses_a_folder_holding_other_files(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="notes.txt"):
        build_minilm_cross_encoder(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


# ------------------------------------------------------------- FlagEmbedding and LlamaIndex


def test_transformers_pin_keeps_flagembedding_importable():
    import transformers
    from packaging.version import Version

    pin = (
        "FlagEmbedding 1.4.2 imports transformers.modeling_attn_mask_utils when the "
        "package is imported, and transformers removed that module in 5.10; "
        "pyproject.toml pins transformers>=4.44,<5.10 for that reason"
    )
    installed = Version(transformers.__version__)
    assert installed < Version("5.10"), f"transformers {installed} is installed: {pin}"
    try:
        import FlagEmbedding  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"import FlagEmbedding failed ({exc!r}) under transformers {installed}: {pin}")


def test_flag_reranker_scores_each_pair_deterministically(model_path):
    from FlagEmbedding import FlagReranker

    with _no_network():
        first = FlagReranker(str(model_path), use_fp16=False, devices=["cpu"])
        second = FlagReranker(str(model_path), use_fp16=False, devices=["cpu"])
        scores = first.compute_score(PAIRS)
        again = second.compute_score(PAIRS)
        # FlagEmbedding 1.4.2 returns a one-element list (not a float) for one pair.
        one = first.compute_score([PAIRS[0]])
    assert len(scores) == len(PAIRS)
    assert all(isinstance(s, float) and math.isfinite(s) for s in scores)
    assert len(set(scores)) == len(scores)  # distinct, so orderings below mean something
    assert again == scores
    assert isinstance(one, list) and len(one) == 1


def test_llama_index_wrapper_returns_top_n_by_flag_reranker_score(model_path):
    from FlagEmbedding import FlagReranker
    from llama_index.core.schema import NodeWithScore, TextNode
    from llama_index.postprocessor.flag_embedding_reranker import FlagEmbeddingReranker

    top_n = 3
    nodes = [NodeWithScore(node=TextNode(text=p, id_=f"n{i}")) for i, p in enumerate(PASSAGES)]
    with _no_network():
        reranker = FlagEmbeddingReranker(model=str(model_path), top_n=top_n, use_fp16=False)
        # The wrapper builds FlagReranker(model, use_fp16=...) with default devices: match it.
        reference = FlagReranker(str(model_path), use_fp16=False)
        expected = dict(zip(PASSAGES, reference.compute_score(PAIRS), strict=True))
        ranked = reranker.postprocess_nodes(nodes, query_str=QUERY)

    assert len(ranked) == top_n
    got = [(n.node.get_content(), n.score) for n in ranked]
    assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
    assert [t for t, _ in got] == sorted(expected, key=expected.get, reverse=True)[:top_n]
    for text, score in got:
        assert score == pytest.approx(expected[text], rel=1e-6, abs=1e-6)
