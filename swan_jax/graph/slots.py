"""The slot layout: SWAN's operators and the baselines' aggregations on a `PreparedGraph`.

Everything here is built from the gather-only kernels of `swan_jax.graph.gather`, so
forward, reverse and batched passes stay gathers. `SlotGraph` implements the graph
protocol (`swan_jax.graph.protocol.GraphOps`) with these functions; on a simple graph
they give the numbers of the segment-sum layout (`swan_jax.graph.segment`) up to the
rounding of a different order of operations.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import jraph
from jax.typing import DTypeLike

from swan_jax.graph import gather
from swan_jax.graph.prepared import (
    PreparedGraph,
    check_prepared_traced,
    plain_graph,
    validate_prepared,
)
from swan_jax.graph.protocol import AdjacencyCode, Term, adjacency_hat, safe_inverse

Array = jax.Array


class SlotOperators(NamedTuple):
    """Slot values (`[R, K]`, see `swan_jax.graph.prepared`) of the operators SWAN aggregates with.

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


def slot_operators(graph: PreparedGraph, adjacency: AdjacencyCode,
                   pair_weights: Array | None = None,
                   dtype: DTypeLike = jnp.float32) -> SlotOperators:
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
    if pair_weights is None:
        f = jnp.asarray(graph.forward_count, dtype)
    else:
        f = gather.pairs_to_slots(
            graph, pair_weights * jnp.asarray(graph.pair_count, pair_weights.dtype))
    deg = gather.node_sum(graph, jnp.sum(f, axis=1))
    tilde = gather.materialize(f * gather.row_owner(graph, safe_inverse(deg))[:, None])
    psi = tilde - gather.mirror_slots(graph, tilde)

    def normalised() -> Array:
        inv_sqrt = safe_inverse(deg, 0.5)
        return f * gather.row_owner(graph, inv_sqrt)[:, None] * gather.gather_neighbors(
            graph, inv_sqrt)

    hat = adjacency_hat(adjacency, f, normalised)
    hat = gather.materialize(hat)
    hat_t = gather.mirror_slots(graph, hat)
    # Stored once: every step of a solve reads them (see `gather.materialize`).
    return gather.materialize(SlotOperators(hat=hat, hat_t=hat_t, phi=hat + hat_t, psi=psi,
                                            psi_t=-psi))


# --- the baselines' aggregations on the slots ----------------------------------------


def slot_adjacency(graph: PreparedGraph, dtype: DTypeLike) -> tuple[Array, Array, Array]:
    """`A` on the slots (`f = A[u, v]`, `b = A[v, u]`) and the in-degree `[N]`."""
    f = jnp.asarray(graph.forward_count, dtype)
    b = jnp.asarray(graph.backward_count, dtype)
    return f, b, gather.node_sum(graph, jnp.sum(f, axis=1))


def scaled_slot_aggregate(graph: PreparedGraph, row_scale: Array, neighbor_scale: Array,
                          x: Array) -> Array:
    """`diag(r) A diag(c) X` on the slots, for node vectors `r`, `c` `[N]`: `[N, d]`.

    Values `(A[u, v] r_u) c_v`, the products in the order of the segment-sum path.
    """
    f, b, _ = slot_adjacency(graph, x.dtype)
    rows, neighbors = gather.row_owner(graph, row_scale)[:, None], gather.gather_neighbors(
        graph, neighbor_scale)
    columns, mirrored = gather.gather_neighbors(graph, row_scale), gather.row_owner(
        graph, neighbor_scale)[:, None]
    # Stored once (see `gather.materialize`), not recomputed per output element.
    values, transposed = gather.materialize((f * rows * neighbors, b * columns * mirrored))
    return gather.aggregate(graph, (values,), (transposed,), (x,))


