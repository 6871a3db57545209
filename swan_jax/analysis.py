"""Jacobian, eigenvalue and information-flow analysis of SWAN and its baselines.

What the paper claims, made measurable (SPEC.md "Jacobian facts"):

* `graph_jacobian`, `jacobian_factors`: the graph-wise Jacobian `J = M1 M2` of the field
  (paper Sec. "SWAN is globally non-dissipative", Appendix H), in SPEC's column-stacking
  order `vec(X) = X.T.reshape(-1)`.
* `spectrum`, `dissipativity_summary`: `Re(lambda(M2)) = -gamma` for swan / swan-learn, so
  the dynamics are non-dissipative up to the stabilising shift gamma (Appendix A.1).
* `sensitivity`: `||d x_v(l) / d x_u(0)||` for every node v and layer l (Sec. "The Benefit of
  Spatial Antisymmetry", Theorems 3.1 - 3.3), by forward-mode products only, so it scales
  to graphs whose full Jacobian would not fit.
* `heat_trajectory`, `heat_jacobian`: the diffusion baseline `dX/dt = -L X` (Theorem 3.2,
  Appendix B).
* `jacobian_drift`: `||J(l) - J(l-1)|| / ||J(l-1)||` over layers (Appendix I), for SWAN's
  field and for the layer maps of a message-passing baseline such as GCN.

Everything takes explicit parameters: freshly initialised, or pulled out of a trained
Flax variable dict (`swan_field_params`, `encoded_input`, `load_checkpoint_params`).
The dense routines build `[N d, N d]` matrices: meant for graphs of up to a few hundred
nodes. `sensitivity` only ever holds `d` tangents of the trajectory (or one, with
`vectorize=False`): a 20,000-node ring with d = 16 takes seconds on a CPU.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import jraph
import numpy as np

from swan_jax.config import SWANConfig
from swan_jax.field import (
    ACTIVATION_FNS,
    Params,
    build_operators,
    check_inputs,
    field_with_operators,
    step_params,
)
from swan_jax.models import BASELINE_LAYERS, Model, MPNNStack
from swan_jax.operators import aggregate, dense_operator, edge_operators, in_degree
from swan_jax.solvers import solve

Array = jax.Array
# A map of node states `[N, d] -> [N, d]` (one layer, or the field at a fixed time).
StateMap = Callable[[Array], Array]
# A model run `x(0) [N, d] -> [L + 1, N, d]`, the states after every layer.
TrajectoryFn = Callable[[Array], Array]

LAPLACIANS: tuple[str, ...] = ("sym", "combinatorial")


# --- column stacking ---------------------------------------------------------------


def vec(x: Array) -> Array:
    """Column stacking of SPEC.md: `vec(X) = X.T.reshape(-1)`, `[N, d] -> [N d]`.

    Entry `c * N + v` is channel c of node v.
    """
    return x.T.reshape(-1)


def unvec(v: Array, num_nodes: int, width: int) -> Array:
    """Inverse of `vec`: `[N d] -> [N, d]`."""
    return v.reshape(width, num_nodes).T


def map_jacobian(fn: StateMap, x: Array) -> Array:
    """Jacobian of a map `[N, d] -> [N, d]` at `x`, in `vec` order: `[N d, N d]` (jacfwd)."""
    num_nodes, width = x.shape
    return jax.jacfwd(lambda v: vec(fn(unvec(v, num_nodes, width))))(vec(x))


# --- the SWAN Jacobian (paper eq. J_SWAN, graphwiseM2; Appendix H) ------------------


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
    """`(M1, M2)` with `J = M1 M2` (SPEC.md "Jacobian facts", paper eq. J_SWAN).

    `M1 = diag(vec(sigma'(pre)))` with `pre` the field's pre-activation at `x`;

        M2 = (W - W^T - gamma I)^T (x) I
             + (V - V^T)^T (x) (A_hat + A_hat^T)            [V^T (x) A_hat for -ne, adgn]
             + beta (Z + Z^T)^T (x) (A_tilde - A_tilde^T)   [absent for swan-beta0, adgn]

    built from the dense operators (`A_hat_F`, `A_tilde_F` from `x0` for `-learn`).
    `sigma'` is the derivative JAX takes of the configured activation.

    Returns:
      `M1` `[N d, N d]` (diagonal) and `M2` `[N d, N d]`, in `vec` order.
    """
    check_inputs(params, graph, x, cfg, x0)
    num_nodes, width = x.shape
    ops = build_operators(params, graph, x if x0 is None else x0, cfg)
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
        m2 = m2 + jnp.kron((p["V"] - p["V"].T).T, a_hat + a_hat.T)
    if cfg.has_psi:
        m2 = m2 + cfg.beta * jnp.kron((p["Z"] + p["Z"].T).T, a_tilde - a_tilde.T)
    pre = field_with_operators(params, graph, x, ops, cfg.replace(activation="identity"), t)
    # The activation acts elementwise, so a JVP with tangent 1 gives sigma' everywhere.
    activation = ACTIVATION_FNS[cfg.activation]
    slope = jax.jvp(activation, (pre,), (jnp.ones_like(pre),))[1]
    return jnp.diag(vec(slope)), m2


# --- spectra and the dissipativity verdict -----------------------------------------


def spectrum(matrix: Array | np.ndarray) -> np.ndarray:
    """Eigenvalues of a square matrix (NumPy, float64/complex128 on the host): `[n]`."""
    return np.linalg.eigvals(np.asarray(matrix, dtype=np.float64))


@dataclasses.dataclass(frozen=True)
class DissipativitySummary:
    """Where the spectrum of a linearised graph ODE lies (paper Sec. "Mathematical Background").

    Attributes:
      name: label of the model (e.g. the variant).
      gamma: the stabilising shift, as the matrices saw it (cast to their dtype).
      max_abs_real_shift: `max |Re(lambda(M2)) + gamma|`; round-off for swan, swan-learn.
      max_abs_real_shift_jacobian: `max |Re(lambda(J)) + gamma|` for `J = M1 M2`. Round-off
        only when gamma = 0 or `M1 = I`: otherwise `Re(lambda(J))` lies in
        `[-gamma max(M1), -gamma min(M1)]` (congruence with `M1^1/2 M2 M1^1/2`).
      real_range: `(min, max)` of `Re(lambda(M2))`.
      real_range_jacobian: `(min, max)` of `Re(lambda(J))`.
      jacobian_band_violation: how far `Re(lambda(J))` strays outside
        `[-gamma max(M1), -gamma min(M1)]` (round-off when M2 + gamma I is antisymmetric).
      tolerance: round-off level for the verdict, `100 eps max(1, ||M2||_F)`.
    """

    name: str
    gamma: float
    max_abs_real_shift: float
    max_abs_real_shift_jacobian: float
    real_range: tuple[float, float]
    real_range_jacobian: tuple[float, float]
    jacobian_band_violation: float
    tolerance: float

    @property
    def non_dissipative(self) -> bool:
        """All eigenvalues of M2 on `Re = -gamma` up to round-off."""
        return self.max_abs_real_shift <= self.tolerance

    @property
    def verdict(self) -> str:
        if self.non_dissipative:
            return "non-dissipative"
        low, high = self.real_range
        if high > self.tolerance:
            return f"unstable: max Re(lambda(M2)) = {high:+.2g}"
        return f"dissipative: Re(lambda(M2)) in [{low:.2g}, {high:.2g}]"

    def __str__(self) -> str:
        return (f"{self.name}: max |Re(lambda(M2)) + gamma| = {self.max_abs_real_shift:.1e} "
                f"({self.verdict})")


def summarize_spectrum(
    name: str,
    m2: Array | np.ndarray,
    gamma: float = 0.0,
    m1_diagonal: Array | np.ndarray | None = None,
    tolerance: float | None = None,
) -> DissipativitySummary:
    """`DissipativitySummary` of `J = diag(m1_diagonal) M2` (`M1 = I` when omitted).

    Any linear(ised) graph ODE fits: e.g. diffusion, `M2 = heat_jacobian(...)`, gamma 0.
    """
    m2_host = np.asarray(m2)
    dtype = m2_host.dtype if np.issubdtype(m2_host.dtype, np.floating) else np.float64
    gamma = float(np.asarray(gamma, dtype=dtype))  # the shift the matrix actually holds
    slope = (np.ones(m2_host.shape[0]) if m1_diagonal is None
             else np.asarray(m1_diagonal, np.float64))
    eig_m2 = spectrum(m2_host)
    eig_j = spectrum(slope[:, None] * np.asarray(m2_host, np.float64))
    if tolerance is None:
        scale = max(1.0, float(np.linalg.norm(np.asarray(m2_host, np.float64))))
        tolerance = 100.0 * float(np.finfo(dtype).eps) * scale
    band_low, band_high = -gamma * slope.max(), -gamma * slope.min()
    band_violation = np.maximum(np.maximum(band_low - eig_j.real, eig_j.real - band_high), 0.0)
    return DissipativitySummary(
        name=name,
        gamma=gamma,
        max_abs_real_shift=float(np.max(np.abs(eig_m2.real + gamma))),
        max_abs_real_shift_jacobian=float(np.max(np.abs(eig_j.real + gamma))),
        real_range=(float(eig_m2.real.min()), float(eig_m2.real.max())),
        real_range_jacobian=(float(eig_j.real.min()), float(eig_j.real.max())),
        jacobian_band_violation=float(band_violation.max()),
        tolerance=float(tolerance),
    )


def dissipativity_summary(
    params: Params,
    graph: jraph.GraphsTuple,
    x: Array,
    cfg: SWANConfig,
    x0: Array | None = None,
    *,
    t: Array | float = 0.0,
    name: str | None = None,
    tolerance: float | None = None,
) -> DissipativitySummary:
    """Is the SWAN block non-dissipative at state `x`? (SPEC.md "Jacobian facts").

    Prints as one line, e.g.
    `swan: max |Re(lambda(M2)) + gamma| = 3.1e-16 (non-dissipative)`.
    Round-off for swan and swan-learn (any precision: `M2 + gamma I` is exactly
    antisymmetric in floating point); not for swan-ne, swan-learn-ne, adgn.
    """
    m1, m2 = jacobian_factors(params, graph, x, cfg, x0, t=t)
    return summarize_spectrum(name or cfg.variant, m2, cfg.gamma, jnp.diagonal(m1), tolerance)


# --- trained models ----------------------------------------------------------------


def swan_field_params(variables: Mapping[str, Any]) -> dict[str, Array]:
    """The SWAN field's raw `W, V, Z, b, ...` inside a Flax variable dict.

    For `sj.Model(encoder, sj.SWANBlock(cfg), readout)` they sit at
    `variables["params"]["processor"]["field"]`; any other nesting is searched for a
    dict named "field" holding `W`, `V`, `b`.
    """
    tree = variables.get("params", variables)
    if "processor" in tree and "field" in tree["processor"]:
        return dict(tree["processor"]["field"])
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            field = node.get("field")
            if isinstance(field, Mapping) and {"W", "V", "b"} <= set(field):
                return dict(field)
            stack.extend(node.values())
    raise KeyError("no SWAN field parameters (a 'field' dict with W, V, b) in the variables")


def encoded_input(model: Model, variables: Mapping[str, Any], graph: jraph.GraphsTuple) -> Array:
    """`x(0) = encoder(graph)` of a `sj.Model`: the state the SWAN block starts from. `[N, d]`."""
    return model.apply(variables, graph, method=lambda module, g: module.encoder(g))


def model_dissipativity_summary(
    model: Model, variables: Mapping[str, Any], graph: jraph.GraphsTuple, **kwargs: Any
) -> DissipativitySummary:
    """`dissipativity_summary` of a `sj.Model` whose processor is a `sj.SWANBlock`, at `x(0)`.

    Keep `graph` small (one graph): the spectrum is dense in `N d`.
    """
    x0 = encoded_input(model, variables, graph)
    cfg = model.processor.cfg
    return dissipativity_summary(swan_field_params(variables), graph, x0, cfg, x0, **kwargs)


def load_checkpoint_params(
    directory: str | Path, run: int = 0, key: str = "best_params", epoch: int | None = None
) -> Any:
    """Flax variables of one run from a `swan_jax.checkpoint.CheckpointStore` directory.

    The store holds `{"params", "opt_state", "best_params"}` stacked over the runs of a
    vmapped training; this restores without a template and takes run `run` of `key`.
    """
    import orbax.checkpoint as ocp

    with ocp.CheckpointManager(Path(directory).absolute()) as manager:
        epoch = manager.latest_step() if epoch is None else epoch
        if epoch is None:
            raise FileNotFoundError(f"no checkpoint in {directory}")
        restored = manager.restore(epoch, args=ocp.args.Composite(state=ocp.args.StandardRestore()))
    return jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf[run]), restored["state"][key])


# --- message-passing baselines -----------------------------------------------------


def mpnn_layer_maps(
    stack: MPNNStack, stack_params: Mapping[str, Any], graph: jraph.GraphsTuple
) -> list[StateMap]:
    """The layer maps `x(l-1) -> x(l) = activation(layer_l(x(l-1)))` of an `sj.MPNNStack`.

    Args:
      stack: the module (its `kind`, `hidden`, `num_layers`, `activation`).
      stack_params: its parameters, e.g. `variables["params"]["processor"]` of a
        `sj.Model`, or `stack.init(...)["params"]`; layer i is `"<Layer>_<i>"`
        (e.g. `GCNLayer_0`).
    """
    layer_cls = BASELINE_LAYERS[stack.kind]
    maps = []
    for index in range(stack.num_layers):
        layer_vars = {"params": stack_params[f"{layer_cls.__name__}_{index}"]}

        def layer_map(x: Array, layer_vars=layer_vars) -> Array:
            return stack.activation(layer_cls(stack.hidden).apply(layer_vars, graph, x))

        maps.append(layer_map)
    return maps


def trajectory_from_steps(steps: Sequence[StateMap] | StateMap, num_layers: int | None = None
                          ) -> TrajectoryFn:
    """`x0 -> [x0, f_1(x0), f_2(f_1(x0)), ...]`, `[L + 1, N, d]`, from layer maps.

    `steps` is a list of per-layer maps, or one shared map applied `num_layers` times.
    """
    if callable(steps):
        if num_layers is None:
            raise ValueError("num_layers is needed when one shared step map is given")

        def shared(x0: Array) -> Array:
            def body(x, _):
                x_next = steps(x)
                return x_next, x_next

            _, states = jax.lax.scan(body, x0, None, length=num_layers)
            return jnp.concatenate([x0[None], states])

        return shared

    def stacked(x0: Array) -> Array:
        states = [x0]
        for step in steps:
            states.append(step(states[-1]))
        return jnp.stack(states)

    return stacked


# --- diffusion baseline (Theorem 3.2, Appendix B) ----------------------------------


def laplacian_apply(graph: jraph.GraphsTuple, x: Array, kind: str = "sym") -> Array:
    """`L X` without a dense matrix: `[N, d]`.

    `kind="sym"`: `L = I' - D^-1/2 A D^-1/2` (spectrum in [0, 2]; `I'` is the identity on
    nodes with an edge, so isolated nodes stay still, as in networkx). `kind="combinatorial"`:
    `L = D - A`. Degrees are in-degrees (SPEC.md "Graphs").
    """
    num_nodes = x.shape[0]
    ones = jnp.ones(graph.receivers.shape, x.dtype)
    deg = in_degree(graph, num_nodes, ones)
    if kind == "sym":
        ops = edge_operators(graph, num_nodes, "sym", dtype=x.dtype)
        return (deg > 0).astype(x.dtype)[:, None] * x - aggregate(graph, ops.w_hat, x)
    if kind == "combinatorial":
        return deg[:, None] * x - aggregate(graph, ones, x)
    raise ValueError(f"unknown Laplacian {kind!r}; valid ones: {', '.join(LAPLACIANS)}")


def dense_laplacian(graph: jraph.GraphsTuple, num_nodes: int, kind: str = "sym",
                    dtype=jnp.float32) -> Array:
    """The `[N, N]` Laplacian of `laplacian_apply`."""
    return jax.vmap(lambda e: laplacian_apply(graph, e[:, None], kind)[:, 0], out_axes=1)(
        jnp.eye(num_nodes, dtype=dtype))


def heat_trajectory(graph: jraph.GraphsTuple, x0: Array, epsilon: float, num_layers: int,
                    kind: str = "sym") -> Array:
    """Forward Euler on the heat equation `dX/dt = -L X`: `[L + 1, N, d]`.

    `X(l+1) = X(l) - epsilon L X(l)`, stable for `epsilon <= 2 / lambda_max(L)` (for the
    default normalised Laplacian, any `epsilon <= 1`).
    """
    return trajectory_from_steps(lambda x: x - epsilon * laplacian_apply(graph, x, kind),
                                 num_layers)(x0)


def heat_jacobian(graph: jraph.GraphsTuple, num_nodes: int, width: int, kind: str = "sym",
                  dtype=jnp.float32) -> Array:
    """Jacobian of `-L X` in `vec` order: `-(I_d (x) L)`, `[N d, N d]`; real, `<= 0` spectrum."""
    lap = dense_laplacian(graph, num_nodes, kind, dtype)
    return -jnp.kron(jnp.eye(width, dtype=dtype), lap)


# --- information flow (Theorems 3.1 - 3.3) -----------------------------------------


def source_basis(num_nodes: int, width: int, source: int, dtype=jnp.float32) -> Array:
    """The `d` tangents `e_u (x) e_c`, c = 0..d-1, of node u = `source`: `[d, N, d]`."""
    channels = jnp.arange(width)
    return jnp.zeros((width, num_nodes, width), dtype).at[channels, source, channels].set(1)


def _block_norms(trajectory_fn: TrajectoryFn, x0: Array, basis: Array,
                 vectorize: bool = True) -> Array:
    """Frobenius norms over the `d x d` blocks of the pushed-forward basis: `[L + 1, N]`."""

    def squared(tangent):  # [L + 1, N, d_out] -> [L + 1, N]
        return jnp.sum(jax.jvp(trajectory_fn, (x0,), (tangent,))[1] ** 2, axis=-1)

    if vectorize:  # all d JVPs at once
        total = jnp.sum(jax.vmap(squared)(basis), axis=0)
    else:  # one JVP after another: memory of a single trajectory tangent
        def accumulate(carry, tangent):
            return carry + squared(tangent), None

        start = jnp.zeros(jax.eval_shape(squared, basis[0]).shape, basis.dtype)
        total, _ = jax.lax.scan(accumulate, start, basis)
    return jnp.sqrt(total)


@functools.lru_cache(maxsize=32)
def _compiled_block_norms(trajectory_fn: TrajectoryFn, vectorize: bool
                          ) -> Callable[[Array, Array], Array]:
    # Cached per function object, so other sources / inputs reuse the compiled program.
    return jax.jit(functools.partial(_block_norms, trajectory_fn, vectorize=vectorize))


def trajectory_sensitivity(trajectory_fn: TrajectoryFn, x0: Array, source: int, *,
                           vectorize: bool = True) -> Array:
    """`||d x_v(l) / d x_u(0)||_F` of any model run, for u = `source`: `[L + 1, N]`.

    Forward mode: the `d` basis tangents of node u's input are pushed through
    `trajectory_fn` (one JVP each, vmapped), so memory is `d` trajectories, never the
    `[N d, N d]` Jacobian.

    Args:
      trajectory_fn: `x0 [N, d] -> [L + 1, N, d]` (`swan_trajectory_fn`, `heat_trajectory`,
        `trajectory_from_steps(mpnn_layer_maps(...))`, ...). Must support `jax.jvp`.
        Compiled once per function object: reuse the object for several sources.
      x0: `[N, d]` input state.
      source: index u of the perturbed node.
      vectorize: push the `d` tangents together (fast); False pushes them one after
        another, holding one `[L + 1, N, d]` tangent at a time (large graphs).

    Returns:
      `[L + 1, N]`: entry `[l, v]` is the Frobenius norm of the `d x d` block
      `d x_v(l) / d x_u(0)`.
    """
    basis = source_basis(*x0.shape, source, x0.dtype)
    return _compiled_block_norms(trajectory_fn, vectorize)(x0, basis)


def swan_trajectory_fn(params: Params, graph: jraph.GraphsTuple, cfg: SWANConfig,
                       solver: str = "euler", **solve_kwargs: Any) -> TrajectoryFn:
    """`x0 -> sj.solve(..., save_trajectory=True)`, `[L + 1, N, d]`, differentiable forwards.

    Uses diffrax's direct adjoint: the checkpointed default supports reverse mode only.
    """
    solve_kwargs.setdefault("adjoint", "direct")

    def trajectory(x0: Array) -> Array:
        return solve(params, graph, x0, cfg, solver, save_trajectory=True, **solve_kwargs)

    return trajectory


@functools.partial(jax.jit, static_argnames=("solver", "solve_options", "vectorize"))
def _swan_block_norms(params, graph, x0, cfg, basis, solver, solve_options, vectorize):
    trajectory_fn = swan_trajectory_fn(params, graph, cfg, solver, **dict(solve_options))
    return _block_norms(trajectory_fn, x0, basis, vectorize)


def sensitivity(
    params: Params | None,
    graph: jraph.GraphsTuple | None,
    x0: Array,
    cfg: SWANConfig | None,
    source: int,
    *,
    trajectory_fn: TrajectoryFn | None = None,
    solver: str = "euler",
    vectorize: bool = True,
    **solve_kwargs: Any,
) -> Array:
    """`||d x_v(t_l) / d x_u(0)||_F` for u = `source`, every node v, layers l = 0..L.

    For SWAN (`params, graph, cfg`, integrated by `sj.solve(..., save_trajectory=True)`
    with `solver` and `solve_kwargs`), or for any model given as `trajectory_fn` (then
    `params, graph, cfg` are unused and may be None). Forward mode only; see
    `trajectory_sensitivity`. The input-dependent operators of the `-learn` variants are
    differentiated too: this is the model's own sensitivity to its input.

    Returns:
      `[L + 1, N]`.
    """
    if trajectory_fn is not None:
        return trajectory_sensitivity(trajectory_fn, x0, source, vectorize=vectorize)
    check_inputs(params, graph, x0, cfg)
    basis = source_basis(*x0.shape, source, x0.dtype)
    options = tuple(sorted({"adjoint": "direct", **solve_kwargs}.items()))
    graph = graph._replace(nodes=None, edges=None, globals=None)  # only the structure is read
    return _swan_block_norms(params, graph, x0, cfg, basis, solver, options, vectorize)


def hop_distances(graph: jraph.GraphsTuple, source: int, num_nodes: int | None = None
                  ) -> np.ndarray:
    """Breadth-first hop distance from `source` along edges sender -> receiver. `[N]`, -1 if
    unreachable."""
    senders, receivers = np.asarray(graph.senders), np.asarray(graph.receivers)
    num_nodes = int(np.sum(np.asarray(graph.n_node))) if num_nodes is None else num_nodes
    neighbours: list[list[int]] = [[] for _ in range(num_nodes)]
    for s, r in zip(senders.tolist(), receivers.tolist(), strict=True):
        neighbours[s].append(r)
    distance = np.full(num_nodes, -1, np.int64)
    distance[source] = 0
    queue = deque([source])
    while queue:
        node = queue.popleft()
        for nxt in neighbours[node]:
            if distance[nxt] < 0:
                distance[nxt] = distance[node] + 1
                queue.append(nxt)
    return distance


# --- Jacobian drift over layers (Appendix I) ---------------------------------------


def swan_layer_jacobians(params: Params, graph: jraph.GraphsTuple, x0: Array, cfg: SWANConfig,
                         solver: str = "euler", *, layer_map: bool = False,
                         **solve_kwargs: Any) -> Array:
    """Jacobians of the SWAN field at each layer's state `x(l)`, l = 0..L-1: `[L, N d, N d]`.

    Time `t = l epsilon` selects the weights of step l when weights are layer-dependent;
    the operators come from `x0` as in the model. With `layer_map=True`, the Jacobians of
    the Euler layer maps `x(l) -> x(l) + epsilon f(x(l))` instead, `I + epsilon J(l)`: the
    like-for-like comparison with a message-passing layer (exact for `solver="euler"`).
    """
    check_inputs(params, graph, x0, cfg)
    states = solve(params, graph, x0, cfg, solver, save_trajectory=True, **solve_kwargs)[:-1]
    times = jnp.arange(cfg.num_layers, dtype=x0.dtype) * jnp.asarray(cfg.epsilon, x0.dtype)
    ops = build_operators(params, graph, x0, cfg)

    def at_layer(x, t):
        return map_jacobian(lambda state: field_with_operators(params, graph, state, ops, cfg, t),
                            x)

    jacobians = jax.vmap(at_layer)(states, times)
    if layer_map:
        jacobians = jnp.eye(jacobians.shape[-1], dtype=x0.dtype) + cfg.epsilon * jacobians
    return jacobians


def layer_map_jacobians(layer_maps: Sequence[StateMap], x0: Array) -> Array:
    """Jacobian of each layer map at its own input `x(l-1)`: `[L, N d, N d]`."""
    jacobians, x = [], x0
    for layer_map in layer_maps:
        jacobians.append(map_jacobian(layer_map, x))
        x = layer_map(x)
    return jnp.stack(jacobians)


def jacobian_drift(jacobians: Array | Sequence[Array]) -> Array:
    """Relative change `||J(l) - J(l-1)||_F / ||J(l-1)||_F`, l = 1..L-1: `[L - 1]`.

    The quantity of paper Appendix I (Figure "jacobian_over_time"), which reports about
    0.6% per layer for SWAN against 40% for GCN on peptides-func.
    """
    stacked = jnp.stack(list(jacobians)) if not isinstance(jacobians, jax.Array) else jacobians
    change = jnp.linalg.norm(stacked[1:] - stacked[:-1], axis=(-2, -1))
    return change / jnp.linalg.norm(stacked[:-1], axis=(-2, -1))


# --- small graphs for the notebooks and tests --------------------------------------


def undirected_graph(edges: Sequence[tuple[int, int]], num_nodes: int,
                     nodes: Array | None = None) -> jraph.GraphsTuple:
    """A one-graph `GraphsTuple` with both directions of every edge (SPEC.md "Graphs")."""
    pairs = np.asarray(list(edges), np.int32).reshape(-1, 2)
    senders = np.concatenate([pairs[:, 0], pairs[:, 1]])
    receivers = np.concatenate([pairs[:, 1], pairs[:, 0]])
    return jraph.GraphsTuple(
        nodes=nodes, edges=None, senders=jnp.asarray(senders), receivers=jnp.asarray(receivers),
        n_node=jnp.asarray([num_nodes], jnp.int32), n_edge=jnp.asarray([len(senders)], jnp.int32),
        globals=None)


def line_graph(num_nodes: int) -> jraph.GraphsTuple:
    """Path `0 - 1 - ... - (N-1)`."""
    return undirected_graph([(i, i + 1) for i in range(num_nodes - 1)], num_nodes)


def ring_graph(num_nodes: int) -> jraph.GraphsTuple:
    """Cycle `0 - 1 - ... - (N-1) - 0`."""
    return undirected_graph([(i, (i + 1) % num_nodes) for i in range(num_nodes)], num_nodes)


def to_networkx(graph: jraph.GraphsTuple):
    """An undirected `networkx.Graph` of the edges (for drawing)."""
    import networkx as nx

    nx_graph = nx.Graph()
    nx_graph.add_nodes_from(range(int(np.sum(np.asarray(graph.n_node)))))
    nx_graph.add_edges_from(zip(np.asarray(graph.senders).tolist(),
                                np.asarray(graph.receivers).tolist(), strict=True))
    return nx_graph


__all__ = [
    "dense_laplacian", "dissipativity_summary", "DissipativitySummary", "encoded_input",
    "graph_jacobian", "heat_jacobian", "heat_trajectory", "hop_distances", "jacobian_drift",
    "jacobian_factors", "laplacian_apply", "LAPLACIANS", "layer_map_jacobians", "line_graph",
    "load_checkpoint_params", "map_jacobian", "model_dissipativity_summary", "mpnn_layer_maps",
    "ring_graph", "sensitivity", "source_basis", "spectrum", "summarize_spectrum",
    "swan_field_params", "swan_layer_jacobians", "swan_trajectory_fn", "to_networkx",
    "trajectory_from_steps", "trajectory_sensitivity", "undirected_graph", "unvec", "vec",
]
