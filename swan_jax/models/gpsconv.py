"""PyG's `GPSConv` with a `GCNConv` inside, in Flax: the SWAN authors' GPS on graph transfer.

The authors' `GPS_Model` (`graph_transfer/models/gnn_model.py` of github.com/gravins/SWAN)
is `Linear(1 -> 64)`, then per layer `tanh(GPSConv(64, GCNConv(64, 64), heads=2,
attn_dropout=0, norm='layer')(x, edge_index))`, then `Linear(64 -> 1)`: no positional
encoding, no dropout. One `GPSConv` (PyG 2.3 to 2.8, `torch_geometric/nn/conv/gps_conv.py`),
`X [N, C]` in and out:

    H_L = Norm1(X + GCN(X))                   GCN(X) = D^-1/2 (A + I) D^-1/2 X W + b
    H_A = Norm2(X + MHA(X))                   2 heads: softmax(Q K^T / sqrt(C / 2)) V W_o
    H   = H_L + H_A
    X'  = Norm3(H + W2 ReLU(W1 H + b1) + b2)  W1: C -> 2C, W2: 2C -> C

(`D` counts the self-loop; the GCN's bias is added after the propagation, as PyG's: the
package's one GCN, `swan_jax.models.GCNLayer`.)
`Norm` is PyG's `LayerNorm(C)` as `normalization_resolver('layer')` builds it: mode
"graph", one mean and one spread over all nodes and channels of a group, then a learned
per-channel scale and shift. `group` says which nodes the attention and the statistics
span:

* `"batch"` (the authors' code): their `forward` calls `conv(x, edge_index)` without the
  batch vector, so the attention runs over every node of the mini-batch (512 graphs at
  their batch size: graphs attend to each other) and `Norm` is `(x - mean) / (std + eps)`
  over the whole mini-batch (`std` the population one, `eps = 1e-5`).
* `"graph"` (`GPSConv(x, edge_index, batch)`): attention within each graph
  (`to_dense_batch` with a key padding mask) and `Norm` per graph,
  `(x - mean_g) / sqrt(var_g + eps)`.

Padding: the input's last node column is the real-node flag (1 on real nodes, 0 on
padding rows; `swan_jax.data.positional.with_positional_encodings(data, lap_k=0)` appends
it), so that padding rows count in no statistics nor as attention keys. The
encoder reads the columns before it (`WithoutFlag`). At line k = 3 (64 channels, 3
layers) the model has the authors' 113,473 parameters; `tests/test_gps.py` checks its
outputs against PyG's on fixed weights.

`weight_init="torch"` draws every weight as the PyTorch modules do at construction (the
authors' runs): GCN's `W` Glorot-uniform, bias 0; the attention's `W_q, W_k, W_v` one
Xavier-uniform `[3C, C]` matrix, their biases 0, `W_o` uniform in +-1/sqrt(C), its bias
0; the MLP's `nn.Linear` defaults; LayerNorm 1 and 0. `"flax"`: Flax's defaults.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
from jax.typing import DTypeLike

from swan_jax.gps import dense_view, real_nodes
from swan_jax.models import INITS, GCNLayer, dense, node_graph_index

Array = jax.Array
GROUPS = ("batch", "graph")
EPS = 1e-5  # PyG's LayerNorm


def uniform(bound: float) -> Callable[..., Array]:
    """An initialiser uniform in `[-bound, bound]` whatever the shape."""

    def init(key: Array, shape: Sequence[int], dtype: DTypeLike = jnp.float32) -> Array:
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


def check_gpsconv(*, hidden: int, heads: int, group: str, max_nodes: int | None,
                  weight_init: str) -> None:
    """Raise ValueError in one line for settings the authors' GPS cannot run with."""
    if group not in GROUPS:
        raise ValueError(f"unknown GPSConv group {group!r}; valid: {', '.join(GROUPS)}")
    if heads < 1 or hidden % heads:
        raise ValueError(f"GPSConv needs hidden ({hidden}) divisible by heads ({heads})")
    if group == "graph" and (max_nodes is None or max_nodes < 1):
        raise ValueError(f"GPSConv with group='graph' needs max_nodes >= 1 (the largest "
                         f"graph), got {max_nodes}")
    if weight_init not in INITS:
        raise ValueError(f"unknown init {weight_init!r}; valid: {', '.join(INITS)}")


