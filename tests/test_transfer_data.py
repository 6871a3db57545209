"""Graph transfer data: topology, labels, features, determinism, cache."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from swan_jax.data import transfer
from swan_jax.data.transfer import SOURCE, TARGET, TOPOLOGIES
from tests.graphs import dataset_graph_to_networkx

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
