"""Property-based checks (hypothesis) on random graphs, degenerate ones included.

Every generated batch (one to four graphs, twelve nodes at most) may hold graphs with
no nodes, a single node, no edges, isolated nodes, self-loops, multi-edges, directed
edges and hubs with very unequal degrees. Each one is padded to one fixed node / edge /
graph budget (real graphs, then a padding graph whose padding edges are self-loops on
its first node, as `swan_jax.data.batching` lays batches out), so the JAX functions
compile once for the whole file. Hypothesis runs derandomised without a database: CI
sees the same examples every time.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import swan_jax as sj
from swan_jax.analysis import jacobian_factors
from swan_jax.data import GraphDataset
from swan_jax.field import ACTIVATION_FNS
from tests import reference as ref

MAX_NODES = 12  # real nodes of one batch, at most
MAX_EDGES = 36  # real edges of one batch, at most
MAX_GRAPHS = 4  # real graphs of one batch, at most
PAD_NODES, PAD_EDGES, PAD_GRAPHS = MAX_NODES + 1, MAX_EDGES + 4, MAX_GRAPHS + 2
WIDTH = 3

PROPERTY = settings(max_examples=25, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@dataclasses.dataclass(frozen=True)
class Spec:
    """A batch of graphs: global `senders` / `receivers`, per-graph `n_node` / `n_edge`."""

    senders: np.ndarray
    receivers: np.ndarray
    n_node: np.ndarray
    n_edge: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.n_node.sum())

    @property
    def num_edges(self) -> int:
        return int(self.senders.shape[0])

    @property
    def node_offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.n_node)]).astype(np.int64)

    @property
    def edge_graph(self) -> np.ndarray:
        """`[E]` index of the graph each edge belongs to."""
        return np.repeat(np.arange(len(self.n_node)), self.n_edge)

    def graph(self, nodes: np.ndarray | None = None, **changes) -> jraph.GraphsTuple:
        """The unpadded `GraphsTuple` (NumPy arrays); `changes` replace its fields."""
        fields = dict(nodes=nodes, edges=None, senders=self.senders, receivers=self.receivers,
                      n_node=self.n_node, n_edge=self.n_edge, globals=None)
        fields.update(changes)
        return jraph.GraphsTuple(**fields)

    def padded(self) -> jraph.GraphsTuple:
        """The batch padded to `PAD_NODES`, `PAD_EDGES`, `PAD_GRAPHS`."""
        n, e, g = self.num_nodes, self.num_edges, len(self.n_node)
        senders = np.full(PAD_EDGES, n, np.int32)
        receivers = np.full(PAD_EDGES, n, np.int32)
        senders[:e], receivers[:e] = self.senders, self.receivers
        n_node = np.zeros(PAD_GRAPHS, np.int32)
        n_edge = np.zeros(PAD_GRAPHS, np.int32)
        n_node[:g], n_edge[:g] = self.n_node, self.n_edge
        n_node[g], n_edge[g] = PAD_NODES - n, PAD_EDGES - e
        return jraph.GraphsTuple(nodes=None, edges=None, senders=senders, receivers=receivers,
                                 n_node=n_node, n_edge=n_edge, globals=None)

    def isolated(self) -> np.ndarray:
        """`[N]` True on real nodes that no edge touches."""
        touched = np.zeros(self.num_nodes, bool)
        touched[self.senders] = touched[self.receivers] = True
        return ~touched


def spec_from_graphs(graphs: list[tuple[int, list[tuple[int, int]]]]) -> Spec:
    """Spec of `[(num_nodes, [(local sender, local receiver), ...]), ...]`."""
    senders, receivers, offset = [], [], 0
    for n, pairs in graphs:
        senders += [offset + s for s, _ in pairs]
        receivers += [offset + r for _, r in pairs]
        offset += n
    return Spec(senders=np.asarray(senders, np.int32), receivers=np.asarray(receivers, np.int32),
                n_node=np.asarray([n for n, _ in graphs], np.int32),
                n_edge=np.asarray([len(p) for _, p in graphs], np.int32))


@st.composite
def graph_specs(draw) -> Spec:
    """One to four graphs of 0..6 nodes (12 in all), edges of every awkward kind."""
    graphs, nodes_left, edges_left = [], MAX_NODES, MAX_EDGES
    for n in draw(st.lists(st.integers(0, 6), min_size=1, max_size=MAX_GRAPHS)):
        n = min(n, nodes_left)
        nodes_left -= n
        pairs: list[tuple[int, int]] = []
        if n:
            node = st.integers(0, n - 1)
            # Random directed pairs: self-loops and multi-edges come with them.
            pairs = draw(st.lists(st.tuples(node, node), max_size=2 * n))
            if draw(st.booleans()):  # a hub: node 0 receives from everyone
                pairs += [(v, 0) for v in range(1, n)]
            if draw(st.booleans()):  # make it undirected
                pairs += [(r, s) for s, r in pairs]
        pairs = pairs[:edges_left]
        edges_left -= len(pairs)
        graphs.append((n, pairs))
    return spec_from_graphs(graphs)


# Named degenerate batches, checked on every run whatever hypothesis draws.
DEGENERATE = {
    "zero nodes": spec_from_graphs([(0, [])]),
    "single node": spec_from_graphs([(1, [])]),
    "single node self-loop": spec_from_graphs([(1, [(0, 0)])]),
    "no edges": spec_from_graphs([(5, [])]),
    "isolated nodes": spec_from_graphs([(6, [(0, 1), (1, 0)])]),
    "self-loops and multi-edges": spec_from_graphs([(3, [(0, 0), (0, 1), (0, 1), (1, 2),
                                                         (2, 2), (2, 2)])]),
    "directed path": spec_from_graphs([(4, [(0, 1), (1, 2), (2, 3)])]),
    "star, unequal degrees": spec_from_graphs([(7, [(v, 0) for v in range(1, 7)]
                                                + [(0, v) for v in range(1, 7)] + [(1, 2)])]),
    "zero-node graphs inside a batch": spec_from_graphs([(0, []), (3, [(0, 1), (1, 2)]), (0, []),
                                                         (2, [(1, 0)])]),
    "several graphs": spec_from_graphs([(2, [(0, 1), (1, 0)]), (1, []),
                                        (5, [(0, 1), (1, 2), (2, 0), (3, 3)])]),
}
degenerate = pytest.mark.parametrize("spec", list(DEGENERATE.values()), ids=list(DEGENERATE))


def features(seed: int, rows: int, scale: float = 1.0) -> np.ndarray:
    return (scale * np.random.default_rng(seed).normal(size=(rows, WIDTH))).astype(np.float32)


def padded_features(spec: Spec, seed: int, pad_scale: float = 0.0) -> np.ndarray:
    """Real rows from `seed`, padding rows zero (or random times `pad_scale`)."""
    x = np.zeros((PAD_NODES, WIDTH), np.float32)
    x[: spec.num_nodes] = features(seed, spec.num_nodes)
    x[spec.num_nodes:] = features(seed + 1, PAD_NODES - spec.num_nodes, pad_scale)
    return x


@functools.cache
def field_params(variant: str, weight_sharing: bool = True) -> dict[str, jax.Array]:
    """Parameters with a non-zero bias (and edge-MLP bias) so every term is exercised."""
    cfg = sj.SWANConfig(variant=variant, weight_sharing=weight_sharing)
    params = sj.init_params(jax.random.PRNGKey(0), WIDTH, cfg)
    params["b"] = 0.1 * jax.random.normal(jax.random.PRNGKey(1), params["b"].shape)
    if "k2" in params:
        params["k2"] = jnp.full_like(params["k2"], 0.05)
    return params


# --- validate_graph ---------------------------------------------------------------


def check_accepted(spec: Spec) -> None:
    x = features(0, spec.num_nodes)
    sj.validate_graph(spec.graph())
    sj.validate_graph(spec.graph(x))
    sj.validate_graph(spec.padded())
    sj.graph.validate_node_features(x, spec.num_nodes, WIDTH)
    loops = np.flatnonzero(spec.senders == spec.receivers)
    if loops.size:
        with pytest.raises(ValueError, match=rf"self-loop at edge {loops[0]} \(node "
                                             rf"{spec.senders[loops[0]]}\)"):
            sj.validate_graph(spec.graph(), allow_self_loops=False)
    else:
        sj.validate_graph(spec.graph(), allow_self_loops=False)
    # The same graphs as a GraphDataset (local indices) are accepted too.
    local = spec.node_offsets[spec.edge_graph]
    data = GraphDataset(nodes=x, edges=None, senders=spec.senders - local,
                        receivers=spec.receivers - local, n_node=spec.n_node,
                        n_edge=spec.n_edge)
    assert len(data) == len(spec.n_node) and data.senders.dtype == np.int32


def corruptions(spec: Spec, pick: int) -> list[tuple[str, jraph.GraphsTuple, str]]:
    """(what, corrupted graph, pattern its ValueError must match); `pick` chooses indices."""
    n, e, g = spec.num_nodes, spec.num_edges, len(spec.n_node)
    x = features(0, n)
    out = []
    plus_one = spec.n_node.copy()
    plus_one[pick % g] += 1
    out.append(("n_node does not sum to the node rows", spec.graph(x, n_node=plus_one),
                rf"sum\(graph\.n_node\) = {n + 1} but graph\.nodes has {n} rows"))
    negative = spec.n_node.copy()
    negative[pick % g] = -1
    out.append(("negative n_node", spec.graph(n_node=negative),
                rf"graph\.n_node has a negative count at graph {pick % g}"))
    more_edges = spec.n_edge.copy()
    more_edges[pick % g] += 1
    out.append(("n_edge does not sum to the edges", spec.graph(n_edge=more_edges),
                rf"sum\(graph\.n_edge\) = {e + 1} but graph has {e} edges"))
    out.append(("float senders", spec.graph(senders=spec.senders.astype(np.float32)),
                r"graph\.senders must hold integers, got dtype float32"))
    out.append(("float receivers", spec.graph(receivers=spec.receivers.astype(np.float64)),
                r"graph\.receivers must hold integers, got dtype float64"))
    longer = np.append(spec.senders, 0).astype(np.int32)
    out.append(("senders longer than receivers", spec.graph(senders=longer),
                rf"graph\.senders has {e + 1} edges but graph\.receivers has {e}"))
    if e:
        i = pick % e
        high, low = spec.senders.copy(), spec.receivers.copy()
        high[i], low[i] = n + pick % 3, -1 - pick % 3
        out.append(("sender past the last node", spec.graph(senders=high),
                    rf"graph\.senders\[{i}\] = {n + pick % 3} is out of range for a graph "
                    rf"with {n} nodes"))
        out.append(("negative receiver", spec.graph(receivers=low),
                    rf"graph\.receivers\[{i}\] = {-1 - pick % 3} is out of range"))
        out.append(("receivers shorter than senders", spec.graph(receivers=spec.receivers[:-1]),
                    rf"graph\.senders has {e} edges but graph\.receivers has {e - 1}"))
        edge_graph = spec.edge_graph[i]
        offsets = spec.node_offsets
        outside = np.flatnonzero((np.arange(n) < offsets[edge_graph])
                                 | (np.arange(n) >= offsets[edge_graph + 1]))
        if outside.size:  # another graph has nodes: point the edge at one of them
            crossed = spec.senders.copy()
            crossed[i] = outside[pick % outside.size]
            out.append(("edge crossing into another graph", spec.graph(senders=crossed),
                        rf"graph\.senders\[{i}\] = {crossed[i]} is not a node of graph "
                        rf"{edge_graph} .*edges must not cross graphs"))
    return out


def check_rejected(spec: Spec, pick: int) -> None:
    for what, graph, pattern in corruptions(spec, pick):
        with pytest.raises(ValueError, match=pattern) as err:
            sj.validate_graph(graph)
        assert "graph" in str(err.value), what
    if spec.num_nodes:
        row, col = pick % spec.num_nodes, pick % WIDTH
        x = features(0, spec.num_nodes)
        x[row, col] = [np.nan, np.inf, -np.inf][pick % 3]
        with pytest.raises(ValueError, match=rf"x has a non-finite value \(.*\) at row {row}, "
                                             rf"column {col}"):
            sj.graph.validate_node_features(x, spec.num_nodes, WIDTH)


def check_dataset_rejects_fractional_and_foreign_indices(spec: Spec, pick: int) -> None:
    if not spec.num_edges:
        return
    i = pick % spec.num_edges
    local = (spec.senders - spec.node_offsets[spec.edge_graph]).astype(np.float64)
    fields = dict(nodes=features(0, spec.num_nodes), edges=None,
                  receivers=spec.receivers - spec.node_offsets[spec.edge_graph],
                  n_node=spec.n_node, n_edge=spec.n_edge)
    fractional = local.copy()
    fractional[i] += 0.5
    with pytest.raises(ValueError, match=rf"senders\[{i}\] = {fractional[i]} is not an integer"):
        GraphDataset(senders=fractional, **fields)
    foreign = local.astype(np.int64)
    g = int(spec.edge_graph[i])
    foreign[i] = spec.n_node[g]  # one past the last node of its own graph
    with pytest.raises(ValueError, match=rf"graph {g}: senders\[{i}\] = {spec.n_node[g]} is out "
                                         rf"of range for its {spec.n_node[g]} nodes"):
        GraphDataset(senders=foreign, **fields)


@PROPERTY
@given(spec=graph_specs())
def test_validate_graph_accepts_every_generated_graph(spec):
    check_accepted(spec)


@degenerate
def test_validate_graph_accepts_degenerate_graphs(spec):
    check_accepted(spec)


@PROPERTY
@given(spec=graph_specs(), pick=st.integers(0, 1000))
def test_corrupted_graphs_are_rejected_naming_field_and_index(spec, pick):
    check_rejected(spec, pick)
    check_dataset_rejects_fractional_and_foreign_indices(spec, pick)


@degenerate
def test_corrupted_degenerate_graphs_are_rejected(spec):
    for pick in range(3):
        check_rejected(spec, pick)
        check_dataset_rejects_fractional_and_foreign_indices(spec, pick)


# --- operators --------------------------------------------------------------------


@functools.partial(jax.jit, static_argnums=0)
def operator_matrices(adjacency: str, senders, receivers):
    """Dense `M - M^T` and `M + M^T` by aggregating the identity, and the dense operators."""
    graph = jraph.GraphsTuple(nodes=None, edges=None, senders=senders, receivers=receivers,
                              n_node=None, n_edge=None, globals=None)
    ops = sj.graph.edge_operators(graph, PAD_NODES, sj.config.ADJACENCY_CODES[adjacency])
    eye = jnp.eye(PAD_NODES)
    return (sj.graph.antisymmetric_aggregate(graph, ops.w_tilde, eye),
            sj.graph.symmetric_aggregate(graph, ops.w_hat, eye),
            sj.graph.dense_operator(graph, ops.w_hat, PAD_NODES),
            sj.graph.dense_operator(graph, ops.w_tilde, PAD_NODES))


def check_operators(spec: Spec) -> None:
    padded = spec.padded()
    n = spec.num_nodes
    A = ref.dense_adjacency(spec.senders, spec.receivers, n)
    graph_of_node = np.repeat(np.arange(len(spec.n_node)), spec.n_node)
    same_graph = graph_of_node[:, None] == graph_of_node[None, :]
    quiet = spec.isolated()
    for adjacency in sj.ADJACENCIES:
        anti, sym, a_hat, a_tilde = (np.asarray(m) for m in operator_matrices(
            adjacency, padded.senders, padded.receivers))
        for m in (anti, sym, a_hat, a_tilde):
            assert np.all(np.isfinite(m))
        # (M - M^T) X and (M + M^T) X of the identity: the operators themselves, exactly.
        assert np.array_equal(anti, -anti.T)
        assert np.array_equal(sym, sym.T)
        np.testing.assert_allclose(anti, a_tilde - a_tilde.T, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(sym, a_hat + a_hat.T, rtol=1e-6, atol=1e-7)
        # Against the dense NumPy formulas on the real nodes.
        want_hat, want_tilde = ref.operators(A, adjacency)
        np.testing.assert_allclose(a_hat[:n, :n], want_hat, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(a_tilde[:n, :n], want_tilde, rtol=1e-6, atol=1e-7)
        # D^-1 A: rows sum to 1 where a node receives anything, 0 where it does not.
        received = np.bincount(spec.receivers, minlength=n) > 0
        np.testing.assert_allclose(a_tilde[:n].sum(axis=1), received.astype(float), atol=1e-6)
        for m in (anti, sym):
            real = m[:n, :n]
            assert np.all(real[~same_graph] == 0)  # nothing flows between graphs
            assert np.all(m[:n, n:] == 0) and np.all(m[n:, :n] == 0)  # nor to / from padding
            assert np.all(real[quiet] == 0) and np.all(real[:, quiet] == 0)  # isolated: zero


@PROPERTY
@given(spec=graph_specs())
def test_operators_are_exactly_antisymmetric_and_symmetric(spec):
    check_operators(spec)


@degenerate
def test_operators_on_degenerate_graphs(spec):
    check_operators(spec)


# --- the vector field -------------------------------------------------------------


def check_field(spec: Spec, seed: int, variant: str, adjacency: str) -> None:
    cfg = sj.SWANConfig(variant=variant, adjacency=adjacency, beta=0.7, gamma=0.3)
    params = field_params(variant)
    graph = spec.padded()
    n = spec.num_nodes
    x = padded_features(spec, seed)
    out = np.asarray(sj.vector_field(params, graph, jnp.asarray(x), cfg))
    assert out.shape == x.shape and out.dtype == x.dtype
    assert np.all(np.isfinite(out))
    # Other padding values change nothing on the real nodes, bit for bit.
    other = np.asarray(sj.vector_field(params, graph, jnp.asarray(
        padded_features(spec, seed, pad_scale=1e3)), cfg))
    np.testing.assert_array_equal(out[:n], other[:n])
    # The dense NumPy field of the unpadded graph.
    p = {k: np.asarray(v) for k, v in params.items()}
    want = ref.vector_field(p, spec.senders, spec.receivers, x[:n], cfg)
    np.testing.assert_allclose(out[:n], want, rtol=1e-4, atol=1e-5)
    # Isolated nodes aggregate nothing: only their own state and the bias act.
    quiet = spec.isolated()
    W = p["W"]
    alone = ACTIVATION_FNS[cfg.activation](
        x[:n][quiet] @ (W - W.T - cfg.gamma * np.eye(WIDTH)) + p["b"])
    np.testing.assert_allclose(out[:n][quiet], alone, rtol=1e-5, atol=1e-6)


@PROPERTY
@given(spec=graph_specs(), seed=st.integers(0, 2**16), variant=st.sampled_from(sj.VARIANTS),
       adjacency=st.sampled_from(sj.ADJACENCIES))
def test_vector_field_is_finite_keeps_its_shape_and_ignores_padding(spec, seed, variant,
                                                                   adjacency):
    check_field(spec, seed, variant, adjacency)


@degenerate
@pytest.mark.parametrize("variant", ["swan", "swan-learn", "adgn"])
def test_vector_field_on_degenerate_graphs(spec, variant):
    check_field(spec, 0, variant, "sym")


# --- the spectrum of M2 without gamma ---------------------------------------------


def check_m2_spectrum(spec: Spec, seed: int, variant: str, adjacency: str) -> None:
    cfg = sj.SWANConfig(variant=variant, adjacency=adjacency, beta=-0.8, gamma=0.0)
    x = jnp.asarray(padded_features(spec, seed))
    _, m2 = jacobian_factors(field_params(variant), spec.padded(), x, cfg)
    m2 = np.asarray(m2, np.float64)
    # Space-symmetric Phi with weight-antisymmetric V, space-antisymmetric Psi with
    # weight-symmetric Z: M2 is skew-symmetric entry by entry, so its spectrum is imaginary.
    assert np.array_equal(m2, -m2.T)
    eig = np.linalg.eigvals(m2)
    assert np.max(np.abs(eig.real)) <= 1e-9 * (1.0 + np.max(np.abs(eig)))


@PROPERTY
@given(spec=graph_specs(), seed=st.integers(0, 2**16),
       variant=st.sampled_from(["swan", "swan-learn", "swan-beta0"]),
       adjacency=st.sampled_from(sj.ADJACENCIES))
def test_m2_without_gamma_has_a_purely_imaginary_spectrum(spec, seed, variant, adjacency):
    check_m2_spectrum(spec, seed, variant, adjacency)



# --- the gather-only path equals the segment-sum path ------------------------------

# A static layout for every generated batch: slot width 2, so hubs and multi-neighbour
# nodes take overflow rows; room for every overflow row and listed pair there can be.
SLOT_WIDTH, PAD_OVERFLOW, PAD_PAIRS = 2, 2 * PAD_EDGES, PAD_EDGES


@functools.cache
def field_pair(variant: str, adjacency: str):
    """Jitted float64 field and solve-gradient of one variant, for either path."""
    cfg = sj.SWANConfig(variant=variant, adjacency=adjacency, beta=0.7, gamma=0.3,
                        num_layers=2, epsilon=0.3)

    def loss(p, x, g):
        return jnp.sum(jnp.sin(sj.solve(p, g, x, cfg)))

    return (jax.jit(lambda p, x, g: sj.vector_field(p, g, x, cfg)),
            jax.jit(jax.grad(loss, argnums=(0, 1))))


@functools.partial(jax.jit, static_argnums=1)
def slot_values(graph, adjacency: str):
    ops = sj.graph.slot_operators(graph, sj.config.ADJACENCY_CODES[adjacency],
                                  dtype=jnp.float64)
    return ops.phi, ops.psi


def check_prepared_path(spec: Spec, seed: int, variant: str, adjacency: str) -> None:
    with jax.enable_x64(True):
        graph = jax.tree_util.tree_map(jnp.asarray, spec.padded())
        prepared = jax.tree_util.tree_map(jnp.asarray, sj.prepare_graph(
            spec.padded(), slot_width=SLOT_WIDTH, num_overflow=PAD_OVERFLOW,
            num_pairs=PAD_PAIRS))
        mirror = np.asarray(prepared.mirror).reshape(-1)
        phi, psi = (np.asarray(v).reshape(-1) for v in slot_values(prepared, adjacency))
        assert np.array_equal(phi, phi[mirror]) and np.array_equal(psi, -psi[mirror])
        params = {k: jnp.asarray(v, jnp.float64) for k, v in field_params(variant).items()}
        x = jnp.asarray(padded_features(spec, seed), jnp.float64)
        field, grad = field_pair(variant, adjacency)
        for got, want in ((field(params, x, prepared), field(params, x, graph)),
                          (grad(params, x, prepared), grad(params, x, graph))):
            for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want),
                            strict=True):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12,
                                           atol=1e-12)


@PROPERTY
@given(spec=graph_specs(), seed=st.integers(0, 2**16), variant=st.sampled_from(sj.VARIANTS),
       adjacency=st.sampled_from(sj.ADJACENCIES))
def test_prepared_path_equals_the_segment_path(spec, seed, variant, adjacency):
    check_prepared_path(spec, seed, variant, adjacency)


@degenerate
@pytest.mark.parametrize("variant", ["swan", "swan-learn"])
def test_prepared_path_on_degenerate_graphs(spec, variant):
    check_prepared_path(spec, 0, variant, "sym")
