"""Flax modules around the pure SWAN core: encoders, ODE block, baselines, readouts.

A model is `encoder -> processor -> readout` over a padded, batched
`jraph.GraphsTuple` or its `PreparedGraph` (`Model`). Parameters stay plain pytrees
(Flax variable dicts), so `jax.vmap` over `Model.init` / `Model.apply` trains many
seeds in one program. The baselines read the graph through the protocol of
`swan_jax.graph` (`as_operator`): on a `PreparedGraph` they aggregate with the same
gather-only slot kernels as SWAN (`swan_jax.graph.slots`), so comparisons stay fair.

Beside them, `nnx`: the same SWAN block as a `flax.nnx` module (`models.nnx.SWANBlock`),
imported on its own (`from swan_jax.models import nnx`), so `flax.nnx` loads only then;
and `gpsconv`: the SWAN authors' graph-transfer GPS (PyG's `GPSConv` with `GCNConv`
inside, `models.gpsconv.GPSConvStack`), imported on its own as it stands on `swan_jax.gps`;
and `formation`: `SWANBlock` parameters saved under swan-jax 0.1.0's `V - V^T`, `Z + Z^T`,
converted to compute the same function (what opens a checkpoint or an export reads it).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
from jax.typing import DTypeLike

from swan_jax.config import SWANConfig
from swan_jax.field import init_params
from swan_jax.graph import Graph, as_operator, safe_inverse
from swan_jax.solvers import DEFAULT_INTEGRATOR, solve

Array = jax.Array


def node_graph_index(graph: jraph.GraphsTuple, num_nodes: int) -> Array:
    """`[N]` index of the graph each node row belongs to."""
    n_graph = graph.n_node.shape[0]
    return jnp.repeat(jnp.arange(n_graph), graph.n_node, total_repeat_length=num_nodes)


INITS = ("flax", "torch")


def dense(features: int, fan_in: int, init: str = "flax", *, name: str | None = None,
          use_bias: bool = True) -> nn.Dense:
    """`nn.Dense` with Flax's initialisation (LeCun-normal kernel, zero bias) or, `init=
    "torch"`, PyTorch's `nn.Linear` default (kernel and bias uniform in +-1/sqrt(fan_in)),
    which the authors' code ran with (it matters on graph transfer: RESULTS.md); PyG's
    `Linear` draws the same."""
    if init == "flax":
        return nn.Dense(features, use_bias=use_bias, name=name)
    if init != "torch":
        raise ValueError(f"unknown init {init!r}; valid: {', '.join(INITS)}")
    bound = 1.0 / math.sqrt(max(fan_in, 1))

    def uniform(key: Array, shape: Sequence[int], dtype: DTypeLike = jnp.float32) -> Array:
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return nn.Dense(features, use_bias=use_bias, kernel_init=uniform, bias_init=uniform,
                    name=name)


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


# Set by `parameters_only` while a caller initialises a model for its parameters alone.
_PARAMETERS_ONLY = contextvars.ContextVar("swan_jax_parameters_only", default=False)


@contextlib.contextmanager
def parameters_only() -> Iterator[None]:
    """Inside, `Module.init` (and `jax.eval_shape` of it) skips each `SWANBlock`'s ODE
    solve: the block creates its parameters and returns its input, which has the shape
    and dtype of the solve's output. The parameters are the ones a plain `init` gives
    (the solve creates none and draws no random numbers); the init's *output* is not
    the model's, so use it for parameters only. Flax's `init` otherwise traces the whole
    forward pass, the solve included: about a fifth of a tiny training run's trace and
    compile time (`swan_jax.train` initialises every run inside it)."""
    token = _PARAMETERS_ONLY.set(True)
    try:
        yield
    finally:
        _PARAMETERS_ONLY.reset(token)


class SWANBlock(nn.Module):
    """The SWAN ODE block: `x(0) -> x(num_layers * epsilon)` via `solve`.

    Its parameters are the raw pytree of `swan_jax.init_params` under the name
    "field" (`W, V, Z, b`, plus the edge MLP of the `-learn` variants).
    """

    cfg: SWANConfig
    solver: str = DEFAULT_INTEGRATOR.solver  # the integrator's settings (`IntegratorConfig`)
    rtol: float = DEFAULT_INTEGRATOR.rtol
    atol: float = DEFAULT_INTEGRATOR.atol
    adjoint: str = DEFAULT_INTEGRATOR.adjoint
    max_steps: int | None = DEFAULT_INTEGRATOR.max_steps

    @nn.compact
    def __call__(self, graph: Graph, x: Array) -> Array:
        params = self.param("field", lambda key: init_params(key, x.shape[-1], self.cfg, x.dtype))
        if self.is_initializing() and _PARAMETERS_ONLY.get():
            return x  # see `parameters_only`
        out: Array = solve(
            params, graph, x, self.cfg, self.solver,
            rtol=self.rtol, atol=self.atol, adjoint=self.adjoint, max_steps=self.max_steps,
        )
        return out


# --- message-passing baselines (the paper's Figure 3 and Table 1), one layer each -------
#
# Each is the PyTorch Geometric convolution the authors' code runs (gravins/SWAN
# `graph_transfer/models/gnn_model.py`, gravins/Anti-SymmetricDGN
# `graph_prop_pred/models/dgn_GraphProp.py`): `GCNConv(C, C)`, `GINConv(Linear(C, C),
# train_eps=True)`, `SAGEConv(C, C)`, `GATConv(C, C)`, PyG's defaults, tested against PyG's
# outputs (`tests/test_baselines_pyg.py`). `weight_init="torch"` (the default) draws the
# weights as those modules do at construction; `"flax"`: Flax's LeCun-normal kernels and
# zero biases.


def glorot(fan_in: int, fan_out: int) -> Callable[..., Array]:
    """PyG's `inits.glorot`: uniform in `+-sqrt(6 / (fan_in + fan_out))`."""
    bound = math.sqrt(6.0 / max(fan_in + fan_out, 1))

    def init(key: Array, shape: Sequence[int], dtype: DTypeLike = jnp.float32) -> Array:
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


def _kernel_init(weight_init: str, fan_in: int, fan_out: int) -> Callable[..., Array]:
    """Glorot (`"torch"`: PyG's `Linear(weight_initializer='glorot')`) or LeCun-normal."""
    if weight_init not in INITS:
        raise ValueError(f"unknown init {weight_init!r}; valid: {', '.join(INITS)}")
    return glorot(fan_in, fan_out) if weight_init == "torch" else nn.initializers.lecun_normal()


class GCNLayer(nn.Module):
    """Kipf & Welling, PyG's `GCNConv(C, hidden)`: `D^-1/2 (A + I) D^-1/2 X W + b`, `[N, C]
    -> [N, hidden]`, degrees counting the self-loop, the bias added after the propagation
    (it reaches every node once, whatever its degree). `W` ("lin") Glorot-uniform, `b`
    zeros. The one GCN of the package: the baselines, GraphCON's coupling and the
    authors' GPS (`models.gpsconv`) use it."""

    hidden: int
    weight_init: str = "torch"

    @nn.compact
    def __call__(self, graph: Graph, x: Array) -> Array:
        kernel_init = _kernel_init(self.weight_init, x.shape[-1], self.hidden)
        h = nn.Dense(self.hidden, use_bias=False, kernel_init=kernel_init, name="lin")(x)
        layout = as_operator(graph)
        inv_sqrt = safe_inverse(layout.in_degree(num_nodes=x.shape[0], dtype=x.dtype) + 1.0,
                                0.5)
        out = (layout.aggregate(h, row_scale=inv_sqrt, neighbor_scale=inv_sqrt)
               + h * (inv_sqrt ** 2)[:, None])
        bias = self.param("bias", nn.initializers.zeros, (self.hidden,), x.dtype)
        # Stored once (slots): the activation after the layer and its derivative read it.
        stored: Array = layout.store(out + bias)
        return stored


class GINLayer(nn.Module):
    """Xu et al., PyG's `GINConv(Linear(C, hidden), train_eps=True)` as the authors build it:
    `Linear((1 + eps) x_u + sum_v x_v)`, one `Linear` (`"nn"`, `nn.Linear`'s default init),
    `eps` learned from 0."""

    hidden: int
    weight_init: str = "torch"

    @nn.compact
    def __call__(self, graph: Graph, x: Array) -> Array:
        eps = self.param("eps", nn.initializers.zeros, (), x.dtype)
        h = (1.0 + eps) * x + as_operator(graph).aggregate(x)
        out: Array = dense(self.hidden, x.shape[-1], self.weight_init, name="nn")(h)
        return out


class SAGELayer(nn.Module):
    """Hamilton et al., PyG's `SAGEConv(C, hidden)` (mean aggregator, root weight):
    `W_l mean_v x_v + b + W_r x_u`; `"lin_l"` (with the bias) reads the neighbour mean
    (0 for a node without in-neighbours), `"lin_r"` the node; both `Linear`'s default
    init (uniform in `+-1/sqrt(C)`, the bias too)."""

    hidden: int
    weight_init: str = "torch"

    @nn.compact
    def __call__(self, graph: Graph, x: Array) -> Array:
        layout = as_operator(graph)
        inv = safe_inverse(layout.in_degree(num_nodes=x.shape[0], dtype=x.dtype))
        neighbours = layout.aggregate(x, row_scale=inv)  # D^-1 A X: the neighbour mean
        fan_in = x.shape[-1]
        lin_l = dense(self.hidden, fan_in, self.weight_init, name="lin_l")
        root = dense(self.hidden, fan_in, self.weight_init, name="lin_r", use_bias=False)
        out: Array = lin_l(neighbours) + root(x)
        return out


class GATLayer(nn.Module):
    """Velickovic et al., PyG's `GATConv(C, hidden)`: one head, attention over the
    in-neighbours and the node itself (a self-loop added), logits
    `leaky_relu(a_src . h_v + a_dst . h_u, 0.2)`, `h = X W`, the bias after the
    aggregation. `W` ("lin"), `a_src`, `a_dst` Glorot-uniform (PyG's shapes `[C, hidden]`
    and `[1, 1, hidden]`), the bias zeros."""

    hidden: int
    weight_init: str = "torch"

    @nn.compact
    def __call__(self, graph: Graph, x: Array) -> Array:
        kernel_init = _kernel_init(self.weight_init, x.shape[-1], self.hidden)
        att_init = _kernel_init(self.weight_init, 1, self.hidden)
        h = nn.Dense(self.hidden, use_bias=False, kernel_init=kernel_init, name="lin")(x)
        a_src = h @ self.param("att_src", att_init, (self.hidden, 1), x.dtype)[:, 0]
        a_dst = h @ self.param("att_dst", att_init, (self.hidden, 1), x.dtype)[:, 0]
        bias = self.param("bias", nn.initializers.zeros, (self.hidden,), x.dtype)
        layout = as_operator(graph)
        # Stored once (slots): the activation after the layer and its derivative read it.
        out: Array = layout.store(layout.attention(a_src, a_dst, h) + bias)
        return out


BASELINE_LAYERS: dict[str, type[nn.Module]] = {
    "gcn": GCNLayer,
    "gin": GINLayer,
    "sage": SAGELayer,
    "gat": GATLayer,
}


class MPNNStack(nn.Module):
    """`num_layers` baseline layers of one kind with `activation` after each (the authors'
    transfer and GraphProp models: tanh); `weight_init`: see the layers."""

    kind: str
    hidden: int
    num_layers: int
    activation: Callable[[Array], Array] = nn.relu
    weight_init: str = "torch"

    @nn.compact
    def __call__(self, graph: Graph, x: Array) -> Array:
        if self.kind not in BASELINE_LAYERS:
            raise ValueError(
                f"unknown baseline {self.kind!r}; valid baselines: {', '.join(BASELINE_LAYERS)}"
            )
        layer = BASELINE_LAYERS[self.kind]
        for _ in range(self.num_layers):
            x = self.activation(layer(self.hidden, weight_init=self.weight_init)(graph, x))
        return x


# Couplings F_theta of GraphCON: the message-passing layer whose output drives the
# oscillators (Rusch et al. 2022, Sec. 2: "GraphCON-GCN" and "GraphCON-GAT").
GRAPHCON_COUPLINGS = ("gcn", "gat")


class GraphCONBlock(nn.Module):
    """GraphCON (Rusch et al., ICML 2022), graph-coupled oscillators, `[N, d] -> [N, d]`.

    The second-order ODE `X'' = sigma(F_theta(X)) - gamma X - alpha X'` written as the
    first-order system in `(X, Y = X')` and discretised as in that paper (its eq. 3),
    one step per layer with step `dt = epsilon`:

        Y_{n+1} = Y_n + dt [sigma(F_theta(X_n)) - gamma X_n - alpha Y_n]
        X_{n+1} = X_n + dt Y_{n+1}

    from `X_0 = Y_0 = x` (the encoded input, as the authors' code starts). `F_theta` is
    one `GCNLayer` (`coupling="gcn"`, PyG's `GCNConv`: `D^-1/2 (A + I) D^-1/2 X W + b`)
    or `GATLayer` (`"gat"`) whose weights all layers share, as GraphCON's; `sigma` is ReLU
    by default (the authors' GraphCON-GCN). Returns `X_L`. `epsilon`, `gamma`, `alpha` may be traced
    scalars (a vmapped grid). Padding rows stay apart: every term is per node or a
    message along real edges.
    """

    num_layers: int
    epsilon: float | Array = 1.0
    gamma: float | Array = 1.0
    alpha: float | Array = 1.0
    coupling: str = "gcn"
    activation: Callable[[Array], Array] = nn.relu

    @nn.compact
    def __call__(self, graph: Graph, x: Array) -> Array:
        if self.coupling not in GRAPHCON_COUPLINGS:
            raise ValueError(f"unknown GraphCON coupling {self.coupling!r}; valid couplings: "
                             f"{', '.join(GRAPHCON_COUPLINGS)}")
        layer = BASELINE_LAYERS[self.coupling](x.shape[-1])  # one F_theta for every step
        dt = jnp.asarray(self.epsilon, x.dtype)
        y = x
        for _ in range(self.num_layers):
            y = y + dt * (self.activation(layer(graph, x)) - self.gamma * x - self.alpha * y)
            x = x + dt * y
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
        out: Array = self.readout(graph, x)
        return out
