"""Graph property prediction data: families, perturbation, labels, normalisation, cache."""

from __future__ import annotations

import collections

import networkx as nx
import numpy as np
import pytest

from swan_jax.data import graphprop as gp
from swan_jax.data.dataset import GraphDataset
from tests.graphs import dataset_graph_to_networkx

SMALL = {"nodes": {"train": (12, 15), "val": (12, 13), "test": (14,)},
         "per_size": {"train": 6, "val": 3, "test": 4}}
SIZES = (25, 28, 29, 31, 34, 35)


_graph = dataset_graph_to_networkx


def _is_path(graph: nx.Graph) -> bool:
    n = graph.number_of_nodes()
    return n <= 1 or (nx.is_tree(graph) and max(d for _, d in graph.degree()) <= 2)


def _strip_leaves(graph: nx.Graph) -> nx.Graph:
    if graph.number_of_nodes() <= 2:
        return graph
    return graph.subgraph([v for v, d in graph.degree() if d > 1]).copy()


# --------------------------------------------------------------------------- families

@pytest.mark.parametrize("n", SIZES)
def test_family_generators_unperturbed_shapes(n):
    rng = np.random.default_rng(n)
    for family, make in gp.FAMILIES.items():
        for _ in range(3):
            graph = make(n, rng)
            assert sorted(graph.nodes()) == list(range(n)), family
            assert nx.number_of_selfloops(graph) == 0, family
            deg = dict(graph.degree())
            if family in ("tree", "caterpillar", "lobster", "line", "star"):
                assert nx.is_tree(graph) and graph.number_of_edges() == n - 1, family
            if family == "star":
                assert sorted(deg.values()) == [1] * (n - 1) + [n - 1]
            elif family == "line":
                assert max(deg.values()) == 2 and _is_path(graph)
            elif family == "caterpillar":
                assert _is_path(_strip_leaves(graph))
            elif family == "lobster":
                assert _is_path(_strip_leaves(_strip_leaves(graph)))
            elif family == "grid":
                a = gp._balanced_factor(n)
                b = n // a
                assert a * b == n and a <= b and max(deg.values()) <= 4
                assert graph.number_of_edges() == a * (b - 1) + b * (a - 1)
                assert nx.is_connected(graph)
            elif family == "ladder":
                assert max(deg.values()) <= 3 and nx.is_connected(graph)
                assert graph.number_of_edges() == 3 * (n // 2) - 2 + n % 2
            elif family == "caveman":
                comps = list(nx.connected_components(graph))
                assert len({len(c) for c in comps}) == 1
                assert len(comps) == gp._balanced_factor(n)
                for c in comps:
                    k = len(c)
                    assert graph.subgraph(c).number_of_edges() == k * (k - 1) // 2
            elif family == "barabasi_albert":
                assert nx.is_connected(graph)


def test_grid_and_caveman_factorisation():
    assert gp._balanced_factor(25) == 5 and gp._balanced_factor(28) == 4
    assert gp._balanced_factor(30) == 5 and gp._balanced_factor(29) == 1
    assert sorted(d for _, d in gp.grid(29).degree())[-1] == 2  # prime: a 1 x 29 grid


def test_family_weights():
    assert set(gp.FAMILY_WEIGHTS) == set(gp.FAMILIES)
    assert abs(sum(gp.FAMILY_WEIGHTS.values()) - 1.0) < 1e-12
    assert gp.FAMILY_WEIGHTS["erdos_renyi"] == 0.2 and gp.FAMILY_WEIGHTS["tree"] == 0.15
    assert gp.FAMILY_WEIGHTS["lobster"] == 0.1 and gp.FAMILY_WEIGHTS["grid"] == 0.05


def test_family_mixture_frequencies():
    # Redraws keep the family, so the families drawn follow the weights.
    rng = np.random.default_rng(0)
    draws = 600
    counts = collections.Counter(gp.draw_graph(8, rng)[1] for _ in range(draws))
    for family, weight in gp.FAMILY_WEIGHTS.items():
        assert abs(counts[family] / draws - weight) < 0.055, (family, counts)


def test_draw_graph_no_isolated_nodes_symmetric_and_family_kept():
    rng = np.random.default_rng(1)
    seen = set()
    for _ in range(60):
        adj, family = gp.draw_graph(12, rng)
        seen.add(family)
        assert adj.shape == (12, 12) and adj.dtype == bool
        assert np.array_equal(adj, adj.T) and not adj.diagonal().any()
        assert adj.any(axis=0).all()
    assert len(seen) >= 6
    for family in gp.FAMILY_NAMES:
        adj, got = gp.draw_graph(15, rng, family=family)
        assert got == family and adj.any(axis=0).all()
    with pytest.raises(ValueError, match="erdos_renyi"):
        gp.draw_graph(10, rng, family="hypercube")


def test_draw_graph_unperturbed_is_a_shuffled_family_graph():
    rng = np.random.default_rng(2)
    adj, _ = gp.draw_graph(20, rng, family="star", perturb=False)
    assert sorted(adj.sum(axis=0)) == [1] * 19 + [19]
    adj, _ = gp.draw_graph(20, rng, family="line", perturb=False)
    graph = nx.from_numpy_array(adj.astype(int))
    assert _is_path(graph) and graph.number_of_edges() == 19
    assert not np.array_equal(adj, nx.to_numpy_array(nx.path_graph(20)) > 0)  # shuffled


def test_perturbation_is_small_and_keeps_density():
    rng = np.random.default_rng(3)
    sparse = nx.to_numpy_array(nx.path_graph(30)) > 0
    dense = ~np.eye(30, dtype=bool)
    dense[0, 1] = dense[1, 0] = False
    kept, added, dense_removed = [], [], []
    for _ in range(200):
        out = gp.perturb_adjacency(sparse, rng)
        assert np.array_equal(out, out.T) and not out.diagonal().any()
        kept.append((out & sparse).sum() / sparse.sum())
        added.append((out & ~sparse).sum() / 2)
        d = gp.perturb_adjacency(dense, rng)
        dense_removed.append((dense & ~d).sum() / 2)
    # PNA's pair value is a sum of two U[0, 0.5): keep probability 0.98 for sparse graphs.
    assert 0.97 < np.mean(kept) < 0.99
    assert np.mean(added) < 0.5
    assert np.mean(dense_removed) < 0.5 * 434  # dense graphs stay dense
    assert max(dense_removed) > 0 or max(added) > 0


# ----------------------------------------------------------------------------- labels

def _nx_labels(graph: nx.Graph, x: np.ndarray, source: int):
    n = graph.number_of_nodes()
    lengths = dict(nx.all_pairs_shortest_path_length(graph))
    sssp = np.array([lengths[source].get(v, 0) for v in range(n)])
    ecc = np.array([max(lengths[v].values()) for v in range(n)])
    diam = max(max(d.values()) for d in lengths.values())
    lap = nx.laplacian_matrix(graph, nodelist=range(n)).toarray() @ x
    return sssp, ecc, diam, lap


@pytest.mark.parametrize("name,graph,source", [
    ("path", nx.path_graph(7), 2),
    ("star", nx.star_graph(8), 3),
    ("grid", nx.convert_node_labels_to_integers(nx.grid_2d_graph(3, 4)), 5),
    ("disconnected", nx.disjoint_union(nx.path_graph(5), nx.complete_graph(3)), 1),
    ("disconnected_src_small", nx.disjoint_union(nx.path_graph(5), nx.complete_graph(3)), 6),
])
def test_labels_agree_with_networkx(name, graph, source):
    n = graph.number_of_nodes()
    x = np.random.default_rng(5).random(n)
    adj = nx.to_numpy_array(graph, nodelist=range(n)) > 0
    node, diam = gp.graph_labels(adj, x, source)
    sssp, ecc, want_diam, lap = _nx_labels(graph, x, source)
    np.testing.assert_array_equal(node[:, 0], sssp)
    np.testing.assert_array_equal(node[:, 1], ecc)
    np.testing.assert_allclose(node[:, 2], lap, atol=1e-12)
    assert diam == want_diam
    if name == "path":
        np.testing.assert_array_equal(node[:, 0], [2, 1, 0, 1, 2, 3, 4])
        np.testing.assert_array_equal(node[:, 1], [6, 5, 4, 3, 4, 5, 6])
        assert diam == 6
    if name == "disconnected":
        np.testing.assert_array_equal(node[5:, 0], 0)  # unreachable -> 0
        np.testing.assert_array_equal(node[5:, 1], 1)  # eccentricity within the triangle
        assert diam == 4  # largest finite distance
    if name == "disconnected_src_small":
        np.testing.assert_array_equal(node[:, 0], [0, 0, 0, 0, 0, 1, 0, 1])


def test_laplacian_is_degree_minus_adjacency():
    rng = np.random.default_rng(6)
    adj, _ = gp.draw_graph(14, rng)
    x = rng.random(14)
    node, _ = gp.graph_labels(adj, x, 0)
    d = np.diag(adj.sum(axis=1))
    np.testing.assert_allclose(node[:, 2], (d - adj.astype(float)) @ x, atol=1e-12)


def test_generated_splits_are_consistent():
    raw = gp.make_graphprop_splits(11, **SMALL)
    assert {k: len(v) for k, v in raw.items()} == {"train": 12, "val": 6, "test": 4}
    np.testing.assert_array_equal(raw["train"].n_node, [12] * 6 + [15] * 6)
    np.testing.assert_array_equal(raw["val"].n_node, [12] * 3 + [13] * 3)
    for split, data in raw.items():
        assert data.nodes.shape == (data.n_node.sum(), 2)
        assert data.node_targets.shape == (data.n_node.sum(), 3)
        assert data.graph_targets.shape == (len(data), 1)
        for g in range(len(data)):
            o, n = data.node_offsets[g], int(data.n_node[g])
            feats = data.nodes[o:o + n]
            assert feats[:, 0].sum() == 1 and set(np.unique(feats[:, 0])) == {0.0, 1.0}
            assert feats[:, 1].min() >= 0 and feats[:, 1].max() < 1
            graph = _graph(data, g)
            assert min(d for _, d in graph.degree()) >= 1, f"{split} {g}: isolated node"
            assert graph.number_of_edges() * 2 == data.n_edge[g]
            sssp, ecc, diam, lap = _nx_labels(graph, feats[:, 1].astype(np.float64),
                                              int(np.argmax(feats[:, 0])))
            np.testing.assert_array_equal(data.node_targets[o:o + n, 0], sssp)
            np.testing.assert_array_equal(data.node_targets[o:o + n, 1], ecc)
            np.testing.assert_allclose(data.node_targets[o:o + n, 2], lap, atol=1e-5)
            assert data.graph_targets[g, 0] == diam


def test_paper_size_defaults():
    nodes, per_size = gp._resolve(None, None)
    totals = {s: len(nodes[s]) * per_size[s] for s in gp.SPLITS}
    assert totals == {"train": 5120, "val": 640, "test": 1280}
    assert nodes["train"] == tuple(range(25, 35)) and nodes["test"] == tuple(range(25, 30))


def test_determinism():
    a = gp.make_graphprop_splits(3, **SMALL)
    b = gp.make_graphprop_splits(3, **SMALL)
    c = gp.make_graphprop_splits(4, **SMALL)
    for split in gp.SPLITS:
        for field in ("nodes", "senders", "receivers", "n_edge", "node_targets",
                      "graph_targets"):
            np.testing.assert_array_equal(getattr(a[split], field), getattr(b[split], field))
    assert not np.array_equal(a["train"].nodes, c["train"].nodes)
    assert not np.array_equal(a["train"].n_edge, c["train"].n_edge)


# --------------------------------------------------------------- normalisation, tasks

def test_normalisation_uses_training_statistics_only(tmp_path):
    raw1, stats1 = gp.load_graphprop_raw(tmp_path, seed=5, **SMALL)
    other = {"nodes": {**SMALL["nodes"], "val": (20,), "test": (22, 23)},
             "per_size": {**SMALL["per_size"], "val": 5, "test": 2}}
    raw2, stats2 = gp.load_graphprop_raw(tmp_path, seed=5, **other)
    np.testing.assert_array_equal(raw1["train"].node_targets, raw2["train"].node_targets)
    for key in ("node", "graph"):
        np.testing.assert_array_equal(stats1[key], stats2[key])
        np.testing.assert_array_equal(stats1[key], gp.train_max(raw1["train"])[key])
    # Val / test are divided by the training maxima, not by their own.
    assert raw2["val"].graph_targets.max() != stats2["graph"][0]
    diam = gp.load_graphprop("diameter", cache_dir=tmp_path, seed=5, **other)
    assert diam["train"].graph_targets.max() == pytest.approx(1.0)
    assert diam["val"].graph_targets.max() != pytest.approx(1.0)
    np.testing.assert_allclose(diam["val"].graph_targets,
                               raw2["val"].graph_targets / stats2["graph"][0], rtol=1e-6)
    ecc = gp.load_graphprop("eccentricity", cache_dir=tmp_path, seed=5, **other)
    assert raw2["test"].node_targets[:, 1].max() != stats2["node"][1]
    np.testing.assert_allclose(ecc["test"].node_targets[:, 0],
                               raw2["test"].node_targets[:, 1] / stats2["node"][1], rtol=1e-6)


@pytest.mark.parametrize("label_columns,task,column", [
    ("paper", "sssp", 0), ("paper", "eccentricity", 1),
    ("adgn", "sssp", 2), ("adgn", "eccentricity", 0),
])
def test_label_columns(tmp_path, label_columns, task, column):
    raw, stats = gp.load_graphprop_raw(tmp_path, seed=9, **SMALL)
    out = gp.load_graphprop(task, label_columns, cache_dir=tmp_path, seed=9, **SMALL)
    for split in gp.SPLITS:
        assert out[split].graph_targets is None
        assert out[split].node_targets.shape == (raw[split].n_node.sum(), 1)
        np.testing.assert_allclose(out[split].node_targets[:, 0],
                                   raw[split].node_targets[:, column] / stats["node"][column],
                                   rtol=1e-6)
        np.testing.assert_array_equal(out[split].nodes, raw[split].nodes)
        np.testing.assert_array_equal(out[split].senders, raw[split].senders)
    assert out["train"].node_targets.max() == pytest.approx(1.0)


def test_adgn_sssp_is_the_laplacian_and_diameter_is_unchanged(tmp_path):
    kw = dict(cache_dir=tmp_path, seed=9, **SMALL)
    paper_sssp = gp.load_graphprop("sssp", "paper", **kw)["train"].node_targets
    adgn_sssp = gp.load_graphprop("sssp", "adgn", **kw)["train"].node_targets
    adgn_ecc = gp.load_graphprop("eccentricity", "adgn", **kw)["train"].node_targets
    np.testing.assert_array_equal(adgn_ecc, paper_sssp)  # ADGN's "eccentricity" is sssp
    assert (adgn_sssp < 0).any()  # Laplacian features are signed, distances are not
    assert not np.allclose(adgn_sssp, paper_sssp)
    d_paper = gp.load_graphprop("diameter", "paper", **kw)
    d_adgn = gp.load_graphprop("diameter", "adgn", **kw)
    for split in gp.SPLITS:
        assert d_paper[split].node_targets is None
        np.testing.assert_array_equal(d_paper[split].graph_targets, d_adgn[split].graph_targets)


def test_cache_shared_by_tasks_and_read_back(tmp_path, monkeypatch):
    kw = dict(cache_dir=tmp_path, seed=2, **SMALL)
    first = {t: gp.load_graphprop(t, **kw) for t in gp.TASKS}
    files = list((tmp_path / "graphprop").glob("*.npz"))
    assert len(files) == 3  # one raw cache for the three tasks
    loaded = GraphDataset.load(files[0])
    assert loaded is not None and "train_max_node" in loaded[1] and "families" in loaded[1]

    def boom(*args, **kwargs):
        raise AssertionError("should have been read from the cache")

    monkeypatch.setattr(gp, "_generate_split", boom)
    for task in gp.TASKS:
        again = gp.load_graphprop(task, **kw)
        for split in gp.SPLITS:
            for field in ("nodes", "senders", "receivers", "node_targets", "graph_targets"):
                x, y = getattr(first[task][split], field), getattr(again[split], field)
                assert (x is None and y is None) or np.array_equal(x, y)


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="sssp, eccentricity, diameter"):
        gp.load_graphprop("spectral_radius", cache_dir=tmp_path, **SMALL)
    with pytest.raises(ValueError, match="label_columns"):
        gp.load_graphprop("sssp", "pna", cache_dir=tmp_path, **SMALL)


