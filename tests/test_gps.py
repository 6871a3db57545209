"""GraphGPS (`swan_jax.gps`) and its positional encodings (`swan_jax.data.positional`):
equivariance, padding, LapPE / RWSE against dense NumPy, attention against NumPy, the CLI;
the authors' transfer GPS (`swan_jax.models.gpsconv`) against PyG's `GPSConv` (recorded
outputs, and a differential run where torch is installed) and its parameter count."""

from __future__ import annotations

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest

from swan_jax.data import positional
from swan_jax.data.batching import budget_for, make_batch
from swan_jax.data.dataset import GraphDataset
from swan_jax.gps import GPSEncoder, GPSStack, GraphAttention, gps_feature_width
from swan_jax.models import LinearEncoder, Model, NodeReadout, gpsconv
from swan_jax.models.gpsconv import GPSConvStack, WithoutFlag, masked_attention, softmax_rows
from tests.graphs import random_undirected

LAP_K, RWSE = 4, 3
HIDDEN = 16
HIDDEN_FIXTURE, LAYERS_FIXTURE = 16, 2  # tests/make_gps_fixture.py's model


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


def test_transfer_cli_takes_both_gps_models_and_refuses_hidden_they_cannot_split(capsys):
    from swan_jax.experiments import transfer as T

    cfg = T.parse_config(["--topology", "line", "--distance", "3", "--models",
                          "gps,graphgps"])
    assert cfg.models == ("gps", "graphgps")
    for model in cfg.models:
        assert T.EXPERIMENT.grid(cfg, {"topology": "line", "distance": 3, "model": model}) \
            == {"learning_rate": cfg.grid["learning_rate"]}
    for model, hidden, message in (
            ("gps", "31", "GPS needs hidden divisible by its 2 heads, got 31 (CLI: --hidden)"),
            ("graphgps", "30", "GraphGPS needs hidden divisible by its 4 heads and above its "
                               "16 LapPE channels, got 30 (CLI: --hidden)")):
        with pytest.raises(SystemExit):
            T.parse_config(["--topology", "line", "--distance", "3", "--model", model,
                            "--hidden", hidden])
        assert capsys.readouterr().err.strip().splitlines()[-1].endswith(message)


def test_transfer_gps_models_train_on_their_positional_data(tmp_path):
    from swan_jax.experiments import transfer as T

    cfg = T.parse_config(["--topology", "ring", "--distance", "3", "--model", "gps",
                          "--sizes", "4,2,2", "--cache-dir", str(tmp_path)])
    cell = {"topology": "ring", "distance": 3, "model": "graphgps"}
    splits = T.EXPERIMENT.load_data(cfg, cell)
    assert splits["train"].nodes.shape == (4 * 6, 1 + positional.positional_width(8, 0))
    flagged = T.EXPERIMENT.load_data(cfg, {**cell, "model": "gps"})
    np.testing.assert_array_equal(flagged["train"].nodes[:, -1], 1.0)  # the real-node flag
    plain = T.EXPERIMENT.load_data(cfg, {**cell, "model": "gcn"})
    assert plain["train"].nodes.shape == (4 * 6, 1)
    np.testing.assert_array_equal(flagged["train"].nodes[:, :1], plain["train"].nodes)
    for model, data in (("graphgps", splits), ("gps", flagged)):
        net = T.EXPERIMENT.model_fn(cfg, {**cell, "model": model}, {})({"learning_rate": 1e-3})
        graph = _plain(data["train"])
        out = net.apply(net.init(jax.random.PRNGKey(0), graph), graph)
        assert out.shape == (24, 1) and np.all(np.isfinite(np.asarray(out)))


# ------------------------------------------- the authors' GPS (swan_jax.models.gpsconv)


def _authors_model(group: str, max_nodes: int | None = None, layers: int = LAYERS_FIXTURE):
    return Model(WithoutFlag(LinearEncoder(HIDDEN_FIXTURE, weight_init="torch")),
                 GPSConvStack(layers, heads=2, group=group, max_nodes=max_nodes),
                 NodeReadout((1,), weight_init="torch"))


def _fixture_batch(graphs, *, prepared: bool):
    """The fixture's two graphs as a GraphDataset with the real-node flag, in one padded
    batch (padding nodes and a padding graph)."""
    offsets = np.concatenate([[0], np.cumsum(graphs["n_node"])])
    items = []
    for g in range(len(graphs["n_node"])):
        inside = (graphs["senders"] >= offsets[g]) & (graphs["senders"] < offsets[g + 1])
        items.append({"nodes": graphs["x"][offsets[g]:offsets[g + 1]],
                      "senders": graphs["senders"][inside] - offsets[g],
                      "receivers": graphs["receivers"][inside] - offsets[g]})
    data = positional.with_positional_encodings(GraphDataset.from_graphs(items), lap_k=0)
    batch = make_batch(data, np.arange(2), budget_for(data, 4, prepared=prepared))
    assert int((~batch.node_mask).sum()) > 0  # padding rows the model must ignore
    return batch


