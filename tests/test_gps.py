"""GraphGPS (`swan_jax.gps`) and its positional encodings (`swan_jax.data.positional`):
equivariance, padding, LapPE / RWSE against dense NumPy, attention against NumPy, the CLI."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest

from swan_jax.data import positional
from swan_jax.data.batching import budget_for, make_batch
from swan_jax.data.dataset import GraphDataset
from swan_jax.gps import GPSEncoder, GPSStack, GraphAttention, gps_feature_width
from swan_jax.models import LinearEncoder, Model, NodeReadout
from tests.graphs import random_undirected

LAP_K, RWSE = 4, 3
HIDDEN = 16


def _dataset(sizes=(5, 7), seed=0) -> GraphDataset:
    """Random undirected graphs (an isolated node each) with 2 float features."""
    rng = np.random.default_rng(seed)
    graphs = []
    for n in sizes:
        g = random_undirected(rng, n)
        graphs.append({"nodes": rng.normal(size=(n, 2)).astype(np.float32),
                       "senders": np.asarray(g.senders), "receivers": np.asarray(g.receivers)})
    data = GraphDataset.from_graphs(graphs)
    return positional.with_positional_encodings(data, lap_k=LAP_K, rwse_steps=RWSE)


def _plain(data: GraphDataset) -> jraph.GraphsTuple:
    """Every graph of `data` in one unpadded GraphsTuple."""
    shift = np.repeat(data.node_offsets[:-1], data.n_edge)
    return jraph.GraphsTuple(nodes=jnp.asarray(data.nodes), edges=None,
                             senders=jnp.asarray(data.senders + shift),
                             receivers=jnp.asarray(data.receivers + shift),
                             n_node=jnp.asarray(data.n_node), n_edge=jnp.asarray(data.n_edge),
                             globals=None)


def _model(local: str, max_nodes: int = 7) -> Model:
    width = gps_feature_width(HIDDEN, LAP_K, RWSE, 4)
    return Model(GPSEncoder(LinearEncoder(width), LAP_K, RWSE, pe_dim=4),
                 GPSStack(HIDDEN, 2, max_nodes, num_heads=2, local=local),
                 NodeReadout((3,)))


@pytest.mark.parametrize("local", ["gine", "gatedgcn"])
def test_gps_is_permutation_equivariant(local):
    data = _dataset(sizes=(7,))
    graph = _plain(data)
    model = _model(local)
    params = model.init(jax.random.PRNGKey(0), graph)
    perm = np.random.default_rng(1).permutation(7)
    inverse = np.argsort(perm)  # new node i is old node perm[i]
    permuted = graph._replace(nodes=graph.nodes[perm],
                              senders=jnp.asarray(inverse[np.asarray(graph.senders)]),
                              receivers=jnp.asarray(inverse[np.asarray(graph.receivers)]))
    out, out_p = model.apply(params, graph), model.apply(params, permuted)
    np.testing.assert_allclose(np.asarray(out_p), np.asarray(out)[perm], rtol=1e-5, atol=1e-5)
    assert not np.allclose(np.asarray(out)[perm], np.asarray(out))  # the test can fail


@pytest.mark.parametrize("local", ["gine", "gatedgcn"])
@pytest.mark.parametrize("prepared", [True, False])
def test_a_padded_batch_gives_the_same_outputs_on_real_nodes(local, prepared):
    data = _dataset()
    model = _model(local)
    plain = _plain(data)
    params = model.init(jax.random.PRNGKey(0), plain)
    budget = budget_for(data, 4, prepared=prepared)  # room for padding nodes and graphs
    batch = make_batch(data, np.arange(2), budget)
    assert budget.n_node > 12 and budget.n_graph > 2
    out = np.asarray(model.apply(params, batch.graph))[batch.node_mask]
    np.testing.assert_allclose(out, np.asarray(model.apply(params, plain)), rtol=1e-5,
                               atol=1e-5)


def test_attention_matches_a_dense_numpy_reference_within_each_graph():
    data = _dataset()
    graph = _plain(data)
    x = jax.random.normal(jax.random.PRNGKey(3), (12, 8))
    layer = GraphAttention(num_heads=2, max_nodes=7)
    params = layer.init(jax.random.PRNGKey(4), graph, x)
    out = np.asarray(layer.apply(params, graph, x))
    p = jax.tree_util.tree_map(np.asarray, params["params"]["attention"])
    xs = np.asarray(x, np.float64)
    for start, n in ((0, 5), (5, 7)):  # each graph attends over its own nodes only
        h = xs[start:start + n]
        q, k, v = (np.einsum("nd,dhc->nhc", h, p[name]["kernel"]) + p[name]["bias"]
                   for name in ("query", "key", "value"))
        scores = np.einsum("qhc,khc->hqk", q, k) / np.sqrt(q.shape[-1])
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        heads = np.einsum("hqk,khc->qhc", weights, v)
        ref = np.einsum("qhc,hcd->qd", heads, p["out"]["kernel"]) + p["out"]["bias"]
        np.testing.assert_allclose(out[start:start + n], ref, rtol=1e-4, atol=1e-5)


def test_a_graph_past_max_nodes_stops_in_one_line():
    data = _dataset()
    graph = _plain(data)
    x = jnp.ones((12, 8))
    layer = GraphAttention(num_heads=2, max_nodes=7)
    params = layer.init(jax.random.PRNGKey(0), graph, x)
    assert np.all(np.isfinite(np.asarray(layer.apply(params, graph, x))))
    short = layer.clone(max_nodes=6)  # the second graph has 7 nodes
    with pytest.raises(eqx.EquinoxRuntimeError, match="more nodes than GPS's max_nodes=6"):
        short.apply(params, graph, x)


def test_one_graph_in_a_one_graph_view_is_the_whole_view():
    """`max_graphs=1` (a full graph, Tolokers): the padded batch's padding graph stays out
    of the view and the graph's outputs do not change; a second real graph is refused."""
    data = _dataset(sizes=(7,))
    plain = _plain(data)
    batch = make_batch(data, np.arange(1), budget_for(data, 1))
    assert batch.graph.n_node.shape[0] == 2  # the graph and the padding graph
    x = jax.random.normal(jax.random.PRNGKey(3), (plain.nodes.shape[0], 8))
    padded_x = jnp.zeros((batch.graph.nodes.shape[0], 8)).at[:7].set(x)
    layer = GraphAttention(num_heads=2, max_nodes=7)
    params = layer.init(jax.random.PRNGKey(4), plain, x)
    one = layer.clone(max_graphs=1)
    np.testing.assert_allclose(np.asarray(one.apply(params, batch.graph, padded_x))[:7],
                               np.asarray(layer.apply(params, plain, x)), rtol=1e-5, atol=1e-6)
    two = _plain(_dataset(sizes=(5, 7)))
    with pytest.raises(eqx.EquinoxRuntimeError, match="more graphs than GPS's max_graphs=1"):
        one.apply(params, two, jnp.ones((12, 8)))


