"""Deprecated alias of `swan_jax.graph.validation` and `swan_jax.graph.layouts`
(`validate_graph`, `traced_checks`), kept for one release.

`swan_jax.validation` moved into the `swan_jax.graph` package (CHANGELOG.md); import from there.
Nothing in swan-jax imports this module (tests/test_layering.py).
"""

from swan_jax.graph.layouts import (
    traced_checks,
    validate_graph,
)
from swan_jax.graph.validation import (
    checked,
    is_traced,
    validate_node_features,
)

__all__ = [
    "traced_checks",
    "validate_graph",
    "checked",
    "is_traced",
    "validate_node_features",
]
