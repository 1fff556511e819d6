"""Link predictors: a planted link structure, determinism, exact inductive scoring,
and agreement with torch-geometric's stock layers on the whole graph."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from llama_index_graphrag_ext.core.embeddings import knn_graph, mutual_knn_edges, normalize_rows
from llama_index_graphrag_ext.lprag import (
    PREDICTORS,
    LinkGraph,
    LinkPredictor,
    LinkScorer,
    train_link_predictor,
)
from llama_index_graphrag_ext.lprag.config import LPRAGTraining
from llama_index_graphrag_ext.lprag.predictor import common_neighbor_sum, pair_logits


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
    _, report = train_link_predictor(data, LPRAGTraining(predictor=predictor, **FAST))
    assert report.val_auc is not None and report.val_auc > 0.75, report.history
    assert report.val_links > 0 and report.train_seconds > 0


def test_training_is_deterministic_under_a_seed():
    data = planted()
    config = LPRAGTraining(predictor="ncn", **{**FAST, "epochs": 15})
    m1, r1 = train_link_predictor(data, config)
    m2, r2 = train_link_predictor(data, config)
    for (k, a), (_, b) in zip(m1.state_dict().items(), m2.state_dict().items(), strict=True):
        assert torch.equal(a, b), k
    assert r1.history == r2.history
    m3, _ = train_link_predictor(
        data, LPRAGTraining(predictor="ncn", **{**FAST, "epochs": 15, "seed": 1})
    )
    assert not torch.equal(m1.decoder[0].weight, m3.decoder[0].weight)


@pytest.mark.parametrize("predictor", PREDICTORS)
def test_inductive_scoring_matches_the_training_computation(predictor):
    data = planted()
    model, _ = train_link_predictor(
        data, LPRAGTraining(predictor=predictor, **{**FAST, "epochs": 5})
    )
    structure = data.structure()
    scorer = LinkScorer(model, data.z_chunks, structure)
    q = 7
    new = scorer.logits(data.z_queries[q], data.query_neighbors[q], data.query_weights[q])
    with torch.no_grad():
        ref = pair_logits(
            model,
            data.tensors(),
            structure,
            np.full(data.num_chunks, q),
            np.arange(data.num_chunks),
        ).numpy()
    np.testing.assert_allclose(new, ref, rtol=1e-5, atol=1e-5)
    rows = np.array([3, 40, 41, 88])
    part = scorer.logits(data.z_queries[q], data.query_neighbors[q], data.query_weights[q], rows)
    np.testing.assert_allclose(part, new[rows], rtol=1e-6, atol=1e-6)


def _with_query(data: LinkGraph, q: int):
    """Edges of the chunk graph (both ways) plus query node ``n`` receiving from its chunks."""
    n = data.num_chunks
    w = np.clip(data.edge_weights, 1e-3, None)
    nb = data.query_neighbors[q]
    src = np.concatenate([data.edge_rows, data.edge_cols, nb])
    dst = np.concatenate([data.edge_cols, data.edge_rows, np.full(len(nb), n)])
    weight = np.concatenate([w, w, data.query_weights[q]]).astype(np.float32)
    x = torch.from_numpy(np.vstack([data.z_chunks, data.z_queries[q]]))
    return x, torch.from_numpy(np.stack([src, dst])), torch.from_numpy(weight)


def _inductive_states(model, data: LinkGraph, q: int):
    structure = data.structure()
    t = data.tensors()
    with torch.no_grad():
        states = model.chunk_states(t["z_chunks"], structure)
        h_q = model.query_states(
            t["z_queries"][q : q + 1], t["query_neighbors"][q : q + 1],
            t["query_weights"][q : q + 1], states, structure,
        )  # fmt: skip
    return states[-1], h_q[0]


@pytest.mark.parametrize("layers", [1, 2])
def test_gcn_states_equal_stock_gcnconv_on_the_whole_graph(layers):
    """The chunk graph plus one query node that only receives messages, run through
    torch-geometric's GCNConv with its own normalisation (self loops, edge weights)."""
    from torch_geometric.nn import GCNConv

    data = planted()
    torch.manual_seed(1)
    model = LinkPredictor("gcn", data.z_chunks.shape[1], hidden=16, layers=layers)
    q, n = 3, data.num_chunks
    x, edge_index, weight = _with_query(data, q)
    for i, conv in enumerate(model.convs):
        stock = GCNConv(conv.in_channels, conv.out_channels)  # normalize, add_self_loops
        stock.load_state_dict(conv.state_dict())
        with torch.no_grad():
            x = stock(x, edge_index, weight)
        x = torch.relu(x) if i < layers - 1 else x
    chunks, query = _inductive_states(model, data, q)
    torch.testing.assert_close(chunks, x[:n], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(query, x[n], rtol=1e-4, atol=1e-5)


def test_sage_with_equal_weights_is_stock_sageconv():
    """The weighted GraphSAGE layer reduces to SAGEConv's mean when weights are equal."""
    from torch_geometric.nn import SAGEConv

    data = planted()
    data.edge_weights = np.full(len(data.edge_weights), 0.5, np.float32)
    data.query_weights = np.full(data.query_weights.shape, 0.5, np.float32)
    torch.manual_seed(1)
    model = LinkPredictor("sage", data.z_chunks.shape[1], hidden=16, layers=1)
    conv = model.convs[0]
    stock = SAGEConv(conv.in_channels, conv.out_channels, aggr="mean")
    stock.lin_l.load_state_dict(conv.lin_rel.state_dict())
    stock.lin_r.load_state_dict(conv.lin_root.state_dict())
    q, n = 5, data.num_chunks
    x, edge_index, _ = _with_query(data, q)
    with torch.no_grad():
        ref = stock(x, edge_index)
    chunks, query = _inductive_states(model, data, q)
    torch.testing.assert_close(chunks, ref[:n], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(query, ref[n], rtol=1e-4, atol=1e-5)


def test_common_neighbors_are_the_intersection_of_neighbour_sets():
    data = planted()
    structure = data.structure()
    adjacent = {i: set() for i in range(data.num_chunks)}
    for a, b in zip(data.edge_rows, data.edge_cols, strict=True):
        adjacent[int(a)].add(int(b))
        adjacent[int(b)].add(int(a))
    rng = np.random.default_rng(0)
    pq = rng.integers(0, data.num_queries, 400)
    pc = rng.integers(0, data.num_chunks, 400)
    h = torch.randn(data.num_chunks, 8, generator=torch.Generator().manual_seed(0))
    got = common_neighbor_sum(
        torch.from_numpy(data.query_neighbors[pq]), torch.from_numpy(pc), h, structure
    )
    shared = 0
    for row, (q, c) in enumerate(zip(pq, pc, strict=True)):
        common = sorted(set(data.query_neighbors[q].tolist()) & adjacent[int(c)])
        shared += bool(common)
        want = h[common].sum(0) if common else torch.zeros(8)
        torch.testing.assert_close(got[row], want, rtol=1e-5, atol=1e-6)
    assert shared > 20  # the planted graph has common neighbours to find


@pytest.mark.parametrize("predictor", PREDICTORS)
def test_a_seed_draws_the_layers_as_nn_linear_does(predictor):
    """Seeded initialisation does not depend on torch-geometric's own initialisers."""
    torch.manual_seed(4)
    model = LinkPredictor(predictor, 12, hidden=8, layers=2)
    torch.manual_seed(4)
    roots = [torch.nn.Linear(12, 8), torch.nn.Linear(8, 8)]
    if predictor == "sage":  # then GraphSAGE's neighbour matrices
        neighbours = [torch.nn.Linear(12, 8, bias=False), torch.nn.Linear(8, 8, bias=False)]
    first = torch.nn.Linear(16 if predictor == "ncn" else 8, 8)
    state = model.state_dict()
    for i, conv in enumerate(model.convs):
        if predictor in ("gcn", "ncn"):
            weight, bias = conv.lin.weight, conv.bias
        elif predictor == "sage":
            weight, bias = conv.lin_root.weight, conv.lin_rel.bias
            assert torch.equal(conv.lin_rel.weight, neighbours[i].weight)
        else:
            weight, bias = conv.weight, conv.bias
        assert torch.equal(weight, roots[i].weight) and torch.equal(bias, roots[i].bias)
    assert torch.equal(state["decoder.0.weight"], first.weight)


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError):
        LPRAGTraining(predictor="seal")
    with pytest.raises(ValueError):
        LPRAGTraining(epochs=0)
    empty = planted()
    empty.pos_query = empty.pos_query[:0]
    empty.pos_chunk = empty.pos_chunk[:0]
    with pytest.raises(ValueError):
        train_link_predictor(empty)


def _grads_after_step(model, data, pair_batch):
    from llama_index_graphrag_ext.lprag.training import _bce_step, _Scoring

    rng = np.random.default_rng(3)
    tq = data.pos_query
    neg_q = np.repeat(tq, 2)
    pq = np.concatenate([tq, neg_q])
    pc = np.concatenate([data.pos_chunk, rng.integers(0, data.num_chunks, len(neg_q))])
    model.zero_grad(set_to_none=True)
    scoring = _Scoring(model, data.tensors(), data.structure())
    loss = _bce_step(scoring, pq, pc, len(tq), pair_batch)
    return loss, {k: p.grad.clone() for k, p in model.named_parameters()}


@pytest.mark.parametrize("predictor", PREDICTORS)
@pytest.mark.parametrize("layers", [1, 2])
def test_a_sliced_epoch_has_the_full_batch_loss_and_gradient(predictor, layers):
    """Large graphs sum the epoch's gradient over slices of pairs: same update, less memory."""
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
    _, whole = train_link_predictor(data, LPRAGTraining(**base))
    _, sliced = train_link_predictor(data, LPRAGTraining(**base, pair_batch=128))
    assert len(whole.history) == len(sliced.history)
    for (e1, loss1, auc1), (e2, loss2, auc2) in zip(whole.history, sliced.history, strict=True):
        assert e1 == e2
        assert auc2 == pytest.approx(auc1, abs=2e-3)
        if loss1 is not None:
            assert loss2 == pytest.approx(loss1, rel=1e-3)
    with pytest.raises(ValueError, match="pair_batch"):
        LPRAGTraining(pair_batch=0)


def test_large_link_sets_are_sampled_per_epoch_and_still_learn():
    data = planted()
    config = LPRAGTraining(predictor="ncn", **FAST, links_per_epoch=128)
    m1, report = train_link_predictor(data, config)
    assert report.train_links > 128 and report.epoch_links == 128
    assert report.val_auc is not None and report.val_auc > 0.75, report.history
    m2, again = train_link_predictor(data, config)  # the samples come from the seed
    assert again.history == report.history
    assert torch.equal(m1.decoder[0].weight, m2.decoder[0].weight)
    _, everything = train_link_predictor(data, LPRAGTraining(predictor="ncn", **FAST))
    assert everything.epoch_links == everything.train_links
    assert everything.history != report.history