class WithoutFlag(nn.Module):
    """`encoder` on the node columns before the last (the real-node flag)."""

    encoder: nn.Module

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple) -> Array:
        shape = jnp.shape(graph.nodes)
        if len(shape) != 2 or shape[1] < 2:
            raise ValueError(f"the authors' GPS expects node features followed by the "
                             f"real-node flag (swan_jax.data.positional."
                             f"with_positional_encodings(data, lap_k=0)), got nodes of shape "
                             f"{shape}")
        out: Array = self.encoder(graph._replace(nodes=graph.nodes[:, :-1]))
        return out


class GraphLayerNorm(nn.Module):
    """PyG's `LayerNorm(C, mode="graph")` over `x [N, C]`: statistics over every entry of
    the real rows of the whole batch (`group="batch"`) or of each graph (`"graph"`);
    module docstring. Padding rows are normalised with their group's statistics and never
    enter them."""

    group: str

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple, x: Array, real: Array) -> Array:
        c = x.shape[-1]
        if self.group == "batch":
            count = jnp.maximum(jnp.sum(real), 1) * c
            mean = jnp.sum(jnp.where(real[:, None], x, 0.0)) / count
            x = x - mean
            std = jnp.sqrt(jnp.sum(jnp.where(real[:, None], x * x, 0.0)) / count)
            out = x / (std + EPS)
        else:
            index = node_graph_index(graph, x.shape[0])
            segments = graph.n_node.shape[0]
            count = (jnp.maximum(graph.n_node, 1) * c).astype(x.dtype)
            mean = jax.ops.segment_sum(x.sum(-1), index, num_segments=segments) / count
            x = x - mean[index][:, None]
            var = jax.ops.segment_sum((x * x).sum(-1), index, num_segments=segments) / count
            out = x / jnp.sqrt(var + EPS)[index][:, None]
        scale = self.param("scale", nn.initializers.ones, (c,), x.dtype)
        bias = self.param("bias", nn.initializers.zeros, (c,), x.dtype)
        return out * scale + bias


@jax.custom_vjp
def softmax_rows(scores: Array) -> Array:
    """`softmax(scores)` over the last axis, whose VJP `p * (g - <g, p>)` takes the row
    sums `<g, p>` as one batched dot. Autodiff's VJP of `jax.nn.softmax` gives the same
    numbers, but XLA:CPU compiled its row reduction over `[runs, heads, N, N]` as 54% of a
    Figure 3 GPS epoch; this VJP halves the epoch (`benchmarks/gps_attention.py`)."""
    return jax.nn.softmax(scores, axis=-1)


def _softmax_rows_fwd(scores: Array) -> tuple[Array, Array]:
    p = jax.nn.softmax(scores, axis=-1)
    return p, p


def _softmax_rows_bwd(p: Array, g: Array) -> tuple[Array]:
    return (p * (g - jnp.einsum("...k,...k->...", g, p)[..., None]),)


softmax_rows.defvjp(_softmax_rows_fwd, _softmax_rows_bwd)


# Query rows per block of the attention past `2 * ATTENTION_BLOCK` of them
# (`blocked_attention`); tests shrink it to run small graphs through the blocks.
ATTENTION_BLOCK = 256


def masked_attention(query: Array, key: Array, value: Array, mask: Array | None = None,
                     dtype: DTypeLike | None = None) -> Array:
    """`softmax(Q K^T / sqrt(D)) V`, masked keys at the dtype's minimum: flax's
    `dot_product_attention` (no dropout, no bias). `query`, `key`, `value`
    `[..., L, H, D]`, `mask` broadcastable to `[..., H, L, L]`; out `[..., L, H, D]`.
    Past `2 * ATTENTION_BLOCK` query rows, `blocked_attention`; else `whole_attention`.
    """
    if query.shape[-3] > 2 * ATTENTION_BLOCK:
        if mask is None:
            mask = jnp.ones((query.shape[-3], key.shape[-3]), bool)
        return blocked_attention(query, key, value, mask)
    return whole_attention(query, key, value, mask)


def whole_attention(query: Array, key: Array, value: Array,
                    mask: Array | None = None) -> Array:
    """`masked_attention` on whole `[..., H, L, L]` score arrays, with `softmax_rows`."""
    scale = jnp.sqrt(query.shape[-1]).astype(query.dtype)
    scores = jnp.einsum("...qhd,...khd->...hqk", query / scale, key)
    if mask is not None:
        scores = jnp.where(mask, scores, jnp.finfo(scores.dtype).min)
    return jnp.einsum("...hqk,...khd->...qhd", softmax_rows(scores), value)