# --------------------------------------------------------------------- label settings

@pytest.mark.parametrize("labels,task,column,normalised", [
    ("paper", "sssp", 2, False), ("paper", "eccentricity", 0, False),
    ("faithful", "sssp", 0, True), ("faithful", "eccentricity", 1, True),
    ("swan-code", "sssp", 2, True), ("swan-code", "eccentricity", 0, True),
])
def test_label_settings(tmp_path, labels, task, column, normalised):
    raw, stats = gp.load_graphprop_raw(tmp_path, seed=9, **SMALL)
    out = gp.load_graphprop(task, cache_dir=tmp_path, seed=9, labels=labels, **SMALL)
    scale = stats["node"][column] if normalised else 1.0
    for split in gp.SPLITS:
        np.testing.assert_allclose(out[split].node_targets[:, 0],
                                   raw[split].node_targets[:, column] / scale, rtol=1e-6)
    # Raw labels keep their units (hop counts, Laplacian features well beyond 1); normalised
    # ones peak at exactly 1 on the training split.
    peak = float(out["train"].node_targets.max())
    assert peak == pytest.approx(1.0) if normalised else peak > 1.5


def test_paper_diameter_is_raw_and_faithful_is_normalised(tmp_path):
    raw, stats = gp.load_graphprop_raw(tmp_path, seed=9, **SMALL)
    kw = dict(cache_dir=tmp_path, seed=9, **SMALL)
    paper = gp.load_graphprop("diameter", labels="paper", **kw)
    faithful = gp.load_graphprop("diameter", labels="faithful", **kw)
    for split in gp.SPLITS:
        np.testing.assert_array_equal(paper[split].graph_targets, raw[split].graph_targets)
        np.testing.assert_allclose(faithful[split].graph_targets,
                                   raw[split].graph_targets / stats["graph"][0], rtol=1e-6)


