"""Deprecated alias of `swan_jax.graph.prepared`, kept for one release.

`swan_jax.prepared` moved into the `swan_jax.graph` package (CHANGELOG.md); import from there.
Nothing in swan-jax imports this module (tests/test_layering.py).
"""

from swan_jax.graph.prepared import (
    GRAPH_FIELDS,
    LAYOUT_DTYPES,
    MAX_SLOT_WIDTH,
    OVERFLOW_ROW_COST,
    Closure,
    PreparedGraph,
    check_prepared,
    choose_slot_width,
    closure_slots,
    overflow_rows,
    plain_graph,
    prepare_graph,
    prepared_from_closure,
    validate_prepared,
)

__all__ = [
    "check_prepared",
    "choose_slot_width",
    "Closure",
    "closure_slots",
    "GRAPH_FIELDS",
    "LAYOUT_DTYPES",
    "MAX_SLOT_WIDTH",
    "OVERFLOW_ROW_COST",
    "overflow_rows",
    "plain_graph",
    "prepare_graph",
    "prepared_from_closure",
    "PreparedGraph",
    "validate_prepared",
]