# Why blocks: XLA:CPU writes the scores, their softmax and the backward's `[..., H, L, L]`
# arrays whole to memory (0.8 GB each for ring k = 5's 4 seeds), so the attention runs
# at memory speed; a block of rows stays in the caches (`benchmarks/gps_attention.py`).
# jax and flax have no such attention for a CPU (pallas's flash attention is GPU / TPU).
@jax.custom_vjp
def blocked_attention(query: Array, key: Array, value: Array, mask: Array) -> Array:
    """`whole_attention`'s numbers `ATTENTION_BLOCK` query rows at a time, forward and
    backward: per block `S = Q_b K^T / sqrt(D)` masked, `P = exp(S - m) / l` with the
    row max `m` and sum `l` kept, `O_b = P V`; the backward recomputes `P` from `m, l`:
    `dV += P^T G_b`, `dS = P * (G_b V^T - <G_b, O_b>)` (0 where masked),
    `dQ_b = dS K / sqrt(D)`, `dK += dS^T Q_b / sqrt(D)`. Shapes as `masked_attention`'s;
    `mask` (bool) is needed."""
    return _blocked_fwd(query, key, value, mask)[0]


def _blocks(x: Array, axis: int, fill: Any = 0) -> Array:
    """`x` with `axis` (of length L) padded with `fill` to whole blocks, split into
    `[blocks, ..., ATTENTION_BLOCK, ...]` (the blocks axis first)."""
    n = x.shape[axis]
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, -n % ATTENTION_BLOCK)
    x = jnp.pad(x, pad, constant_values=fill)
    axis %= x.ndim
    x = x.reshape(x.shape[:axis] + (-1, ATTENTION_BLOCK) + x.shape[axis + 1:])
    return jnp.moveaxis(x, axis, 0)


def _unblock(x: Array, axis: int, n: int) -> Array:
    """`_blocks`'s inverse: `[blocks, ..., B, ...]` back to `n` rows on `axis`."""
    x = jnp.moveaxis(x, 0, axis - 1 if axis < 0 else axis)
    axis = axis % (x.ndim - 1)
    x = x.reshape(x.shape[:axis] + (-1,) + x.shape[axis + 2:])
    return jax.lax.slice_in_dim(x, 0, n, axis=axis)


def _masked_scores(q_block: Array, key: Array, m_block: Array) -> Array:
    scale = jnp.sqrt(q_block.shape[-1]).astype(q_block.dtype)
    scores = jnp.einsum("...qhd,...khd->...hqk", q_block / scale, key)
    return jnp.where(m_block, scores, jnp.finfo(scores.dtype).min)


def _mask_rows(mask: Array, query: Array, key: Array) -> Array:
    """`mask` as `[..., H or 1, Lq, Lk]` of the query's rank (its rows sliced per block)."""
    mask = jnp.reshape(mask, (1,) * (query.ndim - mask.ndim) + mask.shape)
    return jnp.broadcast_to(mask, mask.shape[:-2] + (query.shape[-3], key.shape[-3]))


def _blocked_fwd(query: Array, key: Array, value: Array, mask: Array):
    mask = _mask_rows(mask, query, key)

    def block(args: tuple[Array, Array]) -> tuple[Array, Array, Array]:
        scores = _masked_scores(args[0], key, args[1])
        top = scores.max(-1, keepdims=True)
        e = jnp.exp(scores - top)
        total = e.sum(-1, keepdims=True)
        return jnp.einsum("...hqk,...khd->...qhd", e / total, value), top, total

    out, top, total = jax.lax.map(block, (_blocks(query, -3), _blocks(mask, -2, False)))
    out = _unblock(out, -3, query.shape[-3])
    return out, (query, key, value, mask, out, top, total)


def _blocked_bwd(residuals, g: Array):
    query, key, value, mask, out, top, total = residuals
    scale = jnp.sqrt(query.shape[-1]).astype(query.dtype)
    rows = jnp.einsum("...qhd,...qhd->...hq", g, out)[..., None]  # <G, O> per query row

    def block(carry: tuple[Array, Array], xs):
        d_key, d_value = carry
        q_b, g_b, m_b, top_b, total_b, rows_b = xs
        p = jnp.exp(_masked_scores(q_b, key, m_b) - top_b) / total_b
        d_value = d_value + jnp.einsum("...hqk,...qhd->...khd", p, g_b)
        d_p = jnp.einsum("...qhd,...khd->...hqk", g_b, value)
        d_s = jnp.where(m_b, p * (d_p - rows_b), 0.0) / scale
        d_key = d_key + jnp.einsum("...hqk,...qhd->...khd", d_s, q_b)
        return (d_key, d_value), jnp.einsum("...hqk,...khd->...qhd", d_s, key)

    xs = (_blocks(query, -3), _blocks(g, -3), _blocks(mask, -2, False), top, total,
          _blocks(rows, -2))
    (d_key, d_value), d_query = jax.lax.scan(
        block, (jnp.zeros_like(key), jnp.zeros_like(value)), xs)
    return _unblock(d_query, -3, query.shape[-3]), d_key, d_value, None


