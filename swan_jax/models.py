"""Flax modules around the pure SWAN core: encoders, ODE block, baselines, readouts.

A model is `encoder -> processor -> readout` over a padded, batched
`jraph.GraphsTuple` or its `PreparedGraph` (`Model`). Parameters stay plain pytrees
(Flax variable dicts), so `jax.vmap` over `Model.init` / `Model.apply` trains many
seeds in one program. On a `PreparedGraph` the baselines aggregate with the same
gather-only slot kernels as SWAN (`swan_jax.gather`), so comparisons stay fair.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from swan_jax import gather
from swan_jax.config import SWANConfig
from swan_jax.field import init_params
from swan_jax.operators import aggregate, edge_operators, in_degree, safe_inverse
from swan_jax.prepared import PreparedGraph
from swan_jax.solvers import solve

Array = jax.Array
Graph = jraph.GraphsTuple | PreparedGraph


def slot_adjacency(graph: PreparedGraph, dtype) -> tuple[Array, Array, Array]:
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


def node_graph_index(graph: jraph.GraphsTuple, num_nodes: int) -> Array:
    """`[N]` index of the graph each node row belongs to."""
    n_graph = graph.n_node.shape[0]
    return jnp.repeat(jnp.arange(n_graph), graph.n_node, total_repeat_length=num_nodes)


INITS = ("flax", "torch")


def dense(features: int, fan_in: int, init: str = "flax") -> nn.Dense:
    """`nn.Dense` with Flax's initialisation (LeCun-normal kernel, zero bias) or, `init=
    "torch"`, PyTorch's `nn.Linear` default (kernel and bias uniform in +-1/sqrt(fan_in)),
    which the authors' code ran with (it matters on graph transfer: RESULTS.md)."""
    if init == "flax":
        return nn.Dense(features)
    if init != "torch":
        raise ValueError(f"unknown init {init!r}; valid: {', '.join(INITS)}")
    bound = 1.0 / math.sqrt(max(fan_in, 1))

    def uniform(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return nn.Dense(features, kernel_init=uniform, bias_init=uniform)


class MLP(nn.Module):
    """Dense layers with `activation` between them (none after the last); `weight_init`: see
    `dense`."""

    features: Sequence[int]
    activation: Callable[[Array], Array] = nn.relu
    weight_init: str = "flax"

    @nn.compact
    def __call__(self, x: Array) -> Array:
        for i, width in enumerate(self.features):
            x = dense(width, x.shape[-1], self.weight_init)(x)
            if i < len(self.features) - 1:
                x = self.activation(x)
        return x


class LinearEncoder(nn.Module):
    """`Linear(in -> hidden)` on `graph.nodes`: `[N, in] -> [N, hidden]`."""

    hidden: int
    weight_init: str = "flax"  # or "torch": see `dense`

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple) -> Array:
        return dense(self.hidden, graph.nodes.shape[-1], self.weight_init)(graph.nodes)


class SWANBlock(nn.Module):
    """The SWAN ODE block: `x(0) -> x(num_layers * epsilon)` via `solve`.

    Its parameters are the raw pytree of `swan_jax.init_params` under the name
    "field" (`W, V, Z, b`, plus the edge MLP of the `-learn` variants).
    """

    cfg: SWANConfig
    solver: str = "euler"
    rtol: float = 1e-3
    atol: float = 1e-6
    adjoint: str = "recursive"
    max_steps: int | None = None

    @nn.compact
    def __call__(self, graph: Graph, x: Array) -> Array:
        params = self.param("field", lambda key: init_params(key, x.shape[-1], self.cfg, x.dtype))
        return solve(
            params, graph, x, self.cfg, self.solver,
            rtol=self.rtol, atol=self.atol, adjoint=self.adjoint, max_steps=self.max_steps,
        )


# --- message-passing baselines (the paper's Figure 3), one layer each ---------------


class GCNLayer(nn.Module):
    """Kipf & Welling: `D^-1/2 (A + I) D^-1/2 X W`, degrees counting the self-loop."""

    hidden: int

    @nn.compact
    def __call__(self, graph: Graph, x: Array) -> Array:
        h = nn.Dense(self.hidden)(x)
        if isinstance(graph, PreparedGraph):
            inv_sqrt = safe_inverse(slot_adjacency(graph, x.dtype)[2] + 1.0, 0.5)
            # Stored once: the activation after the layer and its derivative both read it.
            return gather.materialize(scaled_slot_aggregate(graph, inv_sqrt, inv_sqrt, h)
                                      + h * (inv_sqrt**2)[:, None])
        deg = in_degree(graph, x.shape[0]).astype(x.dtype) + 1.0
        inv_sqrt = safe_inverse(deg, 0.5)
        weights = inv_sqrt[graph.receivers] * inv_sqrt[graph.senders]
        return aggregate(graph, weights, h) + h * (inv_sqrt**2)[:, None]


class GINLayer(nn.Module):
    """Xu et al.: `MLP((1 + eps) x_u + sum_v x_v)` with a learned eps."""

    hidden: int

    @nn.compact
    def __call__(self, graph: Graph, x: Array) -> Array:
        eps = self.param("eps", nn.initializers.zeros, ())
        if isinstance(graph, PreparedGraph):
            f, b, _ = slot_adjacency(graph, x.dtype)
            neighbours = gather.aggregate(graph, (f,), (b,), (x,))
        else:
            neighbours = aggregate(graph, jnp.ones(graph.receivers.shape, x.dtype), x)
        h = (1.0 + eps) * x + neighbours
        return MLP((self.hidden, self.hidden))(h)


class SAGELayer(nn.Module):
    """Hamilton et al. (mean aggregator): `W1 x_u + W2 mean_v x_v`."""

    hidden: int

    @nn.compact
    def __call__(self, graph: Graph, x: Array) -> Array:
        if isinstance(graph, PreparedGraph):
            inv = safe_inverse(slot_adjacency(graph, x.dtype)[2])
            neighbours = scaled_slot_aggregate(graph, inv, jnp.ones_like(inv), x)
        else:
            ops = edge_operators(graph, x.shape[0], "adj", dtype=x.dtype)
            neighbours = aggregate(graph, ops.w_tilde, x)  # D^-1 A X: the neighbour mean
        return nn.Dense(self.hidden)(x) + nn.Dense(self.hidden, use_bias=False)(neighbours)


class GATLayer(nn.Module):
    """Velickovic et al., one head, attention over in-neighbours and the node itself."""

    hidden: int

    @nn.compact
    def __call__(self, graph: Graph, x: Array) -> Array:
        n = x.shape[0]
        h = nn.Dense(self.hidden, use_bias=False)(x)
        a_src = nn.Dense(1, use_bias=False)(h)[:, 0]
        a_dst = nn.Dense(1, use_bias=False)(h)[:, 0]
        bias = self.param("bias", nn.initializers.zeros, (self.hidden,))
        if isinstance(graph, PreparedGraph):
            return gather.materialize(slot_attention(graph, a_src, a_dst, h) + bias)
        loops = jnp.arange(n)
        senders = jnp.concatenate([graph.senders, loops])
        receivers = jnp.concatenate([graph.receivers, loops])
        logits = nn.leaky_relu(a_src[senders] + a_dst[receivers], 0.2)
        attention = jraph.segment_softmax(logits, receivers, num_segments=n)
        out = jax.ops.segment_sum(attention[:, None] * h[senders], receivers, num_segments=n)
        return out + bias


def slot_attention(graph: PreparedGraph, a_src: Array, a_dst: Array, h: Array) -> Array:
    """GAT's softmax over in-neighbours and the node itself on the slot layout: `[N, d]`.

    Logit of edge `v -> u`: `leaky_relu(a_src[v] + a_dst[u], 0.2)`; parallel edges count
    as often as they occur. The softmax shift (a per-node maximum) is held constant.
    """
    f, _, _ = slot_adjacency(graph, h.dtype)
    edge = f > 0
    logits = nn.leaky_relu(gather.gather_neighbors(graph, a_src)
                           + gather.row_owner(graph, a_dst)[:, None], 0.2)
    own = nn.leaky_relu(a_src + a_dst, 0.2)
    shift = jax.lax.stop_gradient(jnp.maximum(
        gather.node_max(graph, jnp.max(jnp.where(edge, logits, -jnp.inf), axis=1)), own))
    centred = jnp.where(edge, logits - gather.row_owner(graph, shift)[:, None], 0.0)
    weights = jnp.where(edge, f * jnp.exp(centred), 0.0)
    own_weight = jnp.exp(own - shift)
    total = gather.node_sum(graph, jnp.sum(weights, axis=1)) + own_weight
    messages = gather.aggregate(graph, (weights,), (gather.mirror_slots(graph, weights),), (h,))
    return (messages + own_weight[:, None] * h) / total[:, None]


BASELINE_LAYERS: dict[str, type[nn.Module]] = {
    "gcn": GCNLayer,
    "gin": GINLayer,
    "sage": SAGELayer,
    "gat": GATLayer,
}


class MPNNStack(nn.Module):
    """`num_layers` baseline layers of one kind with `activation` after each."""

    kind: str
    hidden: int
    num_layers: int
    activation: Callable[[Array], Array] = nn.relu

    @nn.compact
    def __call__(self, graph: Graph, x: Array) -> Array:
        if self.kind not in BASELINE_LAYERS:
            raise ValueError(
                f"unknown baseline {self.kind!r}; valid baselines: {', '.join(BASELINE_LAYERS)}"
            )
        for _ in range(self.num_layers):
            x = self.activation(BASELINE_LAYERS[self.kind](self.hidden)(graph, x))
        return x


# --- readouts ----------------------------------------------------------------------


class NodeReadout(nn.Module):
    """Node-level MLP head: `[N, d] -> [N, out]`."""

    features: Sequence[int]
    weight_init: str = "flax"  # or "torch": see `dense`

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple, x: Array) -> Array:
        return MLP(self.features, weight_init=self.weight_init)(x)


def pool_nodes(graph: jraph.GraphsTuple, x: Array, pooling: Sequence[str]) -> Array:
    """Concatenated per-graph poolings of `x`: `[G, d * len(pooling)]`.

    Poolings: "sum", "max", "mean". Padding nodes sit in the padding graph only, so
    real graphs never see them; empty graphs pool to 0.
    """
    index = node_graph_index(graph, x.shape[0])
    n_graph = graph.n_node.shape[0]
    pooled = []
    for kind in pooling:
        if kind == "sum":
            pooled.append(jax.ops.segment_sum(x, index, num_segments=n_graph))
        elif kind == "mean":
            counts = jnp.maximum(graph.n_node, 1).astype(x.dtype)[:, None]
            pooled.append(jax.ops.segment_sum(x, index, num_segments=n_graph) / counts)
        elif kind == "max":
            peak = jax.ops.segment_max(x, index, num_segments=n_graph)
            pooled.append(jnp.where(jnp.isfinite(peak), peak, 0.0))
        else:
            raise ValueError(f"unknown pooling {kind!r}; valid poolings: sum, max, mean")
    return jnp.concatenate(pooled, axis=-1)


class GraphReadout(nn.Module):
    """Graph-level head: poolings concatenated, then an MLP. `[N, d] -> [G, out]`."""

    features: Sequence[int]
    pooling: Sequence[str] = ("sum", "max", "mean")
    weight_init: str = "flax"  # or "torch": see `dense`

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple, x: Array) -> Array:
        return MLP(self.features, weight_init=self.weight_init)(pool_nodes(graph, x, self.pooling))


class Model(nn.Module):
    """`readout(graph, processor(graph, encoder(graph)))`."""

    encoder: nn.Module
    processor: nn.Module
    readout: nn.Module

    def __call__(self, graph: jraph.GraphsTuple) -> Array:
        x = self.encoder(graph)
        x = self.processor(graph, x)
        return self.readout(graph, x)
