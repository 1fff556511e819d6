"""Link predictors: a planted link structure, determinism, exact inductive scoring."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from llama_index_graphrag_ext.core.embeddings import knn_graph, mutual_knn_edges, normalize_rows
from llama_index_graphrag_ext.lprag import (
    PREDICTORS,
    LinkGraph,
    LinkScorer,
    TrainConfig,
    train_link_predictor,
)
from llama_index_graphrag_ext.lprag.models import ChunkStructure, _tensors, pair_logits


def planted(seed: int = 0) -> LinkGraph:
    """Queries link to the chunks of one cluster, but query and chunk features live in
    disjoint coordinates, so the text similarity alone is at chance: a model must learn
    the cluster correspondence."""
    rng = np.random.default_rng(seed)
    clusters, n, d, m = 6, 90, 24, 180
    perm = rng.permutation(clusters)
    cl_c = np.arange(n) % clusters
    z_c = np.zeros((n, d), np.float32)
    z_c[np.arange(n), 8 + perm[cl_c]] = 1.0
    z_c = normalize_rows(z_c + rng.normal(0, 0.25, (n, d)))
    cl_q = rng.integers(0, clusters, m)
    z_q = np.zeros((m, d), np.float32)
    z_q[np.arange(m), cl_q] = 1.0
    z_q = normalize_rows(z_q + rng.normal(0, 0.25, (m, d)))
    idx, sims = knn_graph(z_c, 5)
    rows, cols, weights = mutual_knn_edges(idx, sims)
    q_nb, _ = knn_graph(z_q, 4, others=z_c)
    pos_q, pos_c = [], []
    for q in range(m):
        for c in rng.choice(np.flatnonzero(cl_c == cl_q[q]), 3, replace=False):
            pos_q.append(q)
            pos_c.append(c)
    return LinkGraph(
        z_c, rows, cols, weights, z_q, q_nb, np.ones(q_nb.shape, np.float32),
        np.array(pos_q), np.array(pos_c),
    )  # fmt: skip


FAST = {"hidden": 32, "lr": 0.01, "epochs": 80, "eval_every": 5, "patience": 20, "threads": 1}


@pytest.mark.parametrize("predictor", PREDICTORS)
def test_each_predictor_learns_a_planted_structure(predictor):
    data = planted()
    cos_pos = (data.z_queries[data.pos_query] * data.z_chunks[data.pos_chunk]).sum(1)
    assert abs(cos_pos.mean()) < 0.1  # the similarity alone carries no signal
    _, report = train_link_predictor(data, TrainConfig(predictor=predictor, **FAST))
    assert report.val_auc is not None and report.val_auc > 0.75, report.history
    assert report.val_links > 0 and report.train_seconds > 0


def test_training_is_deterministic_under_a_seed():
    data = planted()
    config = TrainConfig(predictor="ncn", **{**FAST, "epochs": 15})
    m1, r1 = train_link_predictor(data, config)
    m2, r2 = train_link_predictor(data, config)
    for (k, a), (_, b) in zip(m1.state_dict().items(), m2.state_dict().items(), strict=True):
        assert torch.equal(a, b), k
    assert r1.history == r2.history
    m3, _ = train_link_predictor(
        data, TrainConfig(predictor="ncn", **{**FAST, "epochs": 15, "seed": 1})
    )
    assert not torch.equal(m1.decoder[0].weight, m3.decoder[0].weight)


@pytest.mark.parametrize("predictor", PREDICTORS)
def test_inductive_scoring_matches_the_training_computation(predictor):
    data = planted()
    model, _ = train_link_predictor(data, TrainConfig(predictor=predictor, **{**FAST, "epochs": 5}))
    structure = ChunkStructure(data.num_chunks, data.edge_rows, data.edge_cols, data.edge_weights)
    scorer = LinkScorer(model, data.z_chunks, structure)
    q = 7
    new = scorer.logits(data.z_queries[q], data.query_neighbors[q], data.query_weights[q])
    with torch.no_grad():
        ref = pair_logits(
            model, _tensors(data), structure, data.query_neighbors,
            np.full(data.num_chunks, q), np.arange(data.num_chunks),
        ).numpy()  # fmt: skip
    np.testing.assert_allclose(new, ref, rtol=1e-5, atol=1e-5)


def test_gcn_query_state_equals_a_full_graph_gcn_by_hand():
    """One GCN layer on the chunk graph plus one query node that only receives messages."""
    data = planted()
    model, _ = train_link_predictor(data, TrainConfig(predictor="gcn", **{**FAST, "epochs": 3}))
    n, q = data.num_chunks, 3
    adj = np.zeros((n + 1, n + 1), np.float32)
    adj[data.edge_rows, data.edge_cols] = np.clip(data.edge_weights, 1e-3, None)
    adj[data.edge_cols, data.edge_rows] = np.clip(data.edge_weights, 1e-3, None)
    adj[n, data.query_neighbors[q]] = 1.0  # row = target: the query receives
    adj += np.eye(n + 1, dtype=np.float32)
    deg = adj.sum(1)
    norm = adj / np.sqrt(deg[:, None] * deg[None, :])
    x = np.vstack([data.z_chunks, data.z_queries[q]])
    lin = model.lin[0]
    full = (norm @ x) @ lin.weight.detach().numpy().T + lin.bias.detach().numpy()
    structure = ChunkStructure(n, data.edge_rows, data.edge_cols, data.edge_weights)
    states = model.chunk_states(torch.from_numpy(data.z_chunks), structure)
    h_q = model.query_states(
        torch.from_numpy(data.z_queries[q : q + 1]),
        torch.from_numpy(data.query_neighbors[q : q + 1]),
        torch.from_numpy(data.query_weights[q : q + 1]),
        states, structure,
    )  # fmt: skip
    np.testing.assert_allclose(states[-1].detach().numpy(), full[:n], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(h_q.detach().numpy()[0], full[n], rtol=1e-4, atol=1e-5)


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError):
        TrainConfig(predictor="seal")
    with pytest.raises(ValueError):
        TrainConfig(epochs=0)
    empty = planted()
    empty.pos_query = empty.pos_query[:0]
    empty.pos_chunk = empty.pos_chunk[:0]
    with pytest.raises(ValueError):
        train_link_predictor(empty)


def _grads_after_step(model, data, pair_batch):
    from llama_index_graphrag_ext.lprag.models import _bce_step, _Scoring

    rng = np.random.default_rng(3)
    tq = data.pos_query
    neg_q = np.repeat(tq, 2)
    pq = np.concatenate([tq, neg_q])
    pc = np.concatenate([data.pos_chunk, rng.integers(0, data.num_chunks, len(neg_q))])
    structure = ChunkStructure(data.num_chunks, data.edge_rows, data.edge_cols, data.edge_weights)
    model.zero_grad(set_to_none=True)
    scoring = _Scoring(model, _tensors(data), structure, data.query_neighbors)
    loss = _bce_step(scoring, pq, pc, len(tq), pair_batch)
    return loss, {k: p.grad.clone() for k, p in model.named_parameters()}


@pytest.mark.parametrize("predictor", PREDICTORS)
@pytest.mark.parametrize("layers", [1, 2])
def test_a_sliced_epoch_has_the_full_batch_loss_and_gradient(predictor, layers):
    """Large graphs sum the epoch's gradient over slices of pairs: same update, less memory."""
    from llama_index_graphrag_ext.lprag import LinkPredictor

    data = planted()
    torch.manual_seed(0)
    model = LinkPredictor(predictor, data.z_chunks.shape[1], hidden=16, layers=layers)
    torch.nn.init.normal_(model.decoder[2].weight)  # a zero last layer hides the gradient
    whole_loss, whole = _grads_after_step(model, data, pair_batch=10**6)
    sliced_loss, sliced = _grads_after_step(model, data, pair_batch=97)
    assert sliced_loss == pytest.approx(whole_loss, rel=1e-5)
    assert whole.keys() == sliced.keys()
    for name, grad in whole.items():
        assert grad.abs().sum() > 0, name  # every weight is reached
        torch.testing.assert_close(sliced[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_training_in_pair_slices_matches_full_batch_training():
    data = planted()
    base = {**FAST, "epochs": 15, "predictor": "ncn"}
    _, whole = train_link_predictor(data, TrainConfig(**base))
    _, sliced = train_link_predictor(data, TrainConfig(**base, pair_batch=128))
    assert len(whole.history) == len(sliced.history)
    for (e1, loss1, auc1), (e2, loss2, auc2) in zip(whole.history, sliced.history, strict=True):
        assert e1 == e2
        assert auc2 == pytest.approx(auc1, abs=2e-3)
        if loss1 is not None:
            assert loss2 == pytest.approx(loss1, rel=1e-3)
    with pytest.raises(ValueError, match="pair_batch"):
        TrainConfig(pair_batch=0)


def test_large_link_sets_are_sampled_per_epoch_and_still_learn():
    data = planted()
    config = TrainConfig(predictor="ncn", **FAST, links_per_epoch=128)
    m1, report = train_link_predictor(data, config)
    assert report.train_links > 128 and report.epoch_links == 128
    assert report.val_auc is not None and report.val_auc > 0.75, report.history
    m2, again = train_link_predictor(data, config)  # the samples come from the seed
    assert again.history == report.history
    assert torch.equal(m1.decoder[0].weight, m2.decoder[0].weight)
    _, everything = train_link_predictor(data, TrainConfig(predictor="ncn", **FAST))
    assert everything.epoch_links == everything.train_links
    assert everything.history != report.history
