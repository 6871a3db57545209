"""Deprecated alias of `swan_jax.graph.builders`, kept for one release.

`swan_jax.graphs` moved into the `swan_jax.graph` package (CHANGELOG.md); import from there.
Nothing in swan-jax imports this module (tests/test_layering.py).
"""

from swan_jax.graph.builders import (
    IntArray,
    adjacency_edges,
    both_directions,
    edges_to_networkx,
    from_networkx,
    graph_from_edges,
    line_graph,
    networkx_adjacency,
    networkx_edges,
    ring_graph,
    to_networkx,
    undirected_graph,
)

__all__ = [
    "adjacency_edges",
    "both_directions",
    "edges_to_networkx",
    "from_networkx",
    "graph_from_edges",
    "IntArray",
    "line_graph",
    "networkx_adjacency",
    "networkx_edges",
    "ring_graph",
    "to_networkx",
    "undirected_graph",
]
