"""Jacobian, eigenvalue and information-flow analysis of SWAN and its baselines.

What the paper claims, made measurable (docs/conventions.md "Jacobian facts"), one topic
per module; every name is also importable from `swan_jax.analysis` itself:

* `jacobians`: `graph_jacobian`, `jacobian_factors`: the graph-wise Jacobian `J = M1 M2`
  of the field (paper Sec. "SWAN is globally non-dissipative", Appendix H), in the
  column-stacking order `vec(X) = X.T.reshape(-1)` (`vec`, `unvec`, `map_jacobian`).
* `spectra`: `spectrum`, `dissipativity_summary`: `Re(lambda(M2)) = -gamma` for swan /
  swan-learn, so the dynamics are non-dissipative up to the stabilising shift gamma
  (Appendix A.1).
* `information_flow`: `sensitivity`, `||d x_v(l) / d x_u(0)||` for every node v and
  layer l (Sec. "The Benefit of Spatial Antisymmetry", Theorems 3.1 - 3.3), by
  forward-mode products only, so it scales to graphs whose full Jacobian would not fit;
  `hop_distances` for its x-axis.
* `trajectories`: model runs `x(0) -> [L + 1, N, d]` for SWAN and message-passing baselines.
* `diffusion`: `heat_trajectory`, `heat_jacobian`: the diffusion baseline `dX/dt = -L X`
  (Theorem 3.2, Appendix B).
* `drift`: `jacobian_drift`: `||J(l) - J(l-1)|| / ||J(l-1)||` over layers (Appendix I), for
  SWAN's field and for the layer maps of a message-passing baseline such as GCN.
* `trained`: parameters pulled out of a trained Flax variable dict (`swan_field_params`,
  `encoded_input`) or a checkpoint (`load_checkpoint_params`).

Everything takes explicit parameters: freshly initialised, or from a trained model.
The dense routines build `[N d, N d]` matrices: meant for graphs of up to a few hundred
nodes. `sensitivity` only ever holds `d` tangents of the trajectory (or one, with
`vectorize=False`): a 20,000-node ring with d = 16 takes seconds on a CPU.

The small graph builders the notebooks use (`line_graph`, `ring_graph`,
`undirected_graph`, `to_networkx`) live in `swan_jax.graph.builders` and are re-exported here.
"""

from swan_jax.analysis.diffusion import (
    LAPLACIANS,
    dense_laplacian,
    heat_jacobian,
    heat_trajectory,
    laplacian_apply,
)
from swan_jax.analysis.drift import jacobian_drift, layer_map_jacobians, swan_layer_jacobians
from swan_jax.analysis.information_flow import (
    hop_distances,
    sensitivity,
    source_basis,
    trajectory_sensitivity,
)
from swan_jax.analysis.jacobians import (
    StateMap,
    graph_jacobian,
    jacobian_factors,
    map_jacobian,
    unvec,
    vec,
)
from swan_jax.analysis.spectra import (
    DissipativitySummary,
    dissipativity_summary,
    model_dissipativity_summary,
    spectrum,
    summarize_spectrum,
)
from swan_jax.analysis.trained import encoded_input, load_checkpoint_params, swan_field_params
from swan_jax.analysis.trajectories import (
    TrajectoryFn,
    mpnn_layer_maps,
    swan_trajectory_fn,
    trajectory_from_steps,
)
from swan_jax.graph.builders import line_graph, ring_graph, to_networkx, undirected_graph

__all__ = [
    "dense_laplacian", "dissipativity_summary", "DissipativitySummary", "encoded_input",
    "graph_jacobian", "heat_jacobian", "heat_trajectory", "hop_distances", "jacobian_drift",
    "jacobian_factors", "laplacian_apply", "LAPLACIANS", "layer_map_jacobians", "line_graph",
    "load_checkpoint_params", "map_jacobian", "model_dissipativity_summary", "mpnn_layer_maps",
    "ring_graph", "sensitivity", "source_basis", "spectrum", "StateMap", "summarize_spectrum",
    "swan_field_params", "swan_layer_jacobians", "swan_trajectory_fn", "to_networkx",
    "TrajectoryFn", "trajectory_from_steps", "trajectory_sensitivity", "undirected_graph",
    "unvec", "vec",
]
