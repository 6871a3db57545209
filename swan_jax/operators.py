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

from swan_jax import gather

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


# --- the same operators on a prepared graph's slot layout (swan_jax.gather) ----------


class SlotOperators(NamedTuple):
    """Slot values (`[R, K]`, see `swan_jax.prepared`) of the operators SWAN aggregates with.

    Attributes:
      hat: `A_hat` (or `A_hat_F`); `hat_t`: `A_hat^T`.
      phi: `A_hat + A_hat^T`, equal to itself at the mirror slot bit for bit.
      psi: `A_tilde - A_tilde^T`, the negation of itself at the mirror slot bit for bit;
        `psi_t = -psi` its transpose.
    """

    hat: Array
    hat_t: Array
    phi: Array
    psi: Array
    psi_t: Array


def slot_operators(graph, adjacency: str, pair_weights: Array | None = None,
                   dtype=jnp.float32) -> SlotOperators:
    """The operators of `edge_operators` on a `PreparedGraph`, by gathers only.

    `pair_weights [P]` are the learned `F` of each listed pair `(u <- v)` (one value
    for all its parallel edges; the pair's edge count multiplies it); by default the
    binary adjacency. `A_hat` and `A_tilde` are built on each slot from its forward
    weight `f = A[u, v]` (the products of `edge_operators`, so on a simple graph `hat`
    equals its edge weight bit for bit), stored, and then combined with their values at
    the mirror slot: `phi = a + a[mirror]`, `psi = t - t[mirror]`. A sum and a difference
    of two stored numbers are exactly symmetric and antisymmetric under any compiler
    (a fused multiply-add inside `f u - b v` would round its two sides differently).
    """
    if adjacency not in ("sym", "adj"):
        raise ValueError(f"unknown adjacency {adjacency!r}; valid adjacencies: sym, adj")
    if pair_weights is None:
        f = jnp.asarray(graph.forward_count, dtype)
    else:
        f = gather.pairs_to_slots(
            graph, pair_weights * jnp.asarray(graph.pair_count, pair_weights.dtype))
    deg = gather.node_sum(graph, jnp.sum(f, axis=1))
    tilde = gather.materialize(f * gather.row_owner(graph, safe_inverse(deg))[:, None])
    psi = tilde - gather.mirror_slots(graph, tilde)
    if adjacency == "sym":
        inv_sqrt = safe_inverse(deg, 0.5)
        hat = f * gather.row_owner(graph, inv_sqrt)[:, None] * gather.gather_neighbors(
            graph, inv_sqrt)
    else:
        hat = f
    hat = gather.materialize(hat)
    hat_t = gather.mirror_slots(graph, hat)
    # Stored once: every step of a solve reads them (see `gather.materialize`).
    return gather.materialize(SlotOperators(hat=hat, hat_t=hat_t, phi=hat + hat_t, psi=psi,
                                            psi_t=-psi))