@pytest.mark.parametrize("legacy,labels", [("paper", "faithful"), ("adgn", "swan-code")])
def test_legacy_label_columns_map_to_settings(tmp_path, legacy, labels):
    kw = dict(cache_dir=tmp_path, seed=9, **SMALL)
    assert gp.resolve_labels(label_columns=legacy) == labels
    for task in gp.NODE_TASKS:
        a = gp.load_graphprop(task, legacy, **kw)["val"].node_targets
        b = gp.load_graphprop(task, labels=labels, **kw)["val"].node_targets
        np.testing.assert_array_equal(a, b)
    assert gp.resolve_labels() == "faithful"


def test_setting_protocols():
    paper = gp.LABEL_SETTINGS["paper"]
    assert (paper.columns, paper.normalise, paper.loss, paper.batch_size) == (
        "adgn", False, "graph_mean_mse", 512)
    assert gp.LABEL_SETTINGS["faithful"].normalise and gp.LABEL_SETTINGS["faithful"].columns \
        == "paper"
    assert gp.LABEL_SETTINGS["swan-code"].batch_size == 128


def test_label_setting_errors(tmp_path):
    with pytest.raises(ValueError, match="labels must be one of"):
        gp.load_graphprop("sssp", cache_dir=tmp_path, labels="raw", **SMALL)
    with pytest.raises(ValueError, match="not both"):
        gp.load_graphprop("sssp", "adgn", cache_dir=tmp_path, labels="paper", **SMALL)


