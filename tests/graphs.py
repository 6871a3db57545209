"""Random graphs for the tests, built with `swan_jax.graph.builders`
(re-exported: `graph_from_edges`)."""

from __future__ import annotations

import numpy as np

from swan_jax.graph.builders import edges_to_networkx, graph_from_edges, undirected_graph

__all__ = ["dataset_graph_to_networkx", "graph_from_edges", "random_directed",
           "random_undirected"]


def random_undirected(rng: np.random.Generator, num_nodes: int, p: float = 0.3, isolated: int = 1):
    """Undirected graph (both directions) with unequal degrees and `isolated` lonely nodes."""
    edges = set()
    core = num_nodes - isolated
    for u in range(core):
        for v in range(u + 1, core):
            if rng.random() < p:
                edges.add((u, v))
    # A hub guarantees unequal degrees.
    for v in range(1, core):
        if rng.random() < 0.5:
            edges.add((0, v))
    edges.add((0, 1))
    return undirected_graph(sorted(edges), num_nodes)


def random_directed(rng: np.random.Generator, num_nodes: int, num_edges: int):
    """Directed multigraph, self-loops allowed: the operators must cope with anything."""
    senders = rng.integers(0, num_nodes, num_edges)
    receivers = rng.integers(0, num_nodes, num_edges)
    return graph_from_edges(senders, receivers, num_nodes)


def dataset_graph_to_networkx(data, g: int):
    """Graph g of a `GraphDataset` as an undirected networkx graph (isolated nodes kept)."""
    e0, e1 = data.edge_offsets[g], data.edge_offsets[g + 1]
    return edges_to_networkx(data.senders[e0:e1], data.receivers[e0:e1], int(data.n_node[g]))
