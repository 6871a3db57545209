"""Checks of a `jraph.GraphsTuple` and of node features, on the host before tracing.

Each check raises `ValueError` naming the field, index or value at fault. Checks
are skipped for traced values (inside `jit`/`vmap`), where they cannot run; the
`checkify` helpers at the end check traced values on request.

This module knows no layout but the GraphsTuple: the prepared layout validates itself
(`swan_jax.graph.prepared`), and `swan_jax.graph.layouts.validate_graph` picks the check
of whichever layout it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

import jax
import jraph
import numpy as np
from jax.typing import ArrayLike

P = ParamSpec("P")
R = TypeVar("R")


def is_traced(*values: object) -> bool:
    """True when any leaf of `values` is a JAX tracer (we are inside a transform)."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(values))


def _first_index(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask.reshape(-1))[0])


def validate_graphs_tuple(graph: jraph.GraphsTuple, *, allow_self_loops: bool = True) -> None:
    """Check a GraphsTuple's structure: shapes, dtypes, index ranges, node counts.

    With `n_edge` set, every edge must also join two nodes of the graph `n_edge` assigns
    it to (the layout of `jraph.batch` and of padded batches): an edge crossing into
    another graph would silently mix the graphs of a batch.

    Raises:
      ValueError: naming the first problem found (field, edge index, value).
    """
    if not isinstance(graph, jraph.GraphsTuple):
        raise ValueError(f"graph must be a jraph.GraphsTuple, got {type(graph).__name__} "
                         f"(or a PreparedGraph from swan_jax.prepare_graph)")
    if is_traced(graph.senders, graph.receivers, graph.n_node, graph.n_edge):
        return
    if graph.senders is None or graph.receivers is None:
        raise ValueError("graph.senders and graph.receivers must be set (got None)")
    if graph.n_node is None:
        raise ValueError("graph.n_node must be set (got None)")
    senders = np.asarray(graph.senders)
    receivers = np.asarray(graph.receivers)
    n_node = np.asarray(graph.n_node)
    n_edge = None if graph.n_edge is None else np.asarray(graph.n_edge)
    fields = [("senders", senders), ("receivers", receivers), ("n_node", n_node)]
    if n_edge is not None:
        fields.append(("n_edge", n_edge))
    for name, arr in fields:
        if arr.ndim != 1:
            raise ValueError(f"graph.{name} must be 1-D, got shape {arr.shape}")
        if not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"graph.{name} must hold integers, got dtype {arr.dtype}")
    if senders.shape != receivers.shape:
        raise ValueError(
            f"graph.senders has {senders.shape[0]} edges but graph.receivers has "
            f"{receivers.shape[0]}"
        )
    if np.any(n_node < 0):
        raise ValueError(f"graph.n_node has a negative count at graph {_first_index(n_node < 0)}")
    if n_edge is not None:
        if n_edge.shape != n_node.shape:
            raise ValueError(f"graph.n_edge has {n_edge.shape[0]} graphs but graph.n_node has "
                             f"{n_node.shape[0]}")
        if np.any(n_edge < 0):
            raise ValueError(
                f"graph.n_edge has a negative count at graph {_first_index(n_edge < 0)}")
    num_nodes = int(n_node.sum())
    if graph.nodes is not None:
        rows = jax.tree_util.tree_leaves(graph.nodes)
        for leaf in rows:
            if np.shape(leaf)[0] != num_nodes:
                raise ValueError(
                    f"sum(graph.n_node) = {num_nodes} but graph.nodes has "
                    f"{np.shape(leaf)[0]} rows"
                )
    if n_edge is not None and int(n_edge.sum()) != senders.shape[0]:
        raise ValueError(
            f"sum(graph.n_edge) = {int(n_edge.sum())} but graph has {senders.shape[0]} edges"
        )
    for name, arr in (("senders", senders), ("receivers", receivers)):
        bad = (arr < 0) | (arr >= num_nodes)
        if np.any(bad):
            e = _first_index(bad)
            raise ValueError(
                f"graph.{name}[{e}] = {int(arr[e])} is out of range for a graph with "
                f"{num_nodes} nodes"
            )
    if n_edge is not None and senders.size:
        _check_edges_stay_in_their_graph(senders, receivers, n_node, n_edge)
    if not allow_self_loops:
        loops = senders == receivers
        if np.any(loops):
            e = _first_index(loops)
            raise ValueError(f"graph has a self-loop at edge {e} (node {int(senders[e])})")


