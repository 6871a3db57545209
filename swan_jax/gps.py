"""GraphGPS (Rampasek et al., NeurIPS 2022) in Flax: local message passing + global
attention per graph, over the same padded batches as every other model.

One GPS layer (GraphGPS's `GPSLayer`), `X [N, d]` in, `X [N, d]` out:

    X_M = Norm(X + Local(X, E))                  GINE, or GatedGCN (updates E too)
    X_T = Norm(X + Attention(X))                 multi-head, within each graph only
    X'  = Norm((X_M + X_T) + W2 ReLU(W1 (X_M + X_T)))      W1: d -> 2d, W2: 2d -> d

Attention runs over a dense `[graphs, max_nodes, d]` view of the batch, built from the
node-to-graph index (`graph_positions`): graph `g`'s nodes are rows `offset_g ..
offset_g + n_g - 1` of the batch, so node `i` sits at `[g(i), i - offset_g(i)]`; keys
past a graph's node count are masked. No attention crosses graphs, padding nodes (in
the padding graph) never reach a real graph, and the cost is `sum_g max_nodes^2`, not
`N^2`. `max_nodes` is static (the largest real graph of the data); a real node beyond
it stops the program with one line (`eqx.error_if`). `max_graphs` (static, default every
graph slot of the batch) bounds the view's graphs: 1 for one full graph (Tolokers), whose
batch's second slot is the padding graph, so the view is not twice the graph.

Inputs (`GPSEncoder`): the node columns `swan_jax.data.positional.with_positional_encodings`
appends, `[features | LapPE vectors (k) | LapPE values (k) | RWSE (s) | real (1)]`.
LapPE goes through GraphGPS's DeepSet encoder (`[N, k, 2] -> Linear(2, 2 p) -> ReLU ->
Linear(2 p, p) -> ReLU`, frequencies past the graph's node count zeroed, summed over
`k`), RWSE through `Linear(s, p)`; the features' own encoder gives the remaining
`hidden - p` channels (GraphGPS's `dim_emb - dim_pe`).

Choices and where they come from (`docs/gps.md` has the table):

* GraphGPS's LRGB configurations (`configs/GPS/peptides-func-GPS.yaml`,
  `peptides-struct-GPS.yaml`): GatedGCN + Transformer, 4 layers, 4 heads, hidden 96,
  LapPE (`max_freqs` 10, `dim_pe` 16, DeepSet of 2 layers), `attn_dropout` 0.5,
  BatchNorm, mean pooling, AdamW 3e-4 with a cosine schedule.
* Graph transfer on request (`graphgps`; Figure 3's GPS is the authors' own model,
  `swan_jax.models.gpsconv`): the authors' baseline grid (`graph_transfer/conf.py`: 64
  channels, `distance` layers), GINE's edge-free form (GIN, PyG's `GPSConv` example), 4
  heads, LapPE `k = 8`, `dim_pe` 16.
* Normalisation is LayerNorm (GraphGPS's `layer_norm: True` option), not BatchNorm:
  swan-jax's training loop keeps no mutable model state (running statistics) and batch
  statistics would make a graph's prediction depend on its batch mates. For the same
  reason (no random key reaches the model in training), the sweeps train without dropout
  and without LapPE sign flips; `deterministic=False` with a `"dropout"` rng turns both
  on for callers that pass one.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from swan_jax.encoders import AtomEncoder
from swan_jax.graph import as_operator
from swan_jax.models import MLP, node_graph_index
from swan_jax.ogb_vocabulary import BOND_FEATURE_DIMS

Array = jax.Array
LOCAL_KINDS = ("gine", "gatedgcn")


def positional_width(lap_k: int, rwse_steps: int) -> int:
    """Node columns after the features: `2 lap_k + rwse_steps + 1` (the real-node flag);
    the same count as `swan_jax.data.positional.positional_width` (the core cannot import
    `data`)."""
    return 2 * lap_k + rwse_steps + 1


def real_nodes(graph: jraph.GraphsTuple) -> Array:
    """`[N]` True on real nodes: the last node column (1 on real nodes, 0 on padding)."""
    return graph.nodes[:, -1] > 0.5


def graph_positions(graph: jraph.GraphsTuple, num_nodes: int) -> tuple[Array, Array]:
    """`(graph index [N], position within its graph [N])` of every node row."""
    index = node_graph_index(graph, num_nodes)
    offsets = jnp.cumsum(graph.n_node) - graph.n_node
    return index, jnp.arange(num_nodes) - offsets[index]


class GraphAttention(nn.Module):
    """Multi-head self-attention among the nodes of each graph: `[N, d] -> [N, d]`.

    Flax's `MultiHeadDotProductAttention` over the dense `[G, max_nodes, d]` view (module
    docstring; `G = max_graphs` or every graph slot); rows outside the view (padding
    nodes only, checked) get 0.
    """

    num_heads: int
    max_nodes: int
    dropout: float = 0.0
    deterministic: bool = True
    max_graphs: int | None = None

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple, x: Array) -> Array:
        dense, valid, back = dense_view(graph, x, self.max_nodes, self.max_graphs)
        mask = nn.make_attention_mask(valid, valid)  # [G, 1, M, M]
        out = nn.MultiHeadDotProductAttention(
            num_heads=self.num_heads, dropout_rate=self.dropout,
            deterministic=self.deterministic, name="attention")(dense, dense, mask=mask)
        return back(out)


def dense_view(graph: jraph.GraphsTuple, x: Array, max_nodes: int,
               max_graphs: int | None = None) -> tuple[Array, Array, Callable[[Array], Array]]:
    """`x [N, d]` as the dense per-graph view `[G, max_nodes, d]` (module docstring; `G =
    max_graphs` or every graph slot), `valid [G, max_nodes]` (True where a slot holds one
    of its graph's nodes) and `back: [G, max_nodes, d'] -> [N, d']` (rows outside the view,
    padding nodes only, get 0). A real node outside the view stops the program in one
    line naming the setting (`eqx.error_if`)."""
    n, d = x.shape
    n_graph = graph.n_node.shape[0] if max_graphs is None else max_graphs
    index, pos = graph_positions(graph, n)
    real = real_nodes(graph)
    x = eqx.error_if(x, jnp.any(real & (pos >= max_nodes)),
                     f"a graph has more nodes than GPS's max_nodes={max_nodes}; build "
                     f"GPS with max_nodes at least the largest graph's node count")
    x = eqx.error_if(x, jnp.any(real & (index >= n_graph)),
                     f"a batch holds more graphs than GPS's max_graphs={max_graphs}; "
                     f"build GPS with max_graphs at least the graphs per batch")
    dense = jnp.zeros((n_graph, max_nodes, d), x.dtype).at[index, pos].set(x, mode="drop")
    m = min(n_graph, graph.n_node.shape[0])
    counts = jnp.zeros(n_graph, graph.n_node.dtype).at[:m].set(graph.n_node[:m])
    valid = jnp.arange(max_nodes)[None, :] < counts[:, None]

    def back(out: Array) -> Array:
        return out.at[index, pos].get(mode="fill", fill_value=0.0)

    return dense, valid, back


def _receive(graph: jraph.GraphsTuple, messages: Array, num_nodes: int) -> Array:
    """Sum of per-edge `messages [E, d]` at their receivers."""
    return jax.ops.segment_sum(messages, graph.receivers, num_segments=num_nodes)


class GINELocal(nn.Module):
    """GINE (Hu et al. 2020) as GraphGPS builds it: `MLP(x_u + sum_v ReLU(x_v + e_vu))`,
    `MLP = Linear, ReLU, Linear`; without edge features GIN's `MLP(x_u + sum_v x_v)`
    (read through the graph protocol, as the GIN baseline)."""

    hidden: int

    @nn.compact
    def __call__(self, graph, x: Array, e: Array | None) -> tuple[Array, Array | None]:
        if e is None:
            neighbours = as_operator(graph).aggregate(x)
        else:
            neighbours = _receive(graph, nn.relu(x[graph.senders] + e), x.shape[0])
        return MLP((self.hidden, self.hidden))(x + neighbours), e


class GatedGCNLocal(nn.Module):
    """Residual gated graph convnet (Bresson & Laurent 2017), GraphGPS's `GatedGCNLayer`:

        e'_vu = D x_u + E x_v + C e_vu,   s_vu = sigmoid(e'_vu)
        x'_u  = A x_u + sum_v s_vu * B x_v / (sum_v s_vu + 1e-6)
        x <- x + ReLU(Norm(x')),  e <- e + ReLU(Norm(e'))

    (the residual inside, as GraphGPS, which then adds none of its own for this block).
    Edges without features start from zeros.
    """

    hidden: int
    norm: Callable[[], nn.Module]

    @nn.compact
    def __call__(self, graph, x: Array, e: Array | None) -> tuple[Array, Array]:
        n = x.shape[0]
        if e is None:
            e = jnp.zeros((graph.senders.shape[0], self.hidden), x.dtype)
        ax, bx, dx, ex = (nn.Dense(self.hidden, name=k)(x) for k in "ABDE")
        gate = dx[graph.receivers] + ex[graph.senders] + nn.Dense(self.hidden, name="C")(e)
        sigma = nn.sigmoid(gate)
        num = _receive(graph, sigma * bx[graph.senders], n)
        den = _receive(graph, sigma, n)
        h = ax + num / (den + 1e-6)
        return x + nn.relu(self.norm()(h)), e + nn.relu(self.norm()(gate))


class GPSLayer(nn.Module):
    """One GPS layer (module docstring): local block, attention, feed-forward."""

    hidden: int
    num_heads: int
    max_nodes: int
    local: str = "gine"
    norm: str = "layer"
    dropout: float = 0.0
    attn_dropout: float = 0.0
    deterministic: bool = True
    max_graphs: int | None = None

    def _norm(self) -> nn.Module:
        return nn.LayerNorm() if self.norm == "layer" else _Identity()

    def _drop(self, x: Array) -> Array:
        return nn.Dropout(self.dropout, deterministic=self.deterministic)(x)

    @nn.compact
    def __call__(self, graph, x: Array, e: Array | None) -> tuple[Array, Array | None]:
        if self.local == "gatedgcn":
            x_local, e = GatedGCNLocal(self.hidden, self._norm)(graph, x, e)
        else:
            h, e = GINELocal(self.hidden)(graph, x, e)
            x_local = self._norm()(x + self._drop(h))
        attn = GraphAttention(self.num_heads, self.max_nodes, self.attn_dropout,
                              self.deterministic, self.max_graphs)(graph, x)
        h = x_local + self._norm()(x + self._drop(attn))
        ff = nn.Dense(self.hidden)(self._drop(nn.relu(nn.Dense(2 * self.hidden)(h))))
        return self._norm()(h + self._drop(ff)), e


class _Identity(nn.Module):
    @nn.compact
    def __call__(self, x: Array) -> Array:
        return x


NORMS = ("layer", "none")


class GPSStack(nn.Module):
    """`num_layers` GPS layers: the processor of a `swan_jax.models.Model`, `(graph, x
    [N, hidden]) -> [N, hidden]`.

    Attributes:
      hidden: channels (divisible by `num_heads`).
      num_layers: GPS layers.
      max_nodes: the largest real graph's node count (static; see the module docstring).
      num_heads: attention heads (GraphGPS: 4).
      local: "gine" (GIN without edge features) or "gatedgcn".
      edge_encoder: `GraphsTuple -> [E, hidden]` of the edge features, or None (no edge
        features: GINE is GIN, GatedGCN's edges start at 0).
      norm: "layer" (LayerNorm) or "none".
      dropout, attn_dropout: used only with `deterministic=False` (a "dropout" rng).
      max_graphs: graphs of the attention's dense view (None: every graph slot).
    """

    hidden: int
    num_layers: int
    max_nodes: int
    num_heads: int = 4
    local: str = "gine"
    edge_encoder: nn.Module | None = None
    norm: str = "layer"
    dropout: float = 0.0
    attn_dropout: float = 0.0
    deterministic: bool = True
    max_graphs: int | None = None

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple, x: Array) -> Array:
        check_gps(hidden=self.hidden, num_heads=self.num_heads, local=self.local,
                  norm=self.norm, max_nodes=self.max_nodes, width=x.shape[-1])
        e = None if self.edge_encoder is None else self.edge_encoder(graph)
        for _ in range(self.num_layers):
            x, e = GPSLayer(self.hidden, self.num_heads, self.max_nodes, self.local,
                            self.norm, self.dropout, self.attn_dropout,
                            self.deterministic, self.max_graphs)(graph, x, e)
        return x


def check_gps(*, hidden: int, num_heads: int, local: str, norm: str, max_nodes: int,
              width: int | None = None) -> None:
    """Raise ValueError in one line for settings GPS cannot run with."""
    if local not in LOCAL_KINDS:
        raise ValueError(f"unknown GPS local block {local!r}; valid: {', '.join(LOCAL_KINDS)}")
    if norm not in NORMS:
        raise ValueError(f"unknown GPS norm {norm!r}; valid: {', '.join(NORMS)}")
    if num_heads < 1 or hidden % num_heads:
        raise ValueError(f"GPS needs hidden ({hidden}) divisible by num_heads ({num_heads})")
    if max_nodes < 1:
        raise ValueError(f"GPS needs max_nodes >= 1 (the largest graph), got {max_nodes}")
    if width is not None and width != hidden:
        raise ValueError(f"GPS's input has {width} channels but hidden={hidden}; the "
                         f"encoder must give hidden channels")


class GPSEncoder(nn.Module):
    """Node features and positional encodings -> `[N, hidden]` (module docstring).

    Attributes:
      features: the features' encoder, `GraphsTuple -> [N, hidden - pe_dim * parts]`
        (it sees the feature columns only).
      lap_k, rwse_steps: the columns `with_positional_encodings` appended (0: none).
      pe_dim: channels of each encoding (GraphGPS's `dim_pe`: 16).
      deterministic: False flips each LapPE eigenvector's sign at random (one draw per
        batch and frequency, as GraphGPS), from the "dropout" rng.
    """

    features: nn.Module
    lap_k: int
    rwse_steps: int = 0
    pe_dim: int = 16
    deterministic: bool = True

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple) -> Array:
        k, s = self.lap_k, self.rwse_steps
        width = positional_width(k, s)
        nodes = jnp.asarray(graph.nodes)
        if nodes.ndim != 2 or nodes.shape[1] <= width:
            raise ValueError(f"GPSEncoder expects node features followed by {width} "
                             f"positional columns (swan_jax.data.positional."
                             f"with_positional_encodings(lap_k={k}, rwse_steps={s})), got "
                             f"nodes of shape {nodes.shape}")
        features, pe = nodes[:, :-width], nodes[:, -width:]
        parts = [self.features(graph._replace(nodes=features))]
        if k:
            parts.append(self._lappe(graph, pe[:, :k], pe[:, k:2 * k]))
        if s:
            parts.append(nn.Dense(self.pe_dim, name="rwse")(pe[:, 2 * k:2 * k + s]))
        return jnp.concatenate(parts, axis=-1)

    def _lappe(self, graph, vectors: Array, values: Array) -> Array:
        """GraphGPS's DeepSet LapPE encoder: `[N, k] x 2 -> [N, pe_dim]`."""
        if not self.deterministic:
            flip = jax.random.bernoulli(self.make_rng("dropout"), 0.5, (self.lap_k,))
            vectors = vectors * jnp.where(flip, -1.0, 1.0)
        pairs = jnp.stack([vectors, values], axis=-1)  # [N, k, 2]
        h = nn.relu(nn.Dense(2 * self.pe_dim, name="lappe_in")(pairs))
        h = nn.relu(nn.Dense(self.pe_dim, name="lappe_out")(h))
        index = node_graph_index(graph, vectors.shape[0])
        present = jnp.arange(self.lap_k)[None, :] < graph.n_node[index][:, None]  # [N, k]
        return jnp.sum(jnp.where(present[..., None], h, 0.0), axis=1)


def gps_feature_width(hidden: int, lap_k: int, rwse_steps: int, pe_dim: int) -> int:
    """Channels left to the features' own encoder: `hidden - pe_dim * (encodings used)`."""
    width = hidden - pe_dim * (int(lap_k > 0) + int(rwse_steps > 0))
    if width < 1:
        raise ValueError(f"GPS: hidden={hidden} leaves no channel for the node features "
                         f"beside positional encodings of {pe_dim} channels each; raise "
                         f"hidden or lower pe_dim")
    return width


class BondEncoder(nn.Module):
    """OGB's `BondEncoder` on `graph.edges` (integer bond codes `[E, 3]`): the sum of one
    embedding per code column, `[E, hidden]` (GraphGPS's `edge_encoder_name: Bond`)."""

    hidden: int

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple) -> Array:
        if graph.edges is None:
            raise ValueError("BondEncoder needs edge features (OGB bond codes [E, 3]); "
                             "this graph has none")
        return AtomEncoder(self.hidden, BOND_FEATURE_DIMS, name="bonds")(
            graph._replace(nodes=graph.edges))