# ------------------------------------------------------------------ constant predictor

def _two_graph_split(values, n_node, level="node"):
    values = np.asarray(values, np.float32).reshape(-1, 1)
    n_node = np.asarray(n_node, np.int32)
    return GraphDataset(
        nodes=np.zeros((int(n_node.sum()), 2), np.float32), edges=None,
        senders=np.zeros(0, np.int32), receivers=np.zeros(0, np.int32), n_node=n_node,
        n_edge=np.zeros(len(n_node), np.int32),
        node_targets=values if level == "node" else None,
        graph_targets=values if level == "graph" else None)


def test_per_graph_squared_error():
    pred = np.array([0.0, 0.0, 0.0, 1.0])
    target = np.array([1.0, 3.0, 0.0, 3.0])
    np.testing.assert_allclose(gp.per_graph_squared_error(pred, target, [2, 0, 2]),
                               [5.0, np.nan, 2.0])
    with pytest.raises(ValueError, match="same rows"):
        gp.per_graph_squared_error(pred, target, [2, 1])


def test_batch_averaged_score_weighs_every_batch_the_same():
    # 5 graphs (1, 2, 1, 1, 2 nodes) in batches of 2: [g0 g1] [g2 g3] [g4], as the
    # authors' 512 + 512 + 256 at test: the last batch's graph counts twice.
    n_node = np.array([1, 2, 1, 1, 2])
    target = np.zeros((7, 1))
    pred = np.array([1.0, 2.0, 0.0, 3.0, 0.0, 1.0, 1.0])[:, None]
    per_graph = np.array([1.0, 2.0, 9.0, 0.0, 1.0])  # node means of the squared errors
    expected = np.mean([np.mean(per_graph[:2]), np.mean(per_graph[2:4]), per_graph[4]])
    got = gp.batch_averaged_log10_mse(pred, target, n_node, batch_size=2)
    assert got == pytest.approx(np.log10(expected))
    assert got != pytest.approx(np.log10(per_graph.mean()))  # not the pooled score
    pooled = gp.batch_averaged_log10_mse(pred, target, n_node, batch_size=5)
    assert pooled == pytest.approx(np.log10(per_graph.mean()))  # one batch: pooled
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        gp.batch_averaged_log10_mse(pred, target, n_node, batch_size=0)


