"""The ``fill`` option (K chunks even when the graph collects fewer) and pooled chunk vectors."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_graphrag_ext.core.search import MatrixSearch
from llama_index_graphrag_ext.qcg import QCGConfig, QueryLayer, QueryPair
from llama_index_graphrag_ext.qcg.config import QCGRetrieval
from llama_index_graphrag_ext.qcg.retriever import collect

DIM = 24
QUERY = np.eye(DIM, dtype=np.float32)[0]


def _unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def _probe_layer():
    """Chunk A: 15 near-identical nodes close to the question; 12 chunks of one weaker node.

    With the paper's MultiHop-RAG setting (k=3, n=15, γ=1, h=1, same-chunk
    neighbours allowed) every retrieved node is A's and so is each of its 3
    nearest neighbours: step 3 collects one chunk for K = 10.
    """
    rng = np.random.default_rng(0)
    pairs, rows = [], []
    for i in range(15):
        pairs.append(QueryPair("A", i, f"a{i}"))
        rows.append(_unit(QUERY * 10 + np.eye(DIM)[1] * 2 + rng.normal(0, 0.05, DIM)))
    for j in range(12):
        chunk = f"C{j:02d}"
        pairs.append(QueryPair(chunk, 0, chunk))
        rows.append(_unit(QUERY * (0.6 - 0.04 * j) + np.eye(DIM)[j + 2]))
    matrix = np.vstack(rows)
    vectors = {
        c: matrix[[i for i, p in enumerate(pairs) if p.chunk_id == c]].mean(0)
        for c in dict.fromkeys(p.chunk_id for p in pairs)
    }
    return QueryLayer.build(pairs, matrix, 3, chunk_vectors=vectors)


def _run(layer, **kw):
    params = QCGRetrieval(K=10, n=15, gamma=1.0, h=1, **kw)
    found = collect(layer, QUERY, params, MatrixSearch(layer.matrix))
    return [layer.chunks[c] for c in found.chunk_codes], found


def test_probe_collects_one_chunk_without_fill():
    chunks, found = _run(_probe_layer())
    assert chunks == ["A"]
    assert found.collected_chunks == 1 and found.filled == 0


def test_fill_completes_k_by_chunk_cosine_after_the_collected_chunks():
    chunks, found = _run(_probe_layer(), fill=True)
    # A first (collected), then the nine best other chunks by their own cosine.
    assert chunks == ["A"] + [f"C{j:02d}" for j in range(9)]
    assert found.collected_chunks == 1 and found.filled == 9
    assert np.all(np.diff(found.chunk_scores[1:]) <= 0)
    assert np.isnan(found.chunk_cos[0]) and np.all(np.isfinite(found.chunk_cos[1:]))


def test_fill_never_runs_when_k_chunks_are_collected():
    layer = _probe_layer()
    params = QCGRetrieval(K=1, n=15, gamma=1.0, fill=True)
    found = collect(layer, QUERY, params, MatrixSearch(layer.matrix))
    assert found.filled == 0 and len(found.chunk_codes) == 1


def test_fill_is_off_in_the_paper_presets_and_on_in_default():
    assert not QCGConfig.preset("paper").retrieval.fill
    assert not QCGConfig.preset("paper-lihuaworld").retrieval.fill
    assert QCGConfig.preset("default").retrieval.fill


@pytest.mark.parametrize("fill", [False, True])
def test_retriever_counts_and_marks_fills(bow_embed, fill):
    from llama_index.core.schema import Document

    from llama_index_graphrag_ext.core.nodes import PassageParser
    from llama_index_graphrag_ext.qcg import QueryCentricGraphIndex

    docs = [
        Document(id_=f"d{i}", text=f"Town {i} has a river. The bridge {i} is old.")
        for i in range(6)
    ] + [Document(id_="zoo", text="The zebra lives in the zoo. Zebras eat grass.")]
    index = QueryCentricGraphIndex.from_documents(
        docs, embed_model=bow_embed, transformations=[PassageParser()], config="default"
    )
    # γ = 1.3 (cos >= 0.3): only the zebra sentences pass (hop 0: no neighbour).
    retriever = index.as_retriever(similarity_top_k=4, gamma=1.3, h=0, fill=fill)
    results = retriever.retrieve("zebra zoo")
    assert results[0].node.ref_doc_id == "zoo"
    assert results[0].node.metadata["evidence"]["filled"] is False
    stats = retriever.stats
    assert stats["queries"] == 1 and stats["short_queries"] == 1
    if fill:
        assert len(results) == 4
        assert [r.node.metadata["evidence"]["filled"] for r in results] == [False] + [True] * 3
        assert stats["filled_queries"] == 1 and stats["filled_chunks"] == 3
    else:
        assert len(results) == 1 and stats["filled_chunks"] == 0


def test_pooled_chunk_vectors_embed_no_chunk_text(bow_embed):
    from llama_index.core.schema import Document

    from llama_index_graphrag_ext.core.nodes import PassageParser
    from llama_index_graphrag_ext.qcg import QueryCentricGraphIndex

    seen: list[str] = []
    original = type(bow_embed)._get_text_embeddings

    class Counting(type(bow_embed)):
        def _get_text_embeddings(self, texts):
            seen.extend(texts)
            return original(self, texts)

    embed = Counting(embed_batch_size=4)
    docs = [
        Document(id_=f"d{i}", text=f"Town {i} has a river. The bridge {i} is old.")
        for i in range(3)
    ]
    index = QueryCentricGraphIndex.from_documents(
        docs,
        embed_model=embed,
        transformations=[PassageParser()],
        config="default",
        chunk_vectors="pooled",
    )
    layer = index.layer
    assert len(seen) == len(layer)  # the sentences only, no chunk text
    for code in range(len(layer.chunks)):
        mean = layer.matrix[layer.chunk_codes == code].mean(axis=0)
        assert np.allclose(layer.chunk_matrix[code], mean / np.linalg.norm(mean), atol=1e-6)
    assert index.config.graph.chunk_vectors == "pooled"
    with pytest.raises(ValueError, match="chunk_vectors"):
        QueryCentricGraphIndex(nodes=[], embed_model=embed, chunk_vectors="nope")
