"""The segment-sum layout: operators of docs/conventions.md ("Operators") as edge weights.

An edge `e` carries a message from `senders[e]` to `receivers[e]`, so an operator
`M` with edge weights `w` has `M[receivers[e], senders[e]] += w[e]`. The transposed
operator sends the same weight the other way. Building `M + M^T` and `M - M^T` this
way (one pass forwards, one backwards over the *same* edge) makes them exactly
symmetric and antisymmetric on every graph, whatever its degrees, multi-edges or
direction.

`SegmentGraph` implements the graph protocol (`swan_jax.graph.protocol.GraphOps`) on a
`jraph.GraphsTuple` with these functions: the reference path of the field and the
baselines.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import jraph
from jax.typing import DTypeLike

from swan_jax.graph.protocol import AdjacencyCode, Term, adjacency_hat, safe_inverse
from swan_jax.graph.validation import check_edges_traced, validate_graphs_tuple

if TYPE_CHECKING:  # shapes for the type checker and the reader; nothing at run time
    from jaxtyping import Float

Array = jax.Array


class EdgeOperators(NamedTuple):
    """Edge weights of the two operators SWAN aggregates with.

    Attributes:
      w_hat: `[E]` weights of `A_hat` (or `A_hat_F`).
      w_tilde: `[E]` weights of `A_tilde = D^-1 A` (or `A_tilde_F`).
    """

    w_hat: Array
    w_tilde: Array


def in_degree(graph: jraph.GraphsTuple, num_nodes: int,
              edge_weights: Float[Array, " E"] | None = None) -> Float[Array, " N"]:
    """`deg(u) = sum_v A[u, v]`: the (weighted) count of edges received by u. `[N]`."""
    if edge_weights is None:
        edge_weights = jnp.ones(graph.receivers.shape, dtype=jnp.float32)
    return jax.ops.segment_sum(edge_weights, graph.receivers, num_segments=num_nodes)


def edge_operators(
    graph: jraph.GraphsTuple,
    num_nodes: int,
    adjacency: AdjacencyCode,
    edge_weights: Array | None = None,
    dtype: DTypeLike = jnp.float32,
) -> EdgeOperators:
    """Edge weights of `A_hat` and `A_tilde` (Appendix A.2, eq. fixedOperators/learnOperators).

    Args:
      graph: the graph; `edge_weights` default to 1 (the binary adjacency `A`),
        or are the learned `F` of SWAN-learn.
      num_nodes: static node count N.
      adjacency: its code: 1 (sym) gives `A_hat = D^-1/2 A D^-1/2`, 0 (adj) `A_hat = A`;
        known, or traced to select per run (`adjacency_hat`).

    Returns:
      `EdgeOperators(w_hat [E], w_tilde [E])`.
    """
    if edge_weights is None:
        edge_weights = jnp.ones(graph.receivers.shape, dtype=dtype)
    deg = in_degree(graph, num_nodes, edge_weights)
    inv_deg = safe_inverse(deg)
    w_tilde = edge_weights * inv_deg[graph.receivers]

    def normalised() -> Array:
        inv_sqrt = safe_inverse(deg, 0.5)
        return edge_weights * inv_sqrt[graph.receivers] * inv_sqrt[graph.senders]

    w_hat = adjacency_hat(adjacency, edge_weights, normalised)
    return EdgeOperators(w_hat=w_hat, w_tilde=w_tilde)


def aggregate(graph: jraph.GraphsTuple, weights: Float[Array, " E"], x: Float[Array, "N d"]
              ) -> Float[Array, "N d"]:
    """`M X` for the operator with edge weights `weights`: `[N, d]`."""
    messages = weights[:, None] * x[graph.senders]
    return jax.ops.segment_sum(messages, graph.receivers, num_segments=x.shape[0])


def aggregate_transpose(graph: jraph.GraphsTuple, weights: Float[Array, " E"],
                        x: Float[Array, "N d"]) -> Float[Array, "N d"]:
    """`M^T X`: the same edge weights, messages sent from receiver to sender. `[N, d]`."""
    messages = weights[:, None] * x[graph.receivers]
    return jax.ops.segment_sum(messages, graph.senders, num_segments=x.shape[0])


def symmetric_aggregate(graph: jraph.GraphsTuple, weights: Float[Array, " E"],
                        x: Float[Array, "N d"]) -> Float[Array, "N d"]:
    """`(M + M^T) X`, exactly symmetric in space. `[N, d]`."""
    return aggregate(graph, weights, x) + aggregate_transpose(graph, weights, x)


def antisymmetric_aggregate(graph: jraph.GraphsTuple, weights: Float[Array, " E"],
                            x: Float[Array, "N d"]) -> Float[Array, "N d"]:
    """`(M - M^T) X`, exactly antisymmetric in space. `[N, d]`."""
    return aggregate(graph, weights, x) - aggregate_transpose(graph, weights, x)


def dense_operator(graph: jraph.GraphsTuple, weights: Float[Array, " E"], num_nodes: int
                   ) -> Float[Array, "N N"]:
    """The dense `[N, N]` matrix with `M[receivers[e], senders[e]] += weights[e]`."""
    matrix = jnp.zeros((num_nodes, num_nodes), dtype=weights.dtype)
    return matrix.at[graph.receivers, graph.senders].add(weights)


# --- the graph protocol on a GraphsTuple ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class SegmentGraph:
    """`GraphOps` on a `jraph.GraphsTuple`: edge weights and segment sums."""

    graph: jraph.GraphsTuple

    def plain(self) -> jraph.GraphsTuple:
        return self.graph

    def validate(self) -> None:
        validate_graphs_tuple(self.graph)

    def check_states(self, x: Array) -> None:
        del x  # a GraphsTuple's node count is a value (`n_node`), checked on the host

    def check_traced(self, x: Array | None = None) -> None:
        graph = self.graph
        num_nodes: int | Array
        if x is not None:
            num_nodes = jnp.shape(x)[0]
        elif graph.nodes is not None:
            num_nodes = jnp.shape(jax.tree_util.tree_leaves(graph.nodes)[0])[0]
        else:
            num_nodes = jnp.sum(graph.n_node)
        check_edges_traced(graph, num_nodes)

    def in_degree(self, *, num_nodes: int, dtype: Any) -> Array:
        return in_degree(self.graph, num_nodes).astype(dtype)

    def operators(self, adjacency: AdjacencyCode, pair_weights: Array | None = None, *,
                  num_nodes: int, dtype: Any) -> EdgeOperators:
        return edge_operators(self.graph, num_nodes, adjacency, pair_weights, dtype=dtype)

    def pair_linear(self, x: Array, kernel: Array) -> Array:
        pair = jnp.concatenate([x[self.graph.receivers], x[self.graph.senders]], axis=-1)
        return pair @ kernel

    def mix(self, ops: EdgeOperators, x: Array, self_matrix: Array, bias: Array,
            terms: tuple[Term, ...]) -> Array:
        """Each term aggregates `X`, then multiplies by its matrix (the reference order)."""
        apply = {"hat": lambda: aggregate(self.graph, ops.w_hat, x),
                 "phi": lambda: symmetric_aggregate(self.graph, ops.w_hat, x),
                 "psi": lambda: antisymmetric_aggregate(self.graph, ops.w_tilde, x)}
        pre = x @ self_matrix + bias
        for term in terms:
            value = apply[term.part]() @ term.matrix
            pre = pre + (value if term.scale is None else term.scale * value)
        return pre

    def aggregate(self, x: Array, *, row_scale: Array | None = None,
                  neighbor_scale: Array | None = None) -> Array:
        graph = self.graph
        if neighbor_scale is None:
            weights = (jnp.ones(graph.receivers.shape, x.dtype) if row_scale is None
                       else row_scale[graph.receivers])
        elif row_scale is None:
            weights = neighbor_scale[graph.senders]
        else:
            weights = row_scale[graph.receivers] * neighbor_scale[graph.senders]
        return aggregate(graph, weights, x)

    def attention(self, a_src: Array, a_dst: Array, h: Array) -> Array:
        n = h.shape[0]
        loops = jnp.arange(n)
        senders = jnp.concatenate([self.graph.senders, loops])
        receivers = jnp.concatenate([self.graph.receivers, loops])
        logits = jax.nn.leaky_relu(a_src[senders] + a_dst[receivers], 0.2)
        weights = jraph.segment_softmax(logits, receivers, num_segments=n)
        return jax.ops.segment_sum(weights[:, None] * h[senders], receivers, num_segments=n)

    def store(self, tree: Any) -> Any:
        return tree