blocked_attention.defvjp(_blocked_fwd, _blocked_bwd)


class GlobalAttention(nn.Module):
    """`torch.nn.MultiheadAttention(C, heads)` among the real nodes of the batch (`group=
    "batch"`) or of each graph (`"graph"`, over `swan_jax.gps.dense_view`); padding rows
    get 0."""

    heads: int
    group: str
    max_nodes: int | None = None
    weight_init: str = "torch"

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple, x: Array, real: Array) -> Array:
        c = x.shape[-1]
        inits: dict[str, Any] = {}
        if self.weight_init == "torch":
            inits = {"kernel_init": uniform(math.sqrt(6.0 / (c + 3 * c))),
                     "out_kernel_init": uniform(1.0 / math.sqrt(c)),
                     "bias_init": nn.initializers.zeros,
                     "out_bias_init": nn.initializers.zeros}
        attention = nn.MultiHeadDotProductAttention(num_heads=self.heads, name="attention",
                                                    attention_fn=masked_attention, **inits)
        if self.group == "batch":
            # `[N, C]` without a batch axis of 1: with one, the blocked attention was no
            # faster than the whole one (a ring k = 5 epoch 12.00 s against 12.03 s;
            # docs/benchmarks-log.md, "The authors' GPS in blocks of query rows")
            out = attention(x, mask=nn.make_attention_mask(real, real))
        else:
            assert self.max_nodes is not None  # check_gpsconv
            view, valid, back = dense_view(graph, x, self.max_nodes)
            out = back(attention(view, mask=nn.make_attention_mask(valid, valid)))
        return jnp.where(real[:, None], out, 0.0)


class GPSConv(nn.Module):
    """One `torch_geometric.nn.GPSConv(C, GCNConv(C, C), heads, norm='layer')` layer,
    dropout 0 (module docstring): `(graph, x [N, C], real [N]) -> [N, C]`."""

    heads: int = 2
    group: str = "batch"
    max_nodes: int | None = None
    weight_init: str = "torch"

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple, x: Array, real: Array) -> Array:
        c = x.shape[-1]
        local = GraphLayerNorm(self.group, name="norm1")(
            graph, x + GCNLayer(c, weight_init=self.weight_init, name="conv")(graph, x), real)
        attention = GlobalAttention(self.heads, self.group, self.max_nodes,
                                    self.weight_init, name="attn")(graph, x, real)
        h = local + GraphLayerNorm(self.group, name="norm2")(graph, x + attention, real)
        hidden = nn.relu(dense(2 * c, c, self.weight_init)(h))
        mlp = dense(c, 2 * c, self.weight_init)(hidden)
        return GraphLayerNorm(self.group, name="norm3")(graph, h + mlp, real)


class GPSConvStack(nn.Module):
    """`num_layers` `GPSConv` layers, `activation` after each (the authors': tanh): the
    processor of a `swan_jax.models.Model`, `(graph, x [N, hidden]) -> [N, hidden]`. The
    graph's last node column is the real-node flag (module docstring).

    Attributes:
      num_layers: layers (graph transfer: the distance k).
      heads: attention heads (the authors': 2); they divide the channels.
      group: "batch" (the authors' code: attention and LayerNorm over the whole batch) or
        "graph" (per graph; needs `max_nodes`, the largest graph's node count).
      weight_init: "torch" (the PyTorch modules' initialisation) or "flax".
    """

    num_layers: int
    heads: int = 2
    group: str = "batch"
    max_nodes: int | None = None
    activation: Callable[[Array], Array] = nn.tanh
    weight_init: str = "torch"

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple, x: Array) -> Array:
        check_gpsconv(hidden=x.shape[-1], heads=self.heads, group=self.group,
                      max_nodes=self.max_nodes, weight_init=self.weight_init)
        real = real_nodes(graph)
        for i in range(self.num_layers):
            x = self.activation(GPSConv(self.heads, self.group, self.max_nodes,
                                        self.weight_init, name=f"layer{i}")(graph, x, real))
        return x