def slot_attention(graph: PreparedGraph, a_src: Array, a_dst: Array, h: Array) -> Array:
    """GAT's softmax over in-neighbours and the node itself on the slot layout: `[N, d]`.

    Logit of edge `v -> u`: `leaky_relu(a_src[v] + a_dst[u], 0.2)`; parallel edges count
    as often as they occur. The softmax shift (a per-node maximum) is held constant.
    """
    f, _, _ = slot_adjacency(graph, h.dtype)
    edge = f > 0
    logits = jax.nn.leaky_relu(gather.gather_neighbors(graph, a_src)
                           + gather.row_owner(graph, a_dst)[:, None], 0.2)
    own = jax.nn.leaky_relu(a_src + a_dst, 0.2)
    shift = jax.lax.stop_gradient(jnp.maximum(
        gather.node_max(graph, jnp.max(jnp.where(edge, logits, -jnp.inf), axis=1)), own))
    centred = jnp.where(edge, logits - gather.row_owner(graph, shift)[:, None], 0.0)
    weights = jnp.where(edge, f * jnp.exp(centred), 0.0)
    own_weight = jnp.exp(own - shift)
    total = gather.node_sum(graph, jnp.sum(weights, axis=1)) + own_weight
    messages = gather.aggregate(graph, (weights,), (gather.mirror_slots(graph, weights),), (h,))
    return (messages + own_weight[:, None] * h) / total[:, None]


# --- the graph protocol on a PreparedGraph -------------------------------------------


@dataclasses.dataclass(frozen=True)
class SlotGraph:
    """`GraphOps` on a `PreparedGraph`: slot values and gathers only."""

    graph: PreparedGraph

    def plain(self) -> jraph.GraphsTuple:
        return plain_graph(self.graph)

    def validate(self) -> None:
        validate_prepared(self.graph)

    def check_states(self, x: Array) -> None:
        if jnp.shape(x)[:1] != (self.graph.num_nodes,):
            # Static, so checked under tracing too: a gather past the last row would clamp.
            raise ValueError(f"x has shape {tuple(jnp.shape(x))} but the prepared graph has "
                             f"{self.graph.num_nodes} nodes")

    def check_traced(self, x: Array | None = None) -> None:
        del x  # the layout knows its node count (`check_states` matches `x` to it)
        check_prepared_traced(self.graph)

    def in_degree(self, *, num_nodes: int, dtype: Any) -> Array:
        del num_nodes
        return slot_adjacency(self.graph, dtype)[2]

    def operators(self, adjacency: AdjacencyCode, pair_weights: Array | None = None, *,
                  num_nodes: int, dtype: Any) -> SlotOperators:
        del num_nodes
        return slot_operators(self.graph, adjacency, pair_weights, dtype=dtype)

    def pair_linear(self, x: Array, kernel: Array) -> Array:
        """`x_u K[:d] + x_v K[d:]` from one `[N, d] x [d, 2 h]` product gathered to the
        listed pairs (parallel edges share one value)."""
        d = x.shape[-1]
        ends = x @ jnp.concatenate([kernel[:d], kernel[d:]], axis=1)  # one product
        return gather.gather_pair_ends_joined(self.graph, ends)

    def mix(self, ops: SlotOperators, x: Array, self_matrix: Array, bias: Array,
            terms: tuple[Term, ...]) -> Array:
        """One `[N, d] x [d, (1 + T) c]` product `X [S | M_1 | ...]`, then every term in one
        slot pass: the products commute with the aggregations."""
        parts = {"hat": (ops.hat, ops.hat_t), "phi": (ops.phi, ops.phi),
                 "psi": (ops.psi, ops.psi_t)}
        blocks = [self_matrix] + [t.matrix if t.scale is None else t.scale * t.matrix
                                  for t in terms]
        y = x @ jnp.concatenate(blocks, axis=1)
        if not terms:
            return y + bias
        values = [parts[t.part][0] for t in terms]
        transposed = [parts[t.part][1] for t in terms]
        return gather.mix_aggregate(self.graph, values, transposed, y, bias)

    def aggregate(self, x: Array, *, row_scale: Array | None = None,
                  neighbor_scale: Array | None = None) -> Array:
        if row_scale is None and neighbor_scale is None:
            f, b, _ = slot_adjacency(self.graph, x.dtype)
            return gather.aggregate(self.graph, (f,), (b,), (x,))
        ones = jnp.ones((self.graph.num_nodes,), x.dtype)
        return scaled_slot_aggregate(self.graph, ones if row_scale is None else row_scale,
                                     ones if neighbor_scale is None else neighbor_scale, x)

    def attention(self, a_src: Array, a_dst: Array, h: Array) -> Array:
        return slot_attention(self.graph, a_src, a_dst, h)

    def store(self, tree: Any) -> Any:
        return gather.materialize(tree)
