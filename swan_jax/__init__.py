"""swan-jax: SWAN (Space-Weight ANtisymmetric GNN, Gravina et al., AAAI 2025) in JAX.

The core is pure: `vector_field(params, graph, x, cfg)` and `solve(...)` over
explicit parameter pytrees; Flax modules in `swan_jax.models` only wrap it. Graphs
(builders, the prepared layout, kernels, checks) live in `swan_jax.graph`.
Conventions: docs/conventions.md; layers and imports: docs/architecture.md.
"""

from swan_jax import analysis, graph
from swan_jax.compiles import CompileCounter
from swan_jax.config import (
    ACTIVATIONS,
    ADJACENCIES,
    ADJACENCY_CODES,
    VARIANTS,
    SWANConfig,
)
from swan_jax.field import (
    build_operators,
    field_with_operators,
    init_params,
    learned_edge_weights,
    required_keys,
    vector_field,
)
from swan_jax.graph import (
    EdgeOperators,
    PreparedGraph,
    SlotOperators,
    aggregate,
    antisymmetric_aggregate,
    check_prepared,
    checked,
    dense_operator,
    edge_operators,
    gather,
    in_degree,
    plain_graph,
    prepare_graph,
    slot_operators,
    symmetric_aggregate,
    traced_checks,
    validate_graph,
    validate_node_features,
)
from swan_jax.graph import builders as graphs  # `sj.graphs`: the name before swan_jax.graph
from swan_jax.models import (
    BASELINE_LAYERS,
    MLP,
    GraphCONBlock,
    GraphReadout,
    LinearEncoder,
    Model,
    MPNNStack,
    NodeReadout,
    SWANBlock,
    pool_nodes,
)
from swan_jax.pytrees import tree_size
from swan_jax.settings import traced_value
from swan_jax.solvers import (
    ADAPTIVE_SOLVERS,
    ADJOINTS,
    FIXED_STEP_SOLVERS,
    SOLVERS,
    IntegratorConfig,
    SolverError,
    clear_errors,
    solve,
)

__version__ = "0.1.0"  # the package's one version: pyproject.toml reads it from here

__all__ = [
    "analysis", "ACTIVATIONS", "ADAPTIVE_SOLVERS", "ADJACENCIES", "ADJACENCY_CODES", "ADJOINTS",
    "BASELINE_LAYERS",
    "CompileCounter", "EdgeOperators", "FIXED_STEP_SOLVERS", "GraphCONBlock", "GraphReadout",
    "IntegratorConfig",
    "LinearEncoder",
    "MLP", "MPNNStack", "graph", "graphs",
    "Model", "NodeReadout", "SOLVERS", "SWANBlock", "SWANConfig", "VARIANTS", "aggregate",
    "antisymmetric_aggregate", "build_operators", "dense_operator", "edge_operators",
    "field_with_operators", "in_degree", "init_params", "learned_edge_weights", "pool_nodes",
    "required_keys", "solve", "symmetric_aggregate", "tree_size", "validate_graph",
    "traced_value", "validate_node_features", "vector_field",
    # gather-only path (issue 12) and run-time checks
    "PreparedGraph", "SlotOperators", "SolverError", "check_prepared", "checked",
    "clear_errors", "gather", "plain_graph", "prepare_graph", "slot_operators",
    "traced_checks",
]