def test_trained_column_names_what_each_setting_trains():
    assert gp.trained_column("sssp", "paper") == "Laplacian features (D - A) x"
    assert gp.trained_column("eccentricity", "paper") == "single-source distances"
    assert gp.trained_column("sssp", "faithful") == "single-source distances"
    assert gp.trained_column("eccentricity", "faithful") == "eccentricity"
    assert gp.trained_column("diameter", "swan-code") == "diameter"


def test_constant_predictor_by_hand():
    # Graph 1: labels (0, 0, 0, 4) -> node mean 1; graph 2: (4, 4) -> 4.
    train = _two_graph_split([0, 0, 0, 4, 4, 4], [4, 2])
    test = _two_graph_split([1, 3], [1, 1])
    by_graph = gp.constant_predictor_scores({"train": train, "test": test}, "sssp")
    assert by_graph["constant"] == pytest.approx(2.5)  # mean of the graph means (1 + 4) / 2
    assert by_graph["test"] == pytest.approx(np.log10(1.25))  # graphs (1), (3): 2.25, 0.25
    authors = gp.constant_predictor_scores({"train": train, "test": test}, "sssp",
                                           batch_size=1)  # batches (2.25), (0.25)
    assert authors["test_authors"] == pytest.approx(np.log10(1.25))
    authors = gp.constant_predictor_scores({"train": train}, "sssp", batch_size=3)
    # both training graphs (node means 5.25, 2.25) in one batch: the pooled score
    assert authors["train_authors"] == pytest.approx(authors["train"])
    by_node = gp.constant_predictor_scores({"train": train, "test": test}, "sssp", "node")
    assert by_node["constant"] == pytest.approx(2.0)  # 12 / 6
    assert by_node["test"] == pytest.approx(np.log10(1.0))
    # Per-graph averaging is what graph_mean_mse minimises: the constant beats its neighbours.
    def train_loss(c):
        return np.nanmean(gp.per_graph_squared_error(np.full(6, c), train.node_targets[:, 0],
                                                     train.n_node))
    assert train_loss(2.5) < min(train_loss(2.4), train_loss(2.6))
    graph_level = {"train": _two_graph_split([2, 4], [3, 3], "graph"),
                   "test": _two_graph_split([5], [3], "graph")}
    for averaging in ("graph", "node"):
        scores = gp.constant_predictor_scores(graph_level, "diameter", averaging)
        assert scores["constant"] == 3.0 and scores["test"] == pytest.approx(np.log10(4.0))


def test_constant_predictor_raw_labels_score_above_normalised(tmp_path):
    kw = dict(cache_dir=tmp_path, seed=4, **SMALL)
    for task in gp.TASKS:
        raw = gp.constant_predictor(task, "paper", **kw)
        faithful = gp.constant_predictor(task, "faithful", **kw)
        assert set(raw) == {"constant", "train", "val", "test"}
        assert faithful["test"] < 0.0 < raw["test"]
    with pytest.raises(ValueError, match="averaging"):
        gp.constant_predictor_scores({"train": _two_graph_split([1], [1])}, "sssp", "mean")
