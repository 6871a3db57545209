"""`swan_jax.graph.builders`: edge lists, adjacency matrices, networkx graphs."""

from __future__ import annotations

import jraph
import networkx as nx
import numpy as np
import pytest

from swan_jax.data import graphprop, transfer
from swan_jax.graph import builders as graphs


def test_graph_from_edges_keeps_the_edges_as_given():
    graph = graphs.graph_from_edges([2, 0, 0], [1, 1, 2], 4, nodes=np.ones((4, 3)))
    assert np.asarray(graph.senders).tolist() == [2, 0, 0]
    assert np.asarray(graph.receivers).tolist() == [1, 1, 2]
    assert graph.senders.dtype == graph.receivers.dtype == np.int32
    assert np.asarray(graph.n_node).tolist() == [4] and np.asarray(graph.n_edge).tolist() == [3]
    assert graph.nodes.shape == (4, 3) and graph.edges is None and graph.globals is None
    empty = graphs.graph_from_edges([], [], 0)
    assert empty.senders.shape == (0,) and np.asarray(empty.n_edge).tolist() == [0]


@pytest.mark.parametrize("senders,receivers,message", [
    ([0, 1], [1, 3], r"receivers\[1\] = 3 is not a node of a 3-node graph"),
    ([-1, 1], [1, 0], r"senders\[0\] = -1 is not a node of a 3-node graph"),
    ([0, 1], [1], "1-D and of one length"),
])
def test_graph_from_edges_names_the_bad_index(senders, receivers, message):
    with pytest.raises(ValueError, match=message):
        graphs.graph_from_edges(senders, receivers, 3)


def test_undirected_graph_lists_the_pairs_then_their_reverses():
    graph = graphs.undirected_graph([(0, 1), (1, 2), (3, 1)], 5)
    assert np.asarray(graph.senders).tolist() == [0, 1, 3, 1, 2, 1]
    assert np.asarray(graph.receivers).tolist() == [1, 2, 1, 0, 1, 3]
    assert np.asarray(graph.n_node).tolist() == [5]


@pytest.mark.parametrize("num_nodes", [2, 3, 7])
def test_line_and_ring(num_nodes):
    line, ring = graphs.line_graph(num_nodes), graphs.ring_graph(num_nodes)
    line_nx, ring_nx = graphs.to_networkx(line), graphs.to_networkx(ring)
    assert nx.utils.graphs_equal(line_nx, nx.path_graph(num_nodes))
    assert nx.utils.graphs_equal(ring_nx, nx.cycle_graph(num_nodes))
    assert np.asarray(line.n_edge).tolist() == [2 * (num_nodes - 1)]
    assert np.asarray(ring.n_edge).tolist() == [2 * num_nodes]


def _random_graph(seed: int, num_nodes: int = 12) -> nx.Graph:
    graph = nx.gnp_random_graph(num_nodes, 0.3, seed=seed)
    graph.add_edge(seed % num_nodes, seed % num_nodes)  # a self-loop, stored once
    return graph


@pytest.mark.parametrize("seed", range(5))
def test_networkx_edges_and_adjacency_edges_agree(seed):
    graph = _random_graph(seed)
    senders, receivers = graphs.networkx_edges(graph)
    adjacency = graphs.networkx_adjacency(graph)
    from_adjacency = graphs.adjacency_edges(adjacency)
    np.testing.assert_array_equal(senders, from_adjacency[0])
    np.testing.assert_array_equal(receivers, from_adjacency[1])
    assert senders.dtype == receivers.dtype == np.int32
    # Each direction of every edge once, sorted by (sender, receiver).
    pairs = list(zip(senders.tolist(), receivers.tolist(), strict=True))
    assert pairs == sorted(set(pairs))
    want = {(u, v) for u, v in graph.edges()} | {(v, u) for u, v in graph.edges()}
    assert set(pairs) == want
    assert adjacency.dtype == bool and adjacency.shape == (12, 12)


@pytest.mark.parametrize("seed", range(3))
def test_networkx_round_trip_keeps_isolated_nodes(seed):
    graph = _random_graph(seed, 15)
    graph.add_node(15)  # isolated
    back = graphs.to_networkx(graphs.from_networkx(graph, nodes=np.zeros((16, 2))))
    assert nx.utils.graphs_equal(back, graph)
    batched = graphs.to_networkx(jraph.batch([graphs.from_networkx(graph)] * 2))
    assert batched.number_of_nodes() == 32


def test_networkx_nodes_must_be_integers_from_zero():
    with pytest.raises(ValueError, match="convert_node_labels_to_integers"):
        graphs.networkx_edges(nx.grid_2d_graph(2, 3))
    with pytest.raises(ValueError, match="nodes must be 0 ... 1"):
        graphs.networkx_adjacency(nx.relabel_nodes(nx.path_graph(2), {0: 5}))


def test_adjacency_must_be_square_and_symmetric():
    with pytest.raises(ValueError, match="square"):
        graphs.adjacency_edges(np.ones((2, 3), bool))
    with pytest.raises(ValueError, match="not symmetric"):
        graphs.adjacency_edges(np.array([[0, 1], [0, 0]], bool))


@pytest.mark.parametrize("topology", transfer.TOPOLOGIES)
def test_transfer_generator_stores_the_shared_edge_order(topology):
    data = transfer.make_transfer_dataset(topology, 4, num_graphs=2, seed=0)
    senders, receivers = graphs.networkx_edges(transfer.transfer_graph(topology, 4))
    np.testing.assert_array_equal(data.senders, np.tile(senders, 2))
    np.testing.assert_array_equal(data.receivers, np.tile(receivers, 2))


def test_graphprop_generator_stores_the_shared_edge_order():
    data = graphprop.make_graphprop_splits(
        3, nodes={"train": (8,), "val": (6,), "test": (6,)},
        per_size={"train": 4, "val": 1, "test": 1})["train"]
    for g in range(4):
        e0, e1 = data.edge_offsets[g], data.edge_offsets[g + 1]
        pairs = list(zip(data.senders[e0:e1].tolist(), data.receivers[e0:e1].tolist(),
                         strict=True))
        assert pairs == sorted(set(pairs))  # each direction once, sorted
        assert set(pairs) == {(r, s) for s, r in pairs}  # both directions
