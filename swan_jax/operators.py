"""Graph operators of docs/conventions.md ("Operators") as edge weights and segment sums.

An edge `e` carries a message from `senders[e]` to `receivers[e]`, so an operator
`M` with edge weights `w` has `M[receivers[e], senders[e]] += w[e]`. The transposed
operator sends the same weight the other way. Building `M + M^T` and `M - M^T` this
way (one pass forwards, one backwards over the *same* edge) makes them exactly
symmetric and antisymmetric on every graph, whatever its degrees, multi-edges or
direction.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jraph

Array = jax.Array


class EdgeOperators(NamedTuple):
    """Edge weights of the two operators SWAN aggregates with.

    Attributes:
      w_hat: `[E]` weights of `A_hat` (or `A_hat_F`).
      w_tilde: `[E]` weights of `A_tilde = D^-1 A` (or `A_tilde_F`).
    """

    w_hat: Array
    w_tilde: Array


def safe_inverse(values: Array, power: float = 1.0) -> Array:
    """`values ** -power` where positive, 0 elsewhere (docs/conventions.md: 1/0 is taken as 0)."""
    positive = values > 0
    safe = jnp.where(positive, values, 1.0)
    return jnp.where(positive, safe ** (-power), 0.0)


def in_degree(graph: jraph.GraphsTuple, num_nodes: int, edge_weights: Array | None = None) -> Array:
    """`deg(u) = sum_v A[u, v]`: the (weighted) count of edges received by u. `[N]`."""
    if edge_weights is None:
        edge_weights = jnp.ones(graph.receivers.shape, dtype=jnp.float32)
    return jax.ops.segment_sum(edge_weights, graph.receivers, num_segments=num_nodes)


def edge_operators(
    graph: jraph.GraphsTuple,
    num_nodes: int,
    adjacency: str,
    edge_weights: Array | None = None,
    dtype=jnp.float32,
) -> EdgeOperators:
    """Edge weights of `A_hat` and `A_tilde` (Appendix A.2, eq. fixedOperators/learnOperators).

    Args:
      graph: the graph; `edge_weights` default to 1 (the binary adjacency `A`),
        or are the learned `F` of SWAN-learn.
      num_nodes: static node count N.
      adjacency: `"sym"` gives `A_hat = D^-1/2 A D^-1/2`, `"adj"` gives `A_hat = A`.

    Returns:
      `EdgeOperators(w_hat [E], w_tilde [E])`.
    """
    if edge_weights is None:
        edge_weights = jnp.ones(graph.receivers.shape, dtype=dtype)
    deg = in_degree(graph, num_nodes, edge_weights)
    inv_deg = safe_inverse(deg)
    w_tilde = edge_weights * inv_deg[graph.receivers]
    if adjacency == "sym":
        inv_sqrt = safe_inverse(deg, 0.5)
        w_hat = edge_weights * inv_sqrt[graph.receivers] * inv_sqrt[graph.senders]
    elif adjacency == "adj":
        w_hat = edge_weights
    else:
        raise ValueError(f"unknown adjacency {adjacency!r}; valid adjacencies: sym, adj")
    return EdgeOperators(w_hat=w_hat, w_tilde=w_tilde)


def aggregate(graph: jraph.GraphsTuple, weights: Array, x: Array) -> Array:
    """`M X` for the operator with edge weights `weights`: `[N, d]`."""
    messages = weights[:, None] * x[graph.senders]
    return jax.ops.segment_sum(messages, graph.receivers, num_segments=x.shape[0])


def aggregate_transpose(graph: jraph.GraphsTuple, weights: Array, x: Array) -> Array:
    """`M^T X`: the same edge weights, messages sent from receiver to sender. `[N, d]`."""
    messages = weights[:, None] * x[graph.receivers]
    return jax.ops.segment_sum(messages, graph.senders, num_segments=x.shape[0])


def symmetric_aggregate(graph: jraph.GraphsTuple, weights: Array, x: Array) -> Array:
    """`(M + M^T) X`, exactly symmetric in space. `[N, d]`."""
    return aggregate(graph, weights, x) + aggregate_transpose(graph, weights, x)


def antisymmetric_aggregate(graph: jraph.GraphsTuple, weights: Array, x: Array) -> Array:
    """`(M - M^T) X`, exactly antisymmetric in space. `[N, d]`."""
    return aggregate(graph, weights, x) - aggregate_transpose(graph, weights, x)


def dense_operator(graph: jraph.GraphsTuple, weights: Array, num_nodes: int) -> Array:
    """The dense `[N, N]` matrix with `M[receivers[e], senders[e]] += weights[e]`."""
    matrix = jnp.zeros((num_nodes, num_nodes), dtype=weights.dtype)
    return matrix.at[graph.receivers, graph.senders].add(weights)
