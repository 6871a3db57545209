"""Small graph builders shared by the tests."""

from __future__ import annotations

import jax.numpy as jnp
import jraph
import numpy as np


def graph_from_edges(senders, receivers, num_nodes, nodes=None) -> jraph.GraphsTuple:
    senders = np.asarray(senders, np.int32)
    receivers = np.asarray(receivers, np.int32)
    return jraph.GraphsTuple(
        nodes=None if nodes is None else jnp.asarray(nodes),
        edges=None,
        senders=jnp.asarray(senders),
        receivers=jnp.asarray(receivers),
        n_node=jnp.asarray([num_nodes], jnp.int32),
        n_edge=jnp.asarray([len(senders)], jnp.int32),
        globals=None,
    )


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
    pairs = sorted(edges)
    senders = [u for u, v in pairs] + [v for u, v in pairs]
    receivers = [v for u, v in pairs] + [u for u, v in pairs]
    return graph_from_edges(senders, receivers, num_nodes)


def random_directed(rng: np.random.Generator, num_nodes: int, num_edges: int):
    """Directed multigraph, self-loops allowed: the operators must cope with anything."""
    senders = rng.integers(0, num_nodes, num_edges)
    receivers = rng.integers(0, num_nodes, num_edges)
    return graph_from_edges(senders, receivers, num_nodes)


def dataset_graph_to_networkx(data, g: int):
    """Graph g of a `GraphDataset` as an undirected networkx graph (isolated nodes kept)."""
    import networkx as nx

    e0, e1 = data.edge_offsets[g], data.edge_offsets[g + 1]
    graph = nx.Graph()
    graph.add_nodes_from(range(int(data.n_node[g])))
    graph.add_edges_from(zip(data.senders[e0:e1].tolist(), data.receivers[e0:e1].tolist(),
                             strict=True))
    return graph
