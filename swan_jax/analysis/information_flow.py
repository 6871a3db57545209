"""Information flow: `||d x_v(l) / d x_u(0)||` for every node v and layer l.

The oversquashing measure of paper Sec. "The Benefit of Spatial Antisymmetry" (eq.
mpnn_oversquashing_1; Theorems 3.1 - 3.3), computed by forward-mode products only: `d`
tangents of the trajectory are held (or one, with `vectorize=False`), never the
`[N d, N d]` Jacobian, so a 20,000-node ring with d = 16 takes seconds on a CPU.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable
from typing import Any, cast

import jax
import jax.numpy as jnp
import jraph
import numpy as np
from jax.typing import DTypeLike

from swan_jax.analysis.trajectories import TrajectoryFn, swan_trajectory_fn
from swan_jax.config import SWANConfig
from swan_jax.field import Params, check_inputs

Array = jax.Array


def source_basis(num_nodes: int, width: int, source: int,
                 dtype: DTypeLike = jnp.float32) -> Array:
    """The `d` tangents `e_u (x) e_c`, c = 0..d-1, of node u = `source`: `[d, N, d]`."""
    channels = jnp.arange(width)
    return jnp.zeros((width, num_nodes, width), dtype).at[channels, source, channels].set(1)


def _block_norms(trajectory_fn: TrajectoryFn, x0: Array, basis: Array,
                 vectorize: bool = True) -> Array:
    """Frobenius norms over the `d x d` blocks of the pushed-forward basis: `[L + 1, N]`."""

    def squared(tangent: Array) -> Array:  # [L + 1, N, d_out] -> [L + 1, N]
        return jnp.sum(jax.jvp(trajectory_fn, (x0,), (tangent,))[1] ** 2, axis=-1)

    if vectorize:  # all d JVPs at once
        total = jnp.sum(jax.vmap(squared)(basis), axis=0)
    else:  # one JVP after another: memory of a single trajectory tangent
        def accumulate(carry: Array, tangent: Array) -> tuple[Array, None]:
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
    basis = source_basis(*cast(tuple[int, int], x0.shape), source, x0.dtype)  # [N, d]
    return _compiled_block_norms(trajectory_fn, vectorize)(x0, basis)


@functools.partial(jax.jit, static_argnames=("solver", "solve_options", "vectorize"))
def _swan_block_norms(params: Params, graph: jraph.GraphsTuple, x0: Array, cfg: SWANConfig,
                      basis: Array, solver: str, solve_options: tuple[tuple[str, Any], ...],
                      vectorize: bool) -> Array:
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

    Args:
      x0: `[N, d]` input state.
      source: index u of the perturbed node.

    Returns:
      `[L + 1, N]`.
    """
    if trajectory_fn is not None:
        return trajectory_sensitivity(trajectory_fn, x0, source, vectorize=vectorize)
    if params is None or graph is None or cfg is None:
        raise ValueError("sensitivity needs params, graph and cfg (or a trajectory_fn)")
    check_inputs(params, graph, x0, cfg)
    basis = source_basis(*cast(tuple[int, int], x0.shape), source, x0.dtype)  # [N, d]
    options = tuple(sorted({"adjoint": "direct", **solve_kwargs}.items()))
    graph = graph._replace(nodes=None, edges=None, globals=None)  # only the structure is read
    norms: Array = _swan_block_norms(params, graph, x0, cfg, basis, solver, options, vectorize)
    return norms


def hop_distances(graph: jraph.GraphsTuple, source: int, num_nodes: int | None = None
                  ) -> np.ndarray:
    """Breadth-first hop distance from `source` along edges sender -> receiver. `[N]`, -1 if
    unreachable (the x-axis of sensitivity plots)."""
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
