"""The one place that tells the graph layouts apart: `as_operator` and what rests on it.

A `jraph.GraphsTuple` runs the segment-sum layout, a `PreparedGraph` the slot layout;
everything else in swan-jax takes a graph, calls `as_operator(graph)` once and uses the
`GraphOps` protocol (`swan_jax.graph.protocol`).
"""

from __future__ import annotations

from typing import Any

import jax
import jraph

from swan_jax.graph.prepared import PreparedGraph
from swan_jax.graph.protocol import Graph, GraphOps
from swan_jax.graph.segment import SegmentGraph
from swan_jax.graph.slots import SlotGraph
from swan_jax.graph.validation import check_finite_traced, validate_graphs_tuple

Array = jax.Array


def is_graph(value: Any) -> bool:
    """True for a graph of either layout (`jraph.GraphsTuple` or `PreparedGraph`)."""
    return isinstance(value, jraph.GraphsTuple | PreparedGraph)


def as_operator(graph: Graph) -> GraphOps:
    """The graph's operations (`GraphOps`): slot gathers on a `PreparedGraph`, segment
    sums on a `jraph.GraphsTuple`.

    Raises:
      ValueError: `graph` is neither.
    """
    if isinstance(graph, PreparedGraph):
        return SlotGraph(graph)
    if isinstance(graph, jraph.GraphsTuple):
        return SegmentGraph(graph)
    raise ValueError(f"graph must be a jraph.GraphsTuple, got {type(graph).__name__} "
                     f"(or a PreparedGraph from swan_jax.prepare_graph)")


def validate_graph(graph: Graph, *, allow_self_loops: bool = True) -> None:
    """Check a graph's structure before tracing; each layout checks itself.

    A `jraph.GraphsTuple`: shapes, dtypes, index ranges, node counts, and (with `n_edge`)
    that no edge crosses from one graph of a batch into another
    (`swan_jax.graph.validation.validate_graphs_tuple`). A `PreparedGraph`
    (`swan_jax.prepare_graph`, which validated its graph on the host): the static checks
    of `validate_prepared`, shapes and dtypes of its layout.

    Raises:
      ValueError: naming the first problem found (field, edge index, value).
    """
    if isinstance(graph, PreparedGraph):
        SlotGraph(graph).validate()
        return
    validate_graphs_tuple(graph, allow_self_loops=allow_self_loops)  # refuses other types


def traced_checks(graph: Graph, x: Array | None = None) -> None:
    """Value checks that also work on traced inputs (inside `jit`, `vmap`, `grad`).

    The host-side checks (`validate_graph`, `validate_node_features`) are skipped for
    traced values; these cost a few reductions over the index arrays and `x`:
    every sender / receiver (or slot neighbour, mirror and pair index of a
    `PreparedGraph`) in range, and `x` finite. They are `jax.experimental.checkify`
    checks: run the caller under `checkify.checkify` (or `swan_jax.graph.checked`), else
    tracing stops with JAX's "not functionalized" error. `solve(..., check_traced=True)`
    adds them.
    """
    as_operator(graph).check_traced(x)
    if x is not None:
        check_finite_traced(x)
