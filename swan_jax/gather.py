"""Deprecated alias of `swan_jax.graph.gather`, kept for one release.

`swan_jax.gather` moved into the `swan_jax.graph` package (CHANGELOG.md); import from there.
Nothing in swan-jax imports this module (tests/test_layering.py).
"""

from swan_jax.graph.gather import (
    UNROLL_SLOTS,
    aggregate,
    custom_linear,
    densify,
    gather_neighbors,
    gather_pair_ends,
    layout_only,
    materialize,
    mirror_slots,
    node_max,
    node_sum,
    pairs_to_slots,
    row_owner,
)

__all__ = [
    "aggregate",
    "custom_linear",
    "densify",
    "gather_neighbors",
    "gather_pair_ends",
    "layout_only",
    "materialize",
    "mirror_slots",
    "node_max",
    "node_sum",
    "pairs_to_slots",
    "row_owner",
    "UNROLL_SLOTS",
]