def _shapes(tree):
    return jax.tree_util.tree_map(np.shape, tree)


@pytest.mark.parametrize("group", ["batch", "graph"])
@pytest.mark.parametrize("prepared", [True, False])
@pytest.mark.parametrize("block", [None, 2])
def test_the_authors_gps_gives_the_recorded_pyg_outputs(group, prepared, block, monkeypatch):
    """PyG's `GPSConv` stack (the authors' `GPS_Model`), run once by
    `tests/make_gps_fixture.py`: its weights loaded into swan-jax's model give its
    outputs on a padded batch, without the batch vector (the authors' call) and with it;
    `block` 2: the batch's attention in blocks of 2 query rows (`blocked_attention`)."""
    from tests.make_gps_fixture import FIXTURE, flax_params

    if block is not None:
        monkeypatch.setattr(gpsconv, "ATTENTION_BLOCK", block)

    recorded = dict(np.load(FIXTURE))
    state = {k[2:]: v for k, v in recorded.items() if k.startswith("w/")}
    params = flax_params(state, int(recorded["layers"]), int(recorded["heads"]))
    batch = _fixture_batch(recorded, prepared=prepared)
    model = _authors_model(group, max_nodes=6)
    assert _shapes(params) == _shapes(model.init(jax.random.PRNGKey(0), batch.graph))
    out = np.asarray(model.apply(params, batch.graph))[batch.node_mask]
    np.testing.assert_allclose(out, recorded[f"out_{group}"], rtol=1e-5, atol=1e-6)
    other = recorded["out_graph" if group == "batch" else "out_batch"]
    assert not np.allclose(out, other, rtol=1e-3, atol=1e-4)  # the two groups differ


@pytest.mark.parametrize("group", ["batch", "graph"])
def test_the_authors_gps_equals_pyg_on_fresh_weights(group):
    """The differential test itself (where torch and torch_geometric are installed): the
    authors' width and heads, fresh PyG weights loaded into swan-jax's model."""
    pytest.importorskip("torch")
    pytest.importorskip("torch_geometric")
    from tests.make_gps_fixture import (
        authors_gps,
        fixture_graphs,
        flax_params,
        run_authors,
        state_arrays,
    )

    graphs = fixture_graphs()
    torch_model = authors_gps(hidden=64, layers=3, heads=2, seed=1)
    expected = run_authors(torch_model, graphs, per_graph=group == "graph")
    params = flax_params(state_arrays(torch_model), 3, 2)
    batch = _fixture_batch(graphs, prepared=True)
    model = Model(WithoutFlag(LinearEncoder(64)), GPSConvStack(3, group=group, max_nodes=6),
                  NodeReadout((1,)))
    out = np.asarray(model.apply(params, batch.graph))[batch.node_mask]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_the_softmax_s_own_vjp_is_autodiff_s_on_masked_rows_too(x64):
    """`softmax_rows` (the GPS attention's) against autodiff of `jax.nn.softmax`, float64,
    with rows masked at the dtype's minimum as the attention masks them (a whole row
    masked included: padding queries)."""
    key = jax.random.PRNGKey(3)
    scores = jax.random.normal(key, (2, 3, 5, 7), jnp.float64) * 3
    mask = jax.random.bernoulli(jax.random.PRNGKey(4), 0.7, scores.shape)
    mask = mask.at[0, 0, 1].set(False)
    scores = jnp.where(mask, scores, jnp.finfo(jnp.float64).min)
    g = jax.random.normal(jax.random.PRNGKey(5), scores.shape, jnp.float64)
    ours = jax.vjp(softmax_rows, scores)[1](g)[0]
    theirs = jax.vjp(lambda s: jax.nn.softmax(s, axis=-1), scores)[1](g)[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(softmax_rows(scores), jax.nn.softmax(scores, axis=-1))


def test_the_gps_attention_is_flax_s_in_values_and_gradients(x64):
    """`masked_attention` against flax's `dot_product_attention` (float64; keys masked,
    one query row wholly masked), outputs and gradients in query, key and value."""
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    q, k, v = (jax.random.normal(key, (2, 6, 2, 4), jnp.float64) for key in keys[:3])
    real = jnp.array([True, True, True, True, False, False])
    mask = nn.make_attention_mask(real[None], real[None])
    g = jax.random.normal(keys[3], (2, 6, 2, 4), jnp.float64)

    def loss(fn):
        return lambda q, k, v: jnp.sum(fn(q, k, v, mask=mask) * g)

    ours = jax.value_and_grad(loss(masked_attention), (0, 1, 2))(q, k, v)
    theirs = jax.value_and_grad(loss(nn.dot_product_attention), (0, 1, 2))(q, k, v)
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs),
                    strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("rows", [11, 12])  # a last block padded, or none
