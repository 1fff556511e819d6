"""``ensemble``: several predictors trained from consecutive seeds, their logits averaged."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from llama_index.core.schema import Document

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.lprag import ChunkQueryLinkIndex, LinkScorer, train_link_predictor

from .test_lprag_index import DOCS, SMALL

QUESTIONS = ("Who published the comic book Crux?", "river in France", "capital of Poland")


def _build(bow_embed, **settings):
    return ChunkQueryLinkIndex.from_documents(
        DOCS, embed_model=bow_embed, transformations=[PassageParser()], config="pseudo",
        **{**SMALL, **settings},
    )  # fmt: skip


def _unit(index, question: str) -> np.ndarray:
    vector = np.asarray(index.embed_model.get_query_embedding(question), np.float32)
    return vector / np.linalg.norm(vector)


def _logits(index, question: str) -> np.ndarray:
    """The link logits ``φ`` of every chunk for ``question``."""
    retriever = index.as_retriever(similarity_top_k=None, tau=0.0)
    return retriever._probabilities(retriever._snapshot(), _unit(index, question))[1]


@pytest.fixture
def pair(bow_embed):
    return _build(bow_embed, ensemble=2)


def test_member_i_is_the_predictor_trained_from_seed_plus_i(pair, bow_embed):
    single = _build(bow_embed)  # seed 0: exactly the first member
    for key, value in single._models[0].state_dict().items():
        assert torch.equal(pair._models[0].state_dict()[key], value)
    config = pair.config.training.model_copy(update={"seed": 1})
    second, _ = train_link_predictor(pair._link_graph(), config)
    for key, value in second.state_dict().items():
        assert torch.equal(pair._models[1].state_dict()[key], value)
    assert len(pair.train_reports) == 2 and pair.train_report == pair.train_reports[0]


def test_an_ensemble_scores_the_mean_of_its_members_logits(pair, bow_embed):
    single = _build(bow_embed)
    snap = pair._snapshot
    second = LinkScorer(pair._models[1], snap.z_chunks, snap.scorer.scorers[1].graph)
    for question in QUESTIONS:
        unit = _unit(pair, question)
        nbrs = pair.nearest_chunk_rows(snap, unit, pair.config.graph.M)
        two = second.logits(unit, nbrs, np.ones(len(nbrs), np.float32)).astype(np.float64)
        one = _logits(single, question)
        assert not np.allclose(one, two)  # the seeds train different predictors
        np.testing.assert_allclose(_logits(pair, question), (one + two) / 2, rtol=1e-5, atol=1e-6)
    ranked = pair.as_retriever(similarity_top_k=3).retrieve(QUESTIONS[0])
    assert len(ranked) == 3 and ranked[0].node.metadata["evidence"]["method"] == "lp-rag"


def test_an_ensemble_persists_every_member(pair, bow_embed, tmp_path):
    pair.persist(tmp_path / "lp")
    assert (tmp_path / "lp" / "link_predictor.pt").is_file()
    assert (tmp_path / "lp" / "link_predictor.1.pt").is_file()
    loaded = ChunkQueryLinkIndex.load(tmp_path / "lp", embed_model=bow_embed)
    assert loaded.config == pair.config and len(loaded.train_reports) == 2
    assert [r.to_dict() for r in loaded.train_reports] == [r.to_dict() for r in pair.train_reports]
    for question in QUESTIONS:
        np.testing.assert_array_equal(_logits(loaded, question), _logits(pair, question))


def test_an_insert_fine_tunes_every_member(pair):
    pair.insert(Document(id_="lyon", text="Lyon is a city in France. Lyon lies on the Rhone."))
    # Each member went on training on the new graph (its queries), from its own weights.
    assert len(pair._models) == 2 and len(pair.train_reports) == 2
    assert all(r.queries == pair.num_queries for r in pair.train_reports)
    assert all(r.epochs_run <= pair.config.training.finetune_epochs for r in pair.train_reports)
    top = pair.as_retriever(similarity_top_k=9).retrieve("Lyon city on the Rhone")
    assert "lyon" in [r.node.ref_doc_id for r in top]


def test_loading_with_another_ensemble_size_warns_and_follows_it_at_the_next_training(
    bow_embed, tmp_path, caplog
):
    single = _build(bow_embed)
    single.persist(tmp_path / "lp")
    loaded = ChunkQueryLinkIndex.load(tmp_path / "lp", embed_model=bow_embed, ensemble=2)
    assert "holds 1 trained predictor(s) but ensemble=2" in caplog.text
    # Until it trains again, the index scores exactly what was saved.
    np.testing.assert_array_equal(_logits(loaded, QUESTIONS[0]), _logits(single, QUESTIONS[0]))
    loaded.insert(Document(id_="lyon", text="Lyon is a city in France. Lyon lies on the Rhone."))
    assert len(loaded._models) == 2 and len(loaded.train_reports) == 2


def test_ensemble_must_be_positive(bow_embed):
    with pytest.raises(ValueError, match="ensemble"):
        _build(bow_embed, ensemble=0)
