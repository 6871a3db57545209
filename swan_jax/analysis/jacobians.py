"""The graph-wise Jacobian of the SWAN field, `J = M1 M2` (paper eq. J_SWAN, graphwiseM2).

Rows and columns follow the column stacking of docs/conventions.md "Jacobian facts",
`vec(X) = X.T.reshape(-1)`: entry `c * N + v` is channel c of node v, so the Kronecker
factors read as in the paper (Sec. "SWAN is globally non-dissipative", Appendix H).
The matrices are dense `[N d, N d]`: for graphs of up to a few hundred nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import jax
import jax.numpy as jnp
import jraph

from swan_jax.config import SWANConfig
from swan_jax.field import (
    ACTIVATION_FNS,
    Params,
    antisymmetric_weight,
    build_operators,
    check_inputs,
    field_with_operators,
    step_params,
    symmetric_weight,
)
from swan_jax.graph import EdgeOperators, dense_operator, plain_graph

Array = jax.Array
# A map of node states `[N, d] -> [N, d]` (one layer, or the field at a fixed time).
StateMap = Callable[[Array], Array]


def vec(x: Array) -> Array:
    """Column stacking of docs/conventions.md: `vec(X) = X.T.reshape(-1)`, `[N, d] -> [N d]`.

    Entry `c * N + v` is channel c of node v.
    """
    return x.T.reshape(-1)


def unvec(v: Array, num_nodes: int, width: int) -> Array:
    """Inverse of `vec`: `[N d] -> [N, d]`."""
    return v.reshape(width, num_nodes).T


def map_jacobian(fn: StateMap, x: Array) -> Array:
    """Jacobian of a map `[N, d] -> [N, d]` at `x`, in `vec` order: `[N d, N d]` (jacfwd)."""
    num_nodes, width = x.shape
    jacobian: Array = jax.jacfwd(lambda v: vec(fn(unvec(v, num_nodes, width))))(vec(x))
    return jacobian


def graph_jacobian(
    params: Params,
    graph: jraph.GraphsTuple,
    x: Array,
    cfg: SWANConfig,
    x0: Array | None = None,
    *,
    t: Array | float = 0.0,
) -> Array:
    """Graph-wise Jacobian `d vec(f(X)) / d vec(X)` of the SWAN field at state `x`.

    Args:
      params, graph, cfg: as in `swan_jax.vector_field`.
      x: `[N, d]` state at which to differentiate.
      x0: `[N, d]` encoded input the `-learn` operators are computed from (defaults to
        `x`). The operators are held fixed, as in the model, where they are computed
        once from `x(0)` and shared by all steps.
      t: time; selects the step's weights when weights are layer-dependent.

    Returns:
      `[N d, N d]`, rows and columns in `vec` (column-stacking) order; equals `M1 @ M2`
      of `jacobian_factors`.
    """
    check_inputs(params, graph, x, cfg, x0)
    ops = build_operators(params, graph, x if x0 is None else x0, cfg)
    return map_jacobian(lambda state: field_with_operators(params, graph, state, ops, cfg, t), x)


def jacobian_factors(
    params: Params,
    graph: jraph.GraphsTuple,
    x: Array,
    cfg: SWANConfig,
    x0: Array | None = None,
    *,
    t: Array | float = 0.0,
) -> tuple[Array, Array]:
    """`(M1, M2)` with `J = M1 M2` (docs/conventions.md "Jacobian facts", paper eq. J_SWAN).

    `M1 = diag(vec(sigma'(pre)))` with `pre` the field's pre-activation at `x`;

        M2 = (W - W^T - gamma I)^T (x) I
             + V'^T (x) (A_hat + A_hat^T)                   [V^T (x) A_hat for -ne, adgn]
             + beta Z'^T (x) (A_tilde - A_tilde^T)          [absent for swan-beta0, adgn]

    with the field's `V' = triu(V, 1) - triu(V, 1)^T`, `Z' = triu(Z) + triu(Z)^T`
    (`swan_jax.field.antisymmetric_weight`, `symmetric_weight`), built from the dense
    operators (`A_hat_F`, `A_tilde_F` from `x0` for `-learn`).
    `sigma'` is the derivative JAX takes of the configured activation.

    Returns:
      `M1` `[N d, N d]` (diagonal) and `M2` `[N d, N d]`, in `vec` order.
    """
    check_inputs(params, graph, x, cfg, x0)
    graph = plain_graph(graph)  # dense matrices from edge lists; same numbers as the slots
    num_nodes, width = x.shape
    # a GraphsTuple's operators: edge weights
    ops = cast(EdgeOperators, build_operators(params, graph, x if x0 is None else x0, cfg))
    a_hat = dense_operator(graph, ops.w_hat, num_nodes)
    a_tilde = dense_operator(graph, ops.w_tilde, num_nodes)
    p = step_params(params, t, cfg)
    eye_nodes = jnp.eye(num_nodes, dtype=x.dtype)
    eye_width = jnp.eye(width, dtype=x.dtype)
    weight_mix = p["W"] - p["W"].T - cfg.gamma * eye_width
    m2 = jnp.kron(weight_mix.T, eye_nodes)
    if cfg.plain_phi:
        m2 = m2 + jnp.kron(p["V"].T, a_hat)
    else:
        m2 = m2 + jnp.kron(antisymmetric_weight(p["V"]).T, a_hat + a_hat.T)
    if cfg.has_psi:
        m2 = m2 + cfg.beta * jnp.kron(symmetric_weight(p["Z"]).T, a_tilde - a_tilde.T)
    pre = field_with_operators(params, graph, x, ops, cfg.replace(activation="identity"), t)
    # The activation acts elementwise, so a JVP with tangent 1 gives sigma' everywhere.
    activation = ACTIVATION_FNS[cfg.activation]
    slope = jax.jvp(activation, (pre,), (jnp.ones_like(pre),))[1]
    return jnp.diag(vec(slope)), m2