def test_the_blocked_attention_is_the_whole_one_in_values_and_gradients(x64, monkeypatch,
                                                                         rows):
    """`blocked_attention` (blocks of 4 query rows) against `whole_attention`, float64:
    outputs and gradients in query, key and value, keys masked and padding query rows
    wholly masked, under a vmap over runs as the campaign's programs run it; and
    `masked_attention` takes the blocks past two of them."""
    monkeypatch.setattr(gpsconv, "ATTENTION_BLOCK", 4)
    keys = jax.random.split(jax.random.PRNGKey(7), 4)
    q, k, v, g = (jax.random.normal(key, (3, 1, rows, 2, 5), jnp.float64) for key in keys)
    real = jnp.arange(rows) < rows - 3
    mask = nn.make_attention_mask(real[None], real[None])  # [1, 1, rows, rows]

    def loss(fn):
        one = jax.value_and_grad(lambda q, k, v, g: jnp.sum(fn(q, k, v, mask) * g), (0, 1, 2))
        return jax.jit(jax.vmap(one))(q, k, v, g)

    blocked = loss(gpsconv.blocked_attention)
    for a, b in zip(jax.tree_util.tree_leaves(blocked),
                    jax.tree_util.tree_leaves(loss(gpsconv.whole_attention)), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
    assert "scan" in str(jax.make_jaxpr(jax.grad(
        lambda q: jnp.sum(masked_attention(q, k[0], v[0], mask))))(q[0]))
    monkeypatch.setattr(gpsconv, "ATTENTION_BLOCK", rows)  # one block's worth: whole
    assert "scan" not in str(jax.make_jaxpr(jax.grad(
        lambda q: jnp.sum(masked_attention(q, k[0], v[0], mask))))(q[0]))


def test_the_transfer_gps_has_the_authors_parameter_count(tmp_path):
    """The authors' `GPS_Model` at line k = 3 (64 channels, 3 layers, 2 heads): 113,473
    parameters, by PyTorch's count of their module."""
    from swan_jax.experiments import transfer as T
    from swan_jax.pytrees import tree_size

    cfg = T.parse_config(["--topology", "line", "--distance", "3", "--model", "gps",
                          "--sizes", "2,1,1", "--cache-dir", str(tmp_path)])
    cell = {"topology": "line", "distance": 3, "model": "gps"}
    graph = _plain(T.EXPERIMENT.load_data(cfg, cell)["train"])
    model = T.EXPERIMENT.model_fn(cfg, cell, {})({"learning_rate": 1e-3})
    assert tree_size(jax.eval_shape(model.init, jax.random.PRNGKey(0), graph)) == 113_473


def test_the_torch_init_draws_within_pytorchs_bounds():
    """`weight_init="torch"`: the attention's q/k/v kernels within the Xavier bound of
    PyTorch's `[3C, C]` in_proj, its out kernel within 1/sqrt(C), biases 0; the GCN
    kernel Glorot; LayerNorm 1 and 0."""
    graph = _plain(_dataset(sizes=(7,)))._replace(nodes=jnp.ones((7, 2)))
    c = 64
    stack = GPSConvStack(1, max_nodes=7)
    p = stack.init(jax.random.PRNGKey(0), graph, jnp.ones((7, c)))["params"]["layer0"]
    att = p["attn"]["attention"]
    for name in ("query", "key", "value"):
        w = np.abs(np.asarray(att[name]["kernel"]))
        assert w.max() <= np.sqrt(6 / (4 * c)) and w.max() > 0.9 * np.sqrt(6 / (4 * c))
        assert not np.any(np.asarray(att[name]["bias"]))
    out = np.abs(np.asarray(att["out"]["kernel"]))
    assert 0.9 / np.sqrt(c) < out.max() <= 1 / np.sqrt(c)
    assert np.abs(np.asarray(p["conv"]["lin"]["kernel"])).max() <= np.sqrt(6 / (2 * c))
    assert np.all(np.asarray(p["norm1"]["scale"]) == 1) and not np.any(p["norm1"]["bias"])


def test_the_authors_gps_refuses_bad_settings_in_one_line():
    graph = _plain(_dataset(sizes=(7,)))
    x = jnp.ones((7, 8))
    for stack, message in ((GPSConvStack(1, heads=3), "divisible by heads"),
                           (GPSConvStack(1, group="graph"), "needs max_nodes"),
                           (GPSConvStack(1, group="nodes"), "unknown GPSConv group")):
        with pytest.raises(ValueError, match=message):
            stack.init(jax.random.PRNGKey(0), graph, x)
    encoder = WithoutFlag(LinearEncoder(8))
    with pytest.raises(ValueError, match="real-node flag"):
        encoder.init(jax.random.PRNGKey(0), graph._replace(nodes=jnp.ones((7, 1))))


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
    """`benchmarks.runtime_table`'s GPS row: LapPE appended, the model sized to the largest graph;
    its GatedGCN with bond embeddings takes a finite step of the training loop's own
    (narrowed to 32 channels and 1 layer here; the timings run on a device slice)."""
    from benchmarks.common import _synthetic_peptides, lrgb_gps_model, train_step_fn
    from benchmarks.epoch_anatomy import Workload
    from benchmarks.runtime_table import MODELS, gps_workload
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
