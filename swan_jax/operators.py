"""Deprecated alias of `swan_jax.graph.segment` (edge operators) and
`swan_jax.graph.slots` (slot operators), kept for one release.

`swan_jax.operators` moved into the `swan_jax.graph` package (CHANGELOG.md); import from there.
Nothing in swan-jax imports this module (tests/test_layering.py).
"""

from swan_jax.graph.protocol import (
    safe_inverse,
)
from swan_jax.graph.segment import (
    EdgeOperators,
    aggregate,
    aggregate_transpose,
    antisymmetric_aggregate,
    dense_operator,
    edge_operators,
    in_degree,
    symmetric_aggregate,
)
from swan_jax.graph.slots import (
    SlotOperators,
    slot_operators,
)

__all__ = [
    "safe_inverse",
    "aggregate",
    "aggregate_transpose",
    "antisymmetric_aggregate",
    "dense_operator",
    "edge_operators",
    "EdgeOperators",
    "in_degree",
    "symmetric_aggregate",
    "slot_operators",
    "SlotOperators",
]