def _check_edges_stay_in_their_graph(senders: np.ndarray, receivers: np.ndarray,
                                     n_node: np.ndarray, n_edge: np.ndarray) -> None:
    """Edge e belongs to graph g by `n_edge`; both its ends must be nodes of graph g."""
    offsets = np.concatenate([[0], np.cumsum(n_node)])
    edge_graph = np.repeat(np.arange(n_node.shape[0]), n_edge)
    low, high = offsets[edge_graph], offsets[edge_graph + 1]
    for name, arr in (("senders", senders), ("receivers", receivers)):
        bad = (arr < low) | (arr >= high)
        if np.any(bad):
            e = _first_index(bad)
            g = int(edge_graph[e])
            nodes = (f"nodes {int(low[e])}..{int(high[e]) - 1}" if high[e] > low[e]
                     else "no nodes")
            raise ValueError(
                f"graph.{name}[{e}] = {int(arr[e])} is not a node of graph {g} ({nodes}), "
                f"which edge {e} belongs to by graph.n_edge: edges must not cross graphs"
            )


def validate_node_features(x: ArrayLike, num_nodes: int, width: int | None = None,
                           name: str = "x") -> None:
    """Check a `[num_nodes, width]` float feature array for shape and finiteness."""
    if is_traced(x):
        return
    arr = np.asarray(x)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D [num_nodes, d], got shape {arr.shape}")
    if arr.shape[0] != num_nodes:
        raise ValueError(f"{name} has {arr.shape[0]} rows but the graph has {num_nodes} nodes")
    if width is not None and arr.shape[1] != width:
        raise ValueError(f"{name} has width {arr.shape[1]} but the parameters expect {width}")
    if not np.issubdtype(arr.dtype, np.floating):
        raise ValueError(f"{name} must be a float array, got dtype {arr.dtype}")
    bad = ~np.isfinite(arr)
    if np.any(bad):
        row, col = np.unravel_index(_first_index(bad), arr.shape)
        raise ValueError(
            f"{name} has a non-finite value ({arr[row, col]}) at row {row}, column {col}"
        )


# --- checks of traced inputs (opt-in, read under jax.experimental.checkify) ----------


def check_range(name: str, indices: ArrayLike, high: ArrayLike) -> None:
    """checkify: every `indices` value in `[0, high)`, naming the first one that is not."""
    import jax.numpy as jnp
    from jax.experimental import checkify

    flat = jnp.reshape(indices, -1)
    if flat.shape[0] == 0:  # static: nothing to check (argmax of nothing is an error)
        return
    bad = (flat < 0) | (flat >= high)
    first = jnp.argmax(bad)
    checkify.check(~jnp.any(bad), f"{name}[{{i}}] (flat) = {{v}} is out of range for "
                                  f"{{n}} entries", i=first, v=flat[first], n=jnp.asarray(high))


def check_finite_traced(x: ArrayLike) -> None:
    """checkify: `x` `[N, d]` finite, naming the first row and column that is not."""
    import jax.numpy as jnp
    from jax.experimental import checkify

    bad = ~jnp.isfinite(x)
    first = jnp.argmax(jnp.reshape(bad, -1))
    checkify.check(~jnp.any(bad), "x has a non-finite value at row {r}, column {c}",
                   r=first // jnp.shape(x)[-1], c=first % jnp.shape(x)[-1])


def check_edges_traced(graph: jraph.GraphsTuple, num_nodes: ArrayLike) -> None:
    """checkify: every sender and receiver of a GraphsTuple in `[0, num_nodes)`."""
    check_range("graph.senders", graph.senders, num_nodes)
    check_range("graph.receivers", graph.receivers, num_nodes)


def checked(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn` run under `checkify.checkify`: the first failed check (e.g. of
    `traced_checks`) raises `ValueError` with its message; otherwise `fn`'s result.

        step = sj.graph.checked(jax.jit(
            lambda p, g, x: sj.solve(p, g, x, cfg, check_traced=True)))

    (`swan_jax.graph.layouts.traced_checks` adds the checks of a graph's layout.)
    """
    import functools

    from jax.experimental import checkify

    checkified = checkify.checkify(fn)

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        out: R
        error, out = checkified(*args, **kwargs)
        message = error.get()
        if message is not None:
            raise ValueError(message)
        return out

    return run
