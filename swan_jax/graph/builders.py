"""Small graphs as `jraph.GraphsTuple`s, from edge lists, adjacency matrices and networkx.

The one place where swan-jax turns an edge list into a graph and back (the analysis
notebooks, the tests and the transfer / graph-property generators all build through it).
Conventions (docs/conventions.md "Graphs"): an edge `e` carries a message from
`senders[e]` to `receivers[e]`; an undirected edge is stored as both of its directions.

Two orders of the directed edges of an undirected graph appear here, on purpose:

* `undirected_graph(edges, n)`: the edges as given, then all of them reversed
  (edge `i` and edge `i + len(edges)` are the two directions of `edges[i]`);
* `networkx_edges` / `adjacency_edges`: every direction once, sorted by
  `(sender, receiver)`; the generators store this order, so equal topologies give
  identical arrays whichever form (networkx graph or adjacency matrix) they start from.

Everything here runs on the host (NumPy); only the returned `GraphsTuple` holds jax arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import jax.numpy as jnp
import jraph
import numpy as np

if TYPE_CHECKING:
    import networkx as nx

IntArray = np.ndarray  # int32 [E]


def _check_edges(senders: np.ndarray, receivers: np.ndarray, num_nodes: int) -> None:
    if senders.ndim != 1 or senders.shape != receivers.shape:
        raise ValueError(f"senders and receivers must be 1-D and of one length, got shapes "
                         f"{senders.shape} and {receivers.shape}")
    for name, index in (("senders", senders), ("receivers", receivers)):
        if index.size and (index.min() < 0 or index.max() >= num_nodes):
            bad = int(np.flatnonzero((index < 0) | (index >= num_nodes))[0])
            raise ValueError(f"{name}[{bad}] = {int(index[bad])} is not a node of a "
                             f"{num_nodes}-node graph")


def graph_from_edges(senders: Sequence[int] | np.ndarray, receivers: Sequence[int] | np.ndarray,
                     num_nodes: int, nodes: Any = None) -> jraph.GraphsTuple:
    """A one-graph `GraphsTuple` with the directed edges `senders[e] -> receivers[e]`.

    Args:
      senders, receivers: `[E]` node indices in `[0, num_nodes)`.
      num_nodes: N, the number of nodes (isolated ones included).
      nodes: optional node features `[N, ...]`.

    Returns:
      `GraphsTuple` with int32 `senders` / `receivers` `[E]`, `n_node = [N]`, `n_edge = [E]`,
      no edge or global features. ValueError names the first index out of range.
    """
    senders, receivers = np.asarray(senders, np.int32), np.asarray(receivers, np.int32)
    _check_edges(senders, receivers, int(num_nodes))
    return jraph.GraphsTuple(
        nodes=None if nodes is None else jnp.asarray(nodes),
        edges=None,
        senders=jnp.asarray(senders),
        receivers=jnp.asarray(receivers),
        n_node=jnp.asarray([num_nodes], jnp.int32),
        n_edge=jnp.asarray([len(senders)], jnp.int32),
        globals=None,
    )


def both_directions(edges: Sequence[tuple[int, int]] | np.ndarray) -> tuple[IntArray, IntArray]:
    """`(senders, receivers)` `[2 E]` of `E` undirected pairs: the pairs as given, then reversed."""
    pairs = np.asarray(list(edges) if not isinstance(edges, np.ndarray) else edges, np.int32)
    pairs = pairs.reshape(-1, 2)
    return (np.concatenate([pairs[:, 0], pairs[:, 1]]),
            np.concatenate([pairs[:, 1], pairs[:, 0]]))


def undirected_graph(edges: Sequence[tuple[int, int]] | np.ndarray, num_nodes: int,
                     nodes: Any = None) -> jraph.GraphsTuple:
    """A one-graph `GraphsTuple` with both directions of every pair in `edges` (`[E, 2]`).

    Returns `2 E` directed edges, in the order of `both_directions`.
    """
    return graph_from_edges(*both_directions(edges), num_nodes, nodes)


def line_graph(num_nodes: int) -> jraph.GraphsTuple:
    """Path `0 - 1 - ... - (N-1)`: `2 (N - 1)` directed edges."""
    return undirected_graph([(i, i + 1) for i in range(num_nodes - 1)], num_nodes)


def ring_graph(num_nodes: int) -> jraph.GraphsTuple:
    """Cycle `0 - 1 - ... - (N-1) - 0`: `2 N` directed edges."""
    return undirected_graph([(i, (i + 1) % num_nodes) for i in range(num_nodes)], num_nodes)


# --- networkx and adjacency matrices --------------------------------------------------


def _check_networkx_nodes(graph: nx.Graph) -> int:
    num_nodes: int = graph.number_of_nodes()
    if set(graph.nodes) != set(range(num_nodes)):
        raise ValueError(f"the networkx graph's nodes must be 0 ... {num_nodes - 1}; relabel "
                         "them with networkx.convert_node_labels_to_integers")
    return num_nodes


def networkx_edges(graph: nx.Graph) -> tuple[IntArray, IntArray]:
    """Both directions of every edge of an undirected networkx graph on nodes `0 ... N-1`.

    Returns int32 `(senders, receivers)`, each direction once (a self-loop once), sorted by
    `(sender, receiver)`: the order `adjacency_edges` gives for the graph's adjacency.
    """
    _check_networkx_nodes(graph)
    pairs = np.asarray(list(graph.edges()), np.int32).reshape(-1, 2)
    directed = np.unique(np.concatenate([pairs, pairs[:, ::-1]]), axis=0)  # lexicographic
    return directed[:, 0].copy(), directed[:, 1].copy()


def from_networkx(graph: nx.Graph, nodes: Any = None) -> jraph.GraphsTuple:
    """A one-graph `GraphsTuple` of an undirected networkx graph (order of `networkx_edges`)."""
    return graph_from_edges(*networkx_edges(graph), graph.number_of_nodes(), nodes)


def networkx_adjacency(graph: nx.Graph) -> np.ndarray:
    """Boolean adjacency `[N, N]` of a networkx graph on nodes `0 ... N-1` (row u = node u)."""
    import networkx as nx

    num_nodes = _check_networkx_nodes(graph)
    adjacency: np.ndarray = nx.to_numpy_array(graph, nodelist=range(num_nodes)) > 0
    return adjacency


def adjacency_edges(adjacency: np.ndarray) -> tuple[IntArray, IntArray]:
    """`(senders, receivers)` of a symmetric `[N, N]` adjacency, sorted by `(sender, receiver)`.

    Every nonzero entry is one directed edge (both directions of an undirected edge, as the
    matrix is symmetric). ValueError when it is not square and symmetric.
    """
    adjacency = np.asarray(adjacency)
    if adjacency.ndim != 2 or adjacency.shape[0] != adjacency.shape[1]:
        raise ValueError(f"an adjacency matrix must be square, got shape {adjacency.shape}")
    if not np.array_equal(adjacency, adjacency.T):
        raise ValueError("the adjacency matrix is not symmetric: give both directions of "
                         "every edge")
    senders, receivers = np.nonzero(adjacency)  # row-major: sorted by (sender, receiver)
    return senders.astype(np.int32), receivers.astype(np.int32)


def edges_to_networkx(senders: Sequence[int] | np.ndarray, receivers: Sequence[int] | np.ndarray,
                      num_nodes: int) -> nx.Graph:
    """An undirected `networkx.Graph` on nodes `0 ... N-1` (isolated ones kept) of the edges."""
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(int(num_nodes)))
    graph.add_edges_from(zip(np.asarray(senders).tolist(), np.asarray(receivers).tolist(),
                             strict=True))
    return graph


def to_networkx(graph: jraph.GraphsTuple) -> nx.Graph:
    """An undirected `networkx.Graph` of a `GraphsTuple`'s edges (all its graphs; for drawing)."""
    return edges_to_networkx(graph.senders, graph.receivers, int(np.sum(np.asarray(graph.n_node))))


__all__ = [
    "adjacency_edges", "both_directions", "edges_to_networkx", "from_networkx",
    "graph_from_edges", "line_graph", "networkx_adjacency", "networkx_edges", "ring_graph",
    "to_networkx", "undirected_graph",
]