def _dense_laplacian(data: GraphDataset, g: int) -> np.ndarray:
    n = int(data.n_node[g])
    e0, e1 = data.edge_offsets[g], data.edge_offsets[g + 1]
    a = np.zeros((n, n))
    np.add.at(a, (data.receivers[e0:e1], data.senders[e0:e1]), 1.0)
    degree = a.sum(1)
    inv = np.where(degree > 0, degree, 1.0) ** -0.5 * (degree > 0)
    return np.eye(n) - inv[:, None] * a * inv[None, :]


@pytest.mark.parametrize("dense_max", [positional.DENSE_MAX_NODES, 3])  # 3: scipy's eigsh
def test_lappe_spans_the_eigenspaces_of_numpy_eigh(monkeypatch, dense_max):
    monkeypatch.setattr(positional, "DENSE_MAX_NODES", dense_max)
    data = _dataset(sizes=(9, 3), seed=2)
    for g, n in enumerate(data.n_node):
        rows = slice(data.node_offsets[g], data.node_offsets[g + 1])
        vectors = data.nodes[rows, 2:2 + LAP_K].astype(np.float64)
        values = data.nodes[rows, 2 + LAP_K:2 + 2 * LAP_K].astype(np.float64)
        lap = _dense_laplacian(data, g)
        want = np.linalg.eigvalsh(lap)[:LAP_K]
        m = min(LAP_K, int(n))
        np.testing.assert_allclose(values[0, :m], want[:m], atol=1e-5)
        assert np.all(values == values[0])  # every node carries the graph's eigenvalues
        u = vectors[:, :m]
        # Eigenvectors (any sign, any basis of a repeated eigenvalue), orthonormal.
        np.testing.assert_allclose(lap @ u, u * want[:m], atol=1e-5)
        np.testing.assert_allclose(u.T @ u, np.eye(m), atol=1e-5)
        assert np.all(vectors[:, m:] == 0) and np.all(values[:, m:] == 0)
    assert np.all(data.nodes[:, -1] == 1.0)  # the real-node column


def test_rwse_is_the_diagonal_of_random_walk_powers():
    data = _dataset(sizes=(6,), seed=3)
    a = np.zeros((6, 6))
    a[data.receivers, data.senders] = 1.0
    degree = a.sum(1)
    walk = np.where(degree[:, None] > 0, a / np.maximum(degree, 1)[:, None], 0.0)
    want = np.stack([np.diag(np.linalg.matrix_power(walk, t)) for t in (1, 2, 3)], axis=1)
    got = data.nodes[:, 2 + 2 * LAP_K:2 + 2 * LAP_K + RWSE]
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert np.any(want[:, 1] > 0)


