"""One graph of a user's own data -> the per-graph dict `GraphDataset.from_graphs` joins.

Three inputs are understood:

* a `jraph.GraphsTuple` holding one or more graphs (`nodes [N, F]`, optional `edges [E, Fe]`,
  `senders` / `receivers` global to the tuple; its `globals [G, T]`, when given, are the
  graph-level targets, as `GraphDataset.__getitem__` writes them);
* a networkx graph: nodes in `G.nodes` order, features from a node attribute (`"x"` by
  default), optional edge features / node targets from attributes and a graph target from
  `G.graph`; an undirected graph gives both directions of every edge, a directed one its
  edges as they are;
* a dict with the keys of `GraphDataset` (`nodes`, `senders`, `receivers`, optionally
  `edges`, `node_targets`, `graph_targets`), per graph.

Everything else is refused with one line naming the graph and what it should be.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import jraph
import numpy as np

from swan_jax.graph import is_graph, plain_graph


@dataclasses.dataclass(frozen=True)
class Attributes:
    """Which networkx attributes hold what (None: not read).

    Attributes:
      node_features: node attribute with the features (a number or a vector per node);
        None: the graphs have no node features, every node gets the constant feature 1
        (one column), so that only the structure informs the model.
      edge_features: edge attribute with the edge features.
      node_target: node attribute with the node-level target.
      graph_target: key of `G.graph` with the graph-level target.
    """

    node_features: str | None = "x"
    edge_features: str | None = None
    node_target: str | None = None
    graph_target: str | None = None


def _rows(values: list[Any], what: str, index: int) -> np.ndarray:
    """Per-item scalars or vectors -> `[n, F]` (a scalar becomes one column)."""
    try:
        arr = np.asarray(values)
    except ValueError as err:  # ragged vectors
        raise ValueError(f"graph {index}: {what} have different lengths ({err})") from None
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"graph {index}: {what} must be numbers or 1-D vectors, got "
                         f"shape {arr.shape[1:]} per item")
    return arr


def _attribute(items: Iterable[tuple[Any, Mapping]], key: str, what: str, index: int,
               setting: str) -> np.ndarray:
    values = []
    for name, data in items:
        if key not in data:
            raise ValueError(f"graph {index}: {what} {name!r} has no attribute {key!r}; "
                             f"set {setting}= to the attribute that holds it")
        values.append(data[key])
    return _rows(values, f"{what} attributes {key!r}", index)


def from_networkx(graph, index: int, attrs: Attributes) -> dict[str, np.ndarray | None]:
    """One networkx graph as a per-graph dict (see the module docstring)."""
    order = {node: i for i, node in enumerate(graph.nodes)}
    if attrs.node_features is None or not order:  # no features: the constant 1 column
        nodes = np.ones((len(order), 1), np.float32)
    else:
        nodes = _attribute(graph.nodes(data=True), attrs.node_features, "node", index,
                           "node_features")
    edges = list(graph.edges(data=True))
    if not graph.is_directed():  # both directions; a self-loop stays one edge
        edges = [e for u, v, d in edges
                 for e in ([(u, v, d), (v, u, d)] if u != v else [(u, v, d)])]
    senders = np.asarray([order[u] for u, _, _ in edges], np.int64)
    receivers = np.asarray([order[v] for _, v, _ in edges], np.int64)
    out: dict[str, np.ndarray | None] = {"nodes": nodes, "senders": senders,
                                         "receivers": receivers}
    if attrs.edge_features is not None:
        out["edges"] = _attribute((((u, v), d) for u, v, d in edges), attrs.edge_features,
                                  "edge", index, "edge_features")
    if attrs.node_target is not None:
        out["node_targets"] = _attribute(graph.nodes(data=True), attrs.node_target, "node",
                                         index, "node_target")
    if attrs.graph_target is not None:
        if attrs.graph_target not in graph.graph:
            raise ValueError(f"graph {index}: G.graph has no {attrs.graph_target!r}; set "
                             f"graph_target= to the key of G.graph that holds the target")
        out["graph_targets"] = np.atleast_1d(np.asarray(graph.graph[attrs.graph_target]))[None]
    return out


def from_graphs_tuple(graph: jraph.GraphsTuple, index: int) -> list[dict[str, Any]]:
    """The graphs of one `GraphsTuple` as per-graph dicts (local edge indices)."""
    if graph.nodes is None or not hasattr(graph.nodes, "shape"):
        raise ValueError(f"graph {index}: GraphsTuple.nodes must be an array [N, F] (dicts "
                         f"of features are not supported), got {type(graph.nodes).__name__}")
    graph = jax_to_numpy(graph)
    parts = jraph.unbatch_np(graph) if np.asarray(graph.n_node).shape[0] > 1 else [graph]
    out = []
    for part in parts:
        nodes = np.asarray(part.nodes)
        out.append({
            "nodes": nodes if nodes.ndim == 2 else nodes.reshape(len(nodes), -1),
            "edges": None if part.edges is None else np.asarray(part.edges).reshape(
                len(np.asarray(part.senders)), -1),
            "senders": np.asarray(part.senders), "receivers": np.asarray(part.receivers),
            "graph_targets": None if part.globals is None else np.asarray(part.globals
                                                                          ).reshape(1, -1),
        })
    return out


def jax_to_numpy(graph: jraph.GraphsTuple) -> jraph.GraphsTuple:
    return jraph.GraphsTuple(*(None if f is None else np.asarray(f) for f in graph))


def per_graph(graphs: Iterable[Any], attrs: Attributes) -> list[dict[str, Any]]:
    """Every input graph (or every graph of a batched GraphsTuple) as a per-graph dict."""
    out: list[dict[str, Any]] = []
    for index, graph in enumerate(graphs):
        if is_graph(graph):  # a GraphsTuple, or a prepared one (its GraphsTuple fields)
            out.extend(from_graphs_tuple(plain_graph(graph), index))
        elif isinstance(graph, Mapping):
            missing = {"nodes", "senders", "receivers"} - set(graph)
            if missing:
                raise ValueError(f"graph {index}: the dict lacks {sorted(missing)}")
            out.append(dict(graph))
        elif hasattr(graph, "nodes") and hasattr(graph, "is_directed"):
            out.append(from_networkx(graph, index, attrs))
        else:
            raise ValueError(f"graph {index}: expected a jraph.GraphsTuple, a networkx graph "
                             f"or a dict of arrays, got {type(graph).__name__}")
    return out
