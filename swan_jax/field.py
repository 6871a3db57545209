"""The SWAN vector field (docs/conventions.md "The vector field"; paper eq. new_adgn_graphwise).

Row-vector convention, `X` is `[N, d]`:

    dX/dt = sigma( X (W - W^T - gamma I) + Phi + beta Psi + b )
    Phi   = (A_hat + A_hat^T) X V'                 (A_hat X V for -ne and adgn)
    Psi   = (A_tilde - A_tilde^T) X Z'             (absent for swan-beta0 and adgn)
    V'    = triu(V, 1) - triu(V, 1)^T              (`antisymmetric_weight`)
    Z'    = triu(Z) + triu(Z)^T                    (`symmetric_weight`)

The paper writes `V - V^T` and `Z + Z^T`; `V'`, `Z'` are the same antisymmetric and
symmetric matrices formed as the authors' released code forms them, from the upper
triangle of the raw `V`, `Z` only (its lower part is never read).

Everything here is a pure function of explicit parameter pytrees, so it composes
with `jit`, `grad` and `vmap` (many seeds at once).

The field reads the graph through one protocol (`swan_jax.graph.as_operator`, the
operations of `swan_jax.graph.GraphOps`), whichever layout it holds. On a
`jraph.GraphsTuple` the operators are edge weights and the aggregations segment sums
(the reference). On a `PreparedGraph` (`swan_jax.prepare_graph`) they are slot values
and the aggregations gathers (`swan_jax.graph.gather`): one fused `[N, d] x [d, 3d]`
product per step, `X [W - W^T - gamma I | V' | beta Z']`, then
`Phi + beta Psi` as one pass over the slots, and a backward pass that is again that
gather (`S^T = S`, `T^T = -T`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

from swan_jax.config import SWANConfig
from swan_jax.graph import (
    EdgeOperators,
    Graph,
    SlotOperators,
    Term,
    as_operator,
    is_traced,
    validate_node_features,
)

if TYPE_CHECKING:  # shapes for the type checker and the reader; nothing at run time
    from jaxtyping import Float

Array = jax.Array
Params = Mapping[str, Array]

ACTIVATION_FNS: dict[str, Callable[[Array], Array]] = {
    "tanh": jnp.tanh,
    "relu": jax.nn.relu,
    "sigmoid": jax.nn.sigmoid,
    "gelu": jax.nn.gelu,
    "identity": lambda v: v,
}

# Keys of the edge MLP of the -learn variants: F = mean_c ReLU(K2 sigma(K1 [x_u ++ x_v])).
EDGE_MLP_KEYS: tuple[str, ...] = ("K1", "k1", "K2", "k2")
STEP_KEYS: tuple[str, ...] = ("W", "V", "Z", "b")


def required_keys(cfg: SWANConfig) -> tuple[str, ...]:
    """Parameter keys the variant reads."""
    keys = ["W", "V", "b"]
    if cfg.has_psi:
        keys.append("Z")
    if cfg.learned_operators:
        keys.extend(EDGE_MLP_KEYS)
    return tuple(keys)


def init_params(key: Array, hidden: int, cfg: SWANConfig,
                dtype: DTypeLike = jnp.float32) -> dict[str, Array]:
    """Raw parameters for a block of width `hidden`, initialised as the authors' code.

    `W, V, Z` `[d, d]` (or `[L, d, d]` without weight sharing) and the bias `b` `[d]`
    (`[L, d]`) are U(-1/sqrt(d), 1/sqrt(d)): `kaiming_uniform_(a=sqrt(5))` and
    `uniform_(bias, -1/sqrt(fan_in), ...)`, fan_in = d, in `SWANConv.reset_parameters`
    and `AntiSymmetricConv.reset_parameters` (gravins/SWAN
    `graph_transfer/models/{swan_model,adgn_model}.py`,
    `graph_property_prediction/models/swan.py`). The edge MLP of the `-learn` variants,
    `K1 [2d, d]`, `k1 [d]`, `K2 [d, d]`, `k2 [d]`, is their two `torch.nn.Linear`
    (`edge_emb2`, `edge_emb3`): weight and bias U(+-1/sqrt(fan_in)), fan_in 2d and d.

    Raises:
      ValueError: `hidden` is not an integer >= 1, or `cfg` is not a `SWANConfig`.
    """
    if not isinstance(cfg, SWANConfig):
        raise ValueError(f"cfg must be a SWANConfig, got {type(cfg).__name__}")
    if isinstance(hidden, bool) or not isinstance(hidden, int | np.integer) or hidden < 1:
        raise ValueError(f"hidden (the width d) must be an integer >= 1, got {hidden!r}")
    lead = () if cfg.weight_sharing else (cfg.num_layers,)
    keys = jax.random.split(key, 6)  # W, V, Z, K1, k1, K2 draw what they drew with b = 0

    def uniform(k: Array, shape: tuple[int, ...], fan_in: int) -> Array:
        b = 1.0 / jnp.sqrt(fan_in)
        return jax.random.uniform(k, shape, dtype, -b, b)

    square = lead + (hidden, hidden)
    params = {"W": uniform(keys[0], square, hidden), "V": uniform(keys[1], square, hidden),
              "b": uniform(jax.random.fold_in(key, 6), lead + (hidden,), hidden)}
    if cfg.has_psi:
        params["Z"] = uniform(keys[2], square, hidden)
    if cfg.learned_operators:
        params["K1"] = uniform(keys[3], (2 * hidden, hidden), 2 * hidden)
        params["k1"] = uniform(keys[4], (hidden,), 2 * hidden)
        params["K2"] = uniform(keys[5], (hidden, hidden), hidden)
        params["k2"] = uniform(jax.random.fold_in(key, 7), (hidden,), hidden)
    return params


def learned_edge_weights(params: Params, graph: Graph, x0: Float[Array, "N d"],
                         cfg: SWANConfig) -> Float[Array, " pairs"]:
    """`F` on the existing edges (Appendix A.2, eqs. edgeFeat, embedEdges).

    For edge `v -> u` (sender v, receiver u):
    `F[u, v] = mean_c ReLU(K2 sigma(K1 [x_u(0) ++ x_v(0)]))`. `[E]` on a GraphsTuple;
    on a `PreparedGraph`, `[P]` on its listed pairs `(u <- v)` (parallel edges share
    one value), with `K1 [x_u ++ x_v] = x_u K1[:d] + x_v K1[d:]` from one `[N, d] x [d, 2d]`
    product gathered to the pairs.
    """
    sigma = ACTIVATION_FNS[cfg.edge_activation]
    hidden = sigma(as_operator(graph).pair_linear(x0, params["K1"]) + params["k1"])
    return jnp.mean(jax.nn.relu(hidden @ params["K2"] + params["k2"]), axis=-1)


def build_operators(
    params: Params, graph: Graph, x0: Float[Array, "N d"], cfg: SWANConfig
) -> EdgeOperators | SlotOperators:
    """`A_hat`, `A_tilde` (or `A_hat_F`, `A_tilde_F` from `x0`), built once per solve:
    edge weights on a GraphsTuple, slot values on a `PreparedGraph`."""
    weights = learned_edge_weights(params, graph, x0, cfg) if cfg.learned_operators else None
    ops: EdgeOperators | SlotOperators = as_operator(graph).operators(
        cfg.adjacency_code, weights, num_nodes=x0.shape[0], dtype=x0.dtype)
    return ops


def layer_index(t: Array | float, cfg: SWANConfig) -> Array:
    """Index of the step whose weights act at time t: `floor(t / epsilon)`, clipped.

    A relative slack of 1e-5 keeps `t = l * epsilon` computed in floating point on layer l.
    """
    index = jnp.floor(t / cfg.epsilon + 1e-5).astype(jnp.int32)
    return jnp.clip(index, 0, cfg.num_layers - 1)


def step_params(params: Params, t: Array | float, cfg: SWANConfig) -> Params:
    """The `W, V, Z, b` acting at time t (all of them under weight sharing)."""
    if cfg.weight_sharing:
        return params
    index = layer_index(t, cfg)
    return {k: (v[index] if k in STEP_KEYS else v) for k, v in params.items()}


# The authors form Phi's and Psi's weights with `torch.nn.utils.parametrize`
# (gravins/SWAN `graph_transfer/models/ausiliar_modules.py`, `AntiSymmetric`, `Symmetric`):
# `right_inverse` keeps `triu(V, 1)` / `triu(Z)`, so the lower entries are zero and never
# get a gradient. Forming `V - V^T` from a full `V` instead draws `V'` with sqrt(2) times
# their spread at init, and Adam moves every `V'_ij` about twice as far per step (both
# `V_ij` and `V_ji` take a step); the same for `Z'` off the diagonal.


def antisymmetric_weight(v: Float[Array, "*L d d"]) -> Float[Array, "*L d d"]:
    """Phi's weight `V' = triu(V, 1) - triu(V, 1)^T` (the authors' `AntiSymmetric`).

    On the last two axes, so `[d, d]` and `[L, d, d]` alike; exactly antisymmetric.
    """
    upper = jnp.triu(v, 1)
    return upper - jnp.matrix_transpose(upper)


def symmetric_weight(z: Float[Array, "*L d d"]) -> Float[Array, "*L d d"]:
    """Psi's weight `Z' = triu(Z) + triu(Z)^T` (the authors' `Symmetric`; its diagonal is
    `2 Z_ii`). On the last two axes; exactly symmetric."""
    upper = jnp.triu(z)
    return upper + jnp.matrix_transpose(upper)


def field_with_operators(
    params: Params,
    graph: Graph,
    x: Float[Array, "N d"],
    ops: EdgeOperators | SlotOperators,
    cfg: SWANConfig,
    t: Array | float = 0.0,
) -> Float[Array, "N d"]:
    """The vector field with precomputed operators (`build_operators`): `[N, d] -> [N, d]`.

    `pre = X (W - W^T - gamma I) + b + Phi + beta Psi`, one `GraphOps.mix` of the graph:
    `Phi = (A_hat + A_hat^T) X V'` (`A_hat X V` for -ne and adgn) and
    `Psi = (A_tilde - A_tilde^T) X Z'`, with `V' = antisymmetric_weight(V)` and
    `Z' = symmetric_weight(Z)`.
    """
    p = step_params(params, t, cfg)
    d = x.shape[-1]
    W, V = p["W"], p["V"]
    self_matrix = W - W.T - cfg.gamma * jnp.eye(d, dtype=x.dtype)
    terms = [Term("hat", V) if cfg.plain_phi else Term("phi", antisymmetric_weight(V))]
    if cfg.has_psi:
        terms.append(Term("psi", symmetric_weight(p["Z"]), cfg.beta))
    pre = as_operator(graph).mix(ops, x, self_matrix, p["b"], tuple(terms))
    return ACTIVATION_FNS[cfg.activation](pre)


def expected_param_shapes(cfg: SWANConfig, hidden: int) -> dict[str, tuple[int, ...]]:
    """Shape of every parameter the variant reads, for width `hidden` (see `init_params`)."""
    lead = () if cfg.weight_sharing else (cfg.num_layers,)
    shapes = {"W": lead + (hidden, hidden), "V": lead + (hidden, hidden), "b": lead + (hidden,)}
    if cfg.has_psi:
        shapes["Z"] = lead + (hidden, hidden)
    if cfg.learned_operators:
        shapes.update(K1=(2 * hidden, hidden), k1=(hidden,), K2=(hidden, hidden), k2=(hidden,))
    return shapes


def check_inputs(
    params: Params,
    graph: Graph,
    x: Float[Array, "N d"],
    cfg: SWANConfig,
    x0: Float[Array, "N d"] | None = None,
) -> None:
    """Host-side checks of config, parameters, graph and state (skipped under tracing).

    Shapes are checked even under tracing (they are static); values only outside it.
    `x0`, the encoded input of the `-learn` operators, must match `x` in shape.
    """
    if not isinstance(cfg, SWANConfig):
        raise ValueError(f"cfg must be a SWANConfig, got {type(cfg).__name__}")
    missing = [k for k in required_keys(cfg) if k not in params]
    if missing:
        raise ValueError(f"params for variant {cfg.variant!r} lack keys {missing}")
    layout = as_operator(graph)  # ValueError unless a graph of either layout
    layout.validate()
    w_shape = tuple(jnp.shape(params["W"]))
    expected = "[d, d]" if cfg.weight_sharing else f"[{cfg.num_layers}, d, d]"
    if len(w_shape) != (2 if cfg.weight_sharing else 3) or w_shape[-1] != w_shape[-2]:
        raise ValueError(f"params['W'] has shape {w_shape}; expected {expected}")
    if not cfg.weight_sharing and w_shape[0] != cfg.num_layers:
        raise ValueError(f"params['W'] has shape {w_shape}; expected {expected}")
    width = w_shape[-1]
    for key, shape in expected_param_shapes(cfg, width).items():
        got = tuple(jnp.shape(params[key]))
        if got != shape:
            raise ValueError(f"params[{key!r}] has shape {got}; expected {shape} for "
                             f"width d = {width} (from params['W'])")
    if x0 is not None and tuple(jnp.shape(x0)) != tuple(jnp.shape(x)):
        raise ValueError(f"x0 has shape {tuple(jnp.shape(x0))} but x has shape "
                         f"{tuple(jnp.shape(x))}; they must match")
    layout.check_states(x)
    if is_traced(graph.n_node):
        return
    num_nodes = int(np.sum(np.asarray(graph.n_node)))
    validate_node_features(x, num_nodes, width=width)
    if x0 is not None:
        validate_node_features(x0, num_nodes, width=width, name="x0")


def vector_field(
    params: Params,
    graph: Graph,
    x: Float[Array, "N d"],
    cfg: SWANConfig,
    *,
    t: Array | float = 0.0,
    x0: Float[Array, "N d"] | None = None,
) -> Float[Array, "N d"]:
    """`dX/dt` of SWAN at state `x` (docs/conventions.md, eq. graph-wise SWAN).

    Args:
      params: raw `W, V, Z` `[d, d]` and `b` `[d]` (leading `[L]` axis without weight
        sharing), plus `K1, k1, K2, k2` for the `-learn` variants.
      graph: a `jraph.GraphsTuple` (only `senders`, `receivers`, `n_node` are read;
        segment sums), or its `prepare_graph` form (gathers only; the same field).
      x: `[N, d]` node states.
      cfg: the `SWANConfig`.
      t: time, selects the step's weights when weights are layer-dependent.
      x0: encoded input that the `-learn` operators are computed from; defaults to `x`.

    Returns:
      `[N, d]` time derivative.
    """
    check_inputs(params, graph, x, cfg, x0)
    x0 = x if x0 is None else x0
    ops = build_operators(params, graph, x0, cfg)
    return field_with_operators(params, graph, x, ops, cfg, t)

