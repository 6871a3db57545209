"""Graph transfer data: topology, labels, features, determinism, cache."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest

from swan_jax.config import SWANConfig
from swan_jax.data import transfer
from swan_jax.data.transfer import SOURCE, TARGET, TOPOLOGIES
from swan_jax.field import init_params, vector_field
from tests.graphs import dataset_graph_to_networkx, graph_from_edges

DISTANCES = (1, 2, 3, 5, 10, 50)


_graph = dataset_graph_to_networkx


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("k", DISTANCES)
def test_source_target_distance_is_k(topology, k):
    data = transfer.make_transfer_dataset(topology, k, num_graphs=2, seed=0)
    n = k + 1 if topology == "line" else 2 * k
    assert list(data.n_node) == [n, n]
    for g in range(2):
        graph = _graph(data, g)
        assert nx.is_connected(graph)
        assert nx.shortest_path_length(graph, SOURCE, TARGET) == k
        # Every node lies on a shortest source-target path (nothing is a shortcut or detour).
        ds = nx.single_source_shortest_path_length(graph, SOURCE)
        dt = nx.single_source_shortest_path_length(graph, TARGET)
        assert all(ds[v] + dt[v] == k for v in graph)
        degrees = [d for _, d in graph.degree()]
        if topology == "line":
            assert graph.number_of_edges() == k
            assert graph.degree(SOURCE) == graph.degree(TARGET) == 1
        elif topology == "ring":
            assert graph.number_of_edges() == (n if k > 1 else 1)
            assert k == 1 or set(degrees) == {2}
        else:
            assert graph.number_of_edges() == (n if k > 1 else 1) + 2 * max(k - 2, 0)
            assert max(degrees) <= 4
            assert graph.degree(SOURCE) == graph.degree(TARGET) == min(2, k)


def test_crossed_ring_chords_are_the_documented_crosses():
    k, n = 5, 10
    graph = transfer.transfer_graph("crossed-ring", k)
    ring = transfer.transfer_graph("ring", k)
    chords = {frozenset(e) for e in graph.edges()} - {frozenset(e) for e in ring.edges()}
    node = lambda p: transfer._node(p, k)  # noqa: E731
    want = set()
    for i in range(1, k - 1):
        want.add(frozenset((node(i), node(n - i - 1))))
        want.add(frozenset((node(i + 1), node(n - i))))
    assert chords == want and len(chords) == 2 * (k - 2)


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_edges_undirected_both_directions_no_self_loops(topology):
    data = transfer.make_transfer_dataset(topology, 6, num_graphs=3, seed=1)
    for g in range(3):
        e0, e1 = data.edge_offsets[g], data.edge_offsets[g + 1]
        pairs = list(zip(data.senders[e0:e1].tolist(), data.receivers[e0:e1].tolist(),
                         strict=True))
        assert len(pairs) == len(set(pairs)), "duplicate directed edge"
        assert all(s != r for s, r in pairs), "self-loop"
        assert set(pairs) == {(r, s) for s, r in pairs}, "missing reverse direction"


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_label_swaps_source_and_target_and_keeps_the_rest(topology):
    data = transfer.make_transfer_dataset(topology, 5, num_graphs=20, seed=3)
    assert data.nodes.shape[1] == 1 and data.node_targets.shape == data.nodes.shape
    for g in range(len(data)):
        o = data.node_offsets[g]
        x = data.nodes[o:o + data.n_node[g], 0]
        y = data.node_targets[o:o + data.n_node[g], 0]
        assert x[SOURCE] == 1.0 and x[TARGET] == 0.0
        assert y[SOURCE] == 0.0 and y[TARGET] == 1.0
        rest = np.ones(len(x), bool)
        rest[[SOURCE, TARGET]] = False
        np.testing.assert_array_equal(x[rest], y[rest])


def test_feature_range():
    data = transfer.make_transfer_dataset("ring", 10, num_graphs=50, seed=4)
    x = data.nodes[:, 0].reshape(50, 20)
    rest = np.delete(x, [SOURCE, TARGET], axis=1)
    assert rest.min() >= 0.0 and rest.max() < 0.5
    assert rest.max() > 0.4 and rest.min() < 0.1 and rest.std() > 0.1  # really spread out
    assert data.nodes.dtype == np.float32 and data.node_targets.dtype == np.float32


def test_determinism():
    a = transfer.make_transfer_dataset("crossed-ring", 5, num_graphs=10, seed=7)
    b = transfer.make_transfer_dataset("crossed-ring", 5, num_graphs=10, seed=7)
    c = transfer.make_transfer_dataset("crossed-ring", 5, num_graphs=10, seed=8)
    for field in ("nodes", "node_targets", "senders", "receivers", "n_node", "n_edge"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.nodes, c.nodes)
    np.testing.assert_array_equal(a.senders, c.senders)  # same topology
    # Graphs within one data set differ too.
    x = a.nodes[:, 0].reshape(10, -1)
    assert not np.array_equal(x[0], x[1])


def test_cache_round_trip(tmp_path, monkeypatch):
    sizes = (8, 3, 2)
    first = transfer.load_transfer("line", 4, cache_dir=tmp_path, sizes=sizes)
    assert {k: len(v) for k, v in first.items()} == {"train": 8, "val": 3, "test": 2}
    files = sorted(p.name for p in (tmp_path / "transfer").glob("*.npz"))
    assert len(files) == 3
    # Splits use different seeds.
    assert not np.array_equal(first["val"].nodes[:10], first["test"].nodes[:10])

    def boom(*args, **kwargs):
        raise AssertionError("should have been read from the cache")

    monkeypatch.setattr(transfer, "make_transfer_dataset", boom)
    second = transfer.load_transfer("line", 4, cache_dir=tmp_path, sizes=sizes)
    for split in first:
        for field in ("nodes", "node_targets", "senders", "receivers", "n_node", "n_edge"):
            np.testing.assert_array_equal(getattr(first[split], field),
                                          getattr(second[split], field))


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SWAN_CACHE_DIR", str(tmp_path / "env_cache"))
    transfer.load_transfer("ring", 3, sizes=(2, 1, 1))
    assert len(list((tmp_path / "env_cache" / "transfer").glob("*.npz"))) == 3


def test_errors():
    with pytest.raises(ValueError, match="line, ring, crossed-ring"):
        transfer.make_transfer_dataset("tree", 3, 1, 0)
    with pytest.raises(ValueError, match="line, ring, crossed-ring"):
        transfer.load_transfer("cliquepath", 3)
    for bad in (0, -2):
        with pytest.raises(ValueError, match="distance"):
            transfer.make_transfer_dataset("ring", bad, 1, 0)
        with pytest.raises(ValueError, match="distance"):
            transfer.load_transfer("line", bad)


# ------------------------------------------------------------ the authors' variant

def _split_graphs(data):
    n = int(data.n_node[0])
    return data.nodes[:, 0].reshape(-1, n), data.node_targets[:, 0].reshape(-1, n)


def test_default_variant_is_the_paper():
    a = transfer.make_transfer_dataset("line", 4, num_graphs=5, seed=3)
    b = transfer.make_transfer_dataset("line", 4, num_graphs=5, seed=3, variant="paper")
    for field in ("nodes", "node_targets", "senders", "receivers", "n_node"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_authors_variant_copies_the_source_label(topology):
    data = transfer.make_transfer_dataset(topology, 5, num_graphs=200, seed=3,
                                          variant="authors")
    x, y = _split_graphs(data)
    assert (x[:, SOURCE] == 1.0).all() and (x[:, TARGET] == 0.0).all()
    assert (y[:, SOURCE] == 1.0).all() and (y[:, TARGET] == 1.0).all()  # copy, no swap
    rest = np.delete(np.arange(x.shape[1]), [SOURCE, TARGET])
    np.testing.assert_array_equal(x[:, rest], y[:, rest])
    # Features fill [0, 1), not the paper's [0, 0.5).
    assert x[:, rest].min() >= 0.0 and x[:, rest].max() < 1.0
    assert x[:, rest].max() > 0.9 and (x[:, rest] > 0.5).mean() > 0.4


@pytest.mark.parametrize("k", (2, 3, 10))
def test_authors_line_has_k_nodes_and_k_minus_one_hops(k):
    data = transfer.make_transfer_dataset("line", k, num_graphs=2, seed=0, variant="authors")
    assert list(data.n_node) == [k, k]
    graph = _graph(data, 0)
    assert nx.shortest_path_length(graph, SOURCE, TARGET) == k - 1 == transfer.hops(
        "line", k, "authors")
    assert graph.number_of_edges() == k - 1 and nx.number_of_selfloops(graph) == 0


@pytest.mark.parametrize("topology", ("ring", "crossed-ring"))
def test_authors_rings_keep_the_paper_topology(topology):
    paper = transfer.make_transfer_dataset(topology, 6, num_graphs=2, seed=0)
    authors = transfer.make_transfer_dataset(topology, 6, num_graphs=2, seed=0,
                                             variant="authors")
    assert transfer.hops(topology, 6, "authors") == transfer.hops(topology, 6) == 6
    for field in ("senders", "receivers", "n_node", "n_edge"):
        np.testing.assert_array_equal(getattr(paper, field), getattr(authors, field))


def test_authors_variant_is_cached_apart(tmp_path):
    sizes = (4, 2, 2)
    paper = transfer.load_transfer("ring", 3, cache_dir=tmp_path, sizes=sizes)
    authors = transfer.load_transfer("ring", 3, cache_dir=tmp_path, sizes=sizes,
                                     variant="authors")
    names = sorted(p.name for p in (tmp_path / "transfer").glob("*.npz"))
    assert len(names) == 6 and sum(n.startswith("authors_") for n in names) == 3
    assert (authors["train"].node_targets[:, 0].reshape(4, -1)[:, SOURCE] == 1.0).all()
    assert (paper["train"].node_targets[:, 0].reshape(4, -1)[:, SOURCE] == 0.0).all()
    again = transfer.load_transfer("ring", 3, cache_dir=tmp_path, sizes=sizes,
                                   variant="authors")
    np.testing.assert_array_equal(again["test"].nodes, authors["test"].nodes)


def test_variant_errors():
    with pytest.raises(ValueError, match="paper, authors"):
        transfer.make_transfer_dataset("ring", 3, 1, 0, variant="released")
    with pytest.raises(ValueError, match="paper, authors"):
        transfer.load_transfer("ring", 3, variant="Authors")
    with pytest.raises(ValueError, match="k - 1 hops"):
        transfer.make_transfer_dataset("line", 1, 1, 0, variant="authors")


@pytest.mark.parametrize("topology,k,expected", [
    ("ring", 3, False), ("ring", 10, False), ("crossed-ring", 2, False),
    ("crossed-ring", 5, True), ("line", 5, True), ("line", 1, False),  # 2 nodes: regular
])
def test_beta_matters_only_off_regular_graphs(topology, k, expected):
    assert transfer.beta_matters(topology, k) is expected
    data = transfer.make_transfer_dataset(topology, k, num_graphs=1, seed=0)
    graph = graph_from_edges(data.senders, data.receivers, int(data.n_node[0]))
    x = jnp.asarray(np.random.default_rng(0).normal(size=(int(data.n_node[0]), 4)), jnp.float32)
    params = init_params(jax.random.PRNGKey(0), 4, SWANConfig())
    out = [np.asarray(vector_field(params, graph, x, SWANConfig(beta=b))) for b in (1.0, -1.0)]
    assert np.array_equal(out[0], out[1]) is (not expected)
