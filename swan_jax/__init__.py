"""swan-jax: SWAN (Space-Weight ANtisymmetric GNN, Gravina et al., AAAI 2025) in JAX.

The core is pure: `vector_field(params, graph, x, cfg)` and `solve(...)` over
explicit parameter pytrees; Flax modules in `swan_jax.models` only wrap it.

The root holds the user's API: configuration, the field and `solve`, the graph a model
reads, blocks and models with their encoders and readouts, the baselines, the errors,
and the packages `analysis` and `graph`. Everything else stays in its module, as
diffrax keeps its internals: graph builders, kernels and checks in `swan_jax.graph`
(`graph.builders`, `graph.gather`, `graph.checked`, `graph.dense_operator`, ...), the
field's parts in `swan_jax.field` (`build_operators`, `field_with_operators`), solver
lists and `clear_errors` in `swan_jax.solvers`, `traced_value` in `swan_jax.settings`,
`CompileCounter` in `swan_jax.compiles`, `tree_size` in `swan_jax.pytrees`.
Conventions: docs/conventions.md; layers and imports: docs/architecture.md.
"""

from swan_jax import analysis, config, field, graph, models, settings, solvers
from swan_jax.config import ACTIVATIONS, ADJACENCIES, VARIANTS, SWANConfig
from swan_jax.field import init_params, learned_edge_weights, vector_field
from swan_jax.graph import PreparedGraph, prepare_graph, validate_graph
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
from swan_jax.settings import SettingError
from swan_jax.solvers import ADJOINTS, SOLVERS, IntegratorConfig, SolverError, solve

__version__ = "0.2.0"  # the package's one version: pyproject.toml reads it from here

# Every public name of the root, and nothing else (tests/test_public_api.py): the
# modules `import swan_jax` loads are named too, as `dir(swan_jax)` shows them.
__all__ = [
    # packages and the core's modules
    "analysis", "config", "field", "graph", "models", "settings", "solvers",
    # configuration
    "ACTIVATIONS", "ADJACENCIES", "ADJOINTS", "IntegratorConfig", "SOLVERS", "SWANConfig",
    "VARIANTS",
    # the field and its integration
    "init_params", "learned_edge_weights", "solve", "vector_field",
    # the graph a model reads
    "PreparedGraph", "prepare_graph", "validate_graph",
    # blocks and models, encoders and readouts, baselines
    "BASELINE_LAYERS", "GraphCONBlock", "GraphReadout", "LinearEncoder", "MLP", "MPNNStack",
    "Model", "NodeReadout", "SWANBlock", "pool_nodes",
    # errors
    "SettingError", "SolverError",
]