def test_sign_flips_and_dropout_need_a_key_and_change_the_output():
    data = _dataset()
    graph = _plain(data)
    width = gps_feature_width(HIDDEN, LAP_K, RWSE, 4)
    encoder = GPSEncoder(LinearEncoder(width), LAP_K, RWSE, pe_dim=4)
    params = encoder.init(jax.random.PRNGKey(0), graph)
    flipping = encoder.clone(deterministic=False)
    outs = [np.asarray(flipping.apply(params, graph, rngs={"dropout": jax.random.PRNGKey(s)}))
            for s in range(4)]
    assert any(not np.allclose(outs[0], o) for o in outs[1:])
    np.testing.assert_array_equal(np.asarray(encoder.apply(params, graph)),
                                  np.asarray(encoder.apply(params, graph)))


def test_transfer_cli_takes_gps_and_refuses_hidden_it_cannot_split(capsys):
    from swan_jax.experiments import transfer as T

    cfg = T.parse_config(["--topology", "line", "--distance", "3", "--model", "gps"])
    assert cfg.models == ("gps",)
    assert T.EXPERIMENT.grid(cfg, {"topology": "line", "distance": 3, "model": "gps"}) == {
        "learning_rate": cfg.grid["learning_rate"]}
    with pytest.raises(SystemExit):
        T.parse_config(["--topology", "line", "--distance", "3", "--model", "gps",
                        "--hidden", "30"])
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("GPS needs hidden divisible by its 4 heads and above its 16 "
                            "LapPE channels, got 30 (CLI: --hidden)")


def test_transfer_gps_model_trains_on_its_positional_data(tmp_path):
    from swan_jax.experiments import transfer as T

    cfg = T.parse_config(["--topology", "ring", "--distance", "3", "--model", "gps",
                          "--sizes", "4,2,2", "--cache-dir", str(tmp_path)])
    cell = {"topology": "ring", "distance": 3, "model": "gps"}
    splits = T.EXPERIMENT.load_data(cfg, cell)
    assert splits["train"].nodes.shape == (4 * 6, 1 + positional.positional_width(8, 0))
    plain = T.EXPERIMENT.load_data(cfg, {**cell, "model": "gcn"})
    assert plain["train"].nodes.shape == (4 * 6, 1)
    model = T.EXPERIMENT.model_fn(cfg, cell, {})({"learning_rate": 1e-3})
    graph = _plain(splits["train"])
    out = model.apply(model.init(jax.random.PRNGKey(0), graph), graph)
    assert out.shape == (24, 1) and np.all(np.isfinite(np.asarray(out)))


def test_node_classification_takes_gps_on_request_and_checks_its_width():
    from swan_jax.experiments import node_classification as N

    assert N.parse_config([]).models == ("gcn", "swan", "swan-learn")  # not by default
    cfg = N.parse_config(["--models", "gps"])
    assert cfg.models == ("gps",)
    assert "epsilon" not in N.EXPERIMENT.grid(cfg, {"dataset": "tolokers", "model": "gps",
                                                    "split": 0})
    with pytest.raises(SystemExit):
        N.parse_config(["--models", "gps", "--hidden", "6"])


def test_the_runtime_row_of_gps_trains_on_peptide_shaped_graphs():
    """`reproduce.runtime`'s GPS row: LapPE appended, the model sized to the largest graph;
    its GatedGCN with bond embeddings takes a finite step of the training loop's own
    (narrowed to 32 channels and 1 layer here; the timings run on a device slice)."""
    from benchmarks.common import _synthetic_peptides, lrgb_gps_model, train_step_fn
    from benchmarks.epoch_anatomy import Workload
    from reproduce.runtime import MODELS, gps_workload
    from swan_jax.ogb_vocabulary import ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS

    assert "gps" in MODELS
    data = _synthetic_peptides(3)
    # The stand-ins' codes lie inside OGB's vocabularies (an embedding gives NaN past them).
    assert np.all(data.nodes < np.asarray(ATOM_FEATURE_DIMS))
    assert np.all(data.edges < np.asarray(BOND_FEATURE_DIMS))
    work = gps_workload(Workload(None, {"train": data, "val": data.subset([0])}, None, ({},),
                                 ""))
    train = work.splits["train"]
    assert train.nodes.shape[1] == 9 + positional.positional_width(10, 0)
    assert work.model_fn({}).processor.max_nodes == int(data.n_node.max())
    batch = make_batch(train, np.arange(3), budget_for(train, 3))
    model = lrgb_gps_model(int(data.n_node.max()), hidden=32, layers=1)
    once, _ = train_step_fn(model, jax.tree_util.tree_map(jnp.asarray, batch))
    assert np.all(np.isfinite(np.asarray(once())))
