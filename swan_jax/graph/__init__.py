"""Graphs in swan-jax: builders, the two layouts, their kernels, one protocol.

* `builders`: small `jraph.GraphsTuple`s from edge lists, adjacency matrices, networkx.
* `validation`: host checks of a GraphsTuple and of node features; checkify helpers.
* `prepared`: the gather-only slot layout `PreparedGraph` (`prepare_graph`), which
  validates itself; the closure helpers the data pipeline builds batches with.
* `gather`: the gather-only kernels over a prepared layout (linear maps whose
  transposes are gathers too).
* `protocol`: `GraphOps`, the operations the field and the models need.
* `segment` / `slots`: `GraphOps` on a GraphsTuple (edge weights, segment sums; the
  reference) and on a PreparedGraph (slot values, gathers).
* `layouts`: `as_operator(graph)`, the one place that tells the layouts apart.

Import direction (tests/test_layering.py): builders, validation <- prepared <- gather,
protocol <- segment, slots <- layouts; nothing here imports the rest of swan-jax.
"""

from swan_jax.graph import builders, gather
from swan_jax.graph.builders import (
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
from swan_jax.graph.layouts import as_operator, is_graph, traced_checks, validate_graph
from swan_jax.graph.prepared import (
    Closure,
    PreparedGraph,
    check_prepared,
    check_prepared_traced,
    choose_slot_width,
    closure_slots,
    overflow_rows,
    plain_graph,
    prepare_graph,
    prepared_from_closure,
    validate_prepared,
)
from swan_jax.graph.protocol import PARTS, Graph, GraphOps, Term, safe_inverse
from swan_jax.graph.segment import (
    EdgeOperators,
    SegmentGraph,
    aggregate,
    aggregate_transpose,
    antisymmetric_aggregate,
    dense_operator,
    edge_operators,
    in_degree,
    symmetric_aggregate,
)
from swan_jax.graph.slots import (
    SlotGraph,
    SlotOperators,
    scaled_slot_aggregate,
    slot_adjacency,
    slot_attention,
    slot_operators,
)
from swan_jax.graph.validation import (
    checked,
    is_traced,
    validate_graphs_tuple,
    validate_node_features,
)

__all__ = [
    # modules
    "builders", "gather",
    # builders
    "adjacency_edges", "both_directions", "edges_to_networkx", "from_networkx",
    "graph_from_edges", "line_graph", "networkx_adjacency", "networkx_edges", "ring_graph",
    "to_networkx", "undirected_graph",
    # the protocol and its dispatch
    "Graph", "GraphOps", "PARTS", "SegmentGraph", "SlotGraph", "Term", "as_operator",
    "is_graph",
    # the prepared layout (and the closure helpers of the data pipeline)
    "Closure", "PreparedGraph", "check_prepared", "check_prepared_traced", "choose_slot_width",
    "closure_slots", "overflow_rows", "plain_graph", "prepare_graph", "prepared_from_closure",
    "validate_prepared",
    # operators of each layout
    "EdgeOperators", "SlotOperators", "aggregate", "aggregate_transpose",
    "antisymmetric_aggregate", "dense_operator", "edge_operators", "in_degree",
    "safe_inverse", "scaled_slot_aggregate", "slot_adjacency", "slot_attention",
    "slot_operators", "symmetric_aggregate",
    # checks
    "checked", "is_traced", "traced_checks", "validate_graph", "validate_graphs_tuple",
    "validate_node_features",
]
