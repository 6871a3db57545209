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


def masked_attention(query: Array, key: Array, value: Array, mask: Array | None = None,
                     dtype: DTypeLike | None = None) -> Array:
    """`softmax(Q K^T / sqrt(D)) V`, masked keys at the dtype's minimum: flax's
    `dot_product_attention` (no dropout, no bias) with `softmax_rows`. `query`, `key`,
    `value` `[..., L, H, D]`, `mask` broadcastable to `[..., H, L, L]`; out `[..., L, H, D]`.
    """
    scale = jnp.sqrt(query.shape[-1]).astype(query.dtype)
    scores = jnp.einsum("...qhd,...khd->...hqk", query / scale, key)
    if mask is not None:
        scores = jnp.where(mask, scores, jnp.finfo(scores.dtype).min)
    return jnp.einsum("...hqk,...khd->...qhd", softmax_rows(scores), value)


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
            out = attention(x[None], mask=nn.make_attention_mask(real[None], real[None]))[0]
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
