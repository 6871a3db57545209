"""The diffusion baseline `dX/dt = -L X` (paper Theorem 3.2, Appendix B).

Its Jacobian `-(I_d (x) L)` has a real, non-positive spectrum: information decays
exponentially with time, the behaviour SWAN's antisymmetry avoids.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jraph
from jax.typing import DTypeLike

from swan_jax.analysis.trajectories import trajectory_from_steps
from swan_jax.graph import aggregate, edge_operators, in_degree, plain_graph
from swan_jax.graph.protocol import ADJACENCY_CODES

Array = jax.Array

LAPLACIANS: tuple[str, ...] = ("sym", "combinatorial")


def laplacian_apply(graph: jraph.GraphsTuple, x: Array, kind: str = "sym") -> Array:
    """`L X` without a dense matrix: `[N, d] -> [N, d]`.

    `kind="sym"`: `L = I' - D^-1/2 A D^-1/2` (spectrum in [0, 2]; `I'` is the identity on
    nodes with an edge, so isolated nodes stay still, as in networkx). `kind="combinatorial"`:
    `L = D - A`. Degrees are in-degrees (docs/conventions.md "Graphs").
    """
    graph = plain_graph(graph)  # a prepared graph's edge lists
    num_nodes = x.shape[0]
    ones = jnp.ones(graph.receivers.shape, x.dtype)
    deg = in_degree(graph, num_nodes, ones)
    if kind == "sym":
        ops = edge_operators(graph, num_nodes, ADJACENCY_CODES["sym"], dtype=x.dtype)
        return (deg > 0).astype(x.dtype)[:, None] * x - aggregate(graph, ops.w_hat, x)
    if kind == "combinatorial":
        return deg[:, None] * x - aggregate(graph, ones, x)
    raise ValueError(f"unknown Laplacian {kind!r}; valid ones: {', '.join(LAPLACIANS)}")


def dense_laplacian(graph: jraph.GraphsTuple, num_nodes: int, kind: str = "sym",
                    dtype: DTypeLike = jnp.float32) -> Array:
    """The `[N, N]` Laplacian of `laplacian_apply`."""
    return jax.vmap(lambda e: laplacian_apply(graph, e[:, None], kind)[:, 0], out_axes=1)(
        jnp.eye(num_nodes, dtype=dtype))


def heat_trajectory(graph: jraph.GraphsTuple, x0: Array, epsilon: float, num_layers: int,
                    kind: str = "sym") -> Array:
    """Forward Euler on the heat equation `dX/dt = -L X`: `[N, d] -> [L + 1, N, d]`.

    `X(l+1) = X(l) - epsilon L X(l)`, stable for `epsilon <= 2 / lambda_max(L)` (for the
    default normalised Laplacian, any `epsilon <= 1`).
    """
    return trajectory_from_steps(lambda x: x - epsilon * laplacian_apply(graph, x, kind),
                                 num_layers)(x0)


def heat_jacobian(graph: jraph.GraphsTuple, num_nodes: int, width: int, kind: str = "sym",
                  dtype: DTypeLike = jnp.float32) -> Array:
    """Jacobian of `-L X` in `vec` order: `-(I_d (x) L)`, `[N d, N d]`; real, `<= 0` spectrum."""
    lap = dense_laplacian(graph, num_nodes, kind, dtype)
    return -jnp.kron(jnp.eye(width, dtype=dtype), lap)
