"""The gather-only path (`prepare_graph`, `swan_jax.graph.gather`) against the segment-sum path.

Exactness by construction (`==`), equality with the reference path to 1e-12 in float64
for every variant, solver, adjoint and transform, and the structural property the path
exists for: no scatter in the compiled gradient of `solve`.
"""

from __future__ import annotations

import functools
import itertools
import re

import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest

import swan_jax as sj
from swan_jax.graph import gather
from tests.conftest import PRODUCTION_COMPILE
from tests.graphs import graph_from_edges, random_directed, random_undirected
from tests.test_core import make_params


def star(num_leaves: int) -> jraph.GraphsTuple:
    """A hub receiving from and sending to every leaf: degree `num_leaves`."""
    leaves = list(range(1, num_leaves + 1))
    return graph_from_edges(leaves + [0] * num_leaves, [0] * num_leaves + leaves,
                            num_leaves + 1)


def awkward(rng: np.random.Generator) -> jraph.GraphsTuple:
    """Two graphs in one batch: directed multi-edges (up to 3 parallel), self-loops, an
    isolated node, a hub; then padding as the batches lay it out."""
    g1 = random_directed(rng, 7, 18)
    g2 = random_undirected(rng, 9, isolated=2)
    batch = jraph.batch([g1, g2])
    n, e = int(batch.n_node.sum()), int(batch.n_edge.sum())
    return jraph.pad_with_graphs(batch, n_node=n + 3, n_edge=e + 5, n_graph=4)


GRAPHS = {
    "undirected": lambda rng: random_undirected(rng, 10, isolated=2),
    "directed multigraph": lambda rng: random_directed(rng, 8, 20),
    "batch with padding": awkward,
    "star": lambda rng: star(9),
}
WIDTHS = (None, 1, 2)  # chosen by the layout, and narrow ones that force overflow rows


def prepared(graph, slot_width=None):
    return sj.prepare_graph(graph, slot_width=slot_width)


def case_graphs(seed: int = 0):
    rng = np.random.default_rng(seed)
    for name, build in GRAPHS.items():
        graph = build(rng)
        for width in WIDTHS:
            yield f"{name}, K={width}", graph, prepared(graph, width)


# --- the layout --------------------------------------------------------------------


def test_layout_mirrors_are_an_involution_and_every_edge_is_counted_once():
    for _, graph, pg in case_graphs():
        sj.graph.check_prepared(pg)
        n = pg.num_nodes
        senders, receivers = np.asarray(graph.senders), np.asarray(graph.receivers)
        dense = np.zeros((n, n))
        np.add.at(dense, (receivers, senders), 1.0)
        owner = np.concatenate([np.arange(n), np.asarray(pg.overflow_owner)])
        got = np.zeros((n, n))
        np.add.at(got, (np.repeat(owner, pg.slot_width), np.asarray(pg.neighbors).reshape(-1)),
                  np.asarray(pg.forward_count).reshape(-1))
        np.testing.assert_array_equal(got, dense)  # A[u, v] on the slot of u naming v
        flat_b = np.asarray(pg.backward_count).reshape(-1)
        flat_f = np.asarray(pg.forward_count).reshape(-1)
        np.testing.assert_array_equal(flat_b, flat_f[np.asarray(pg.mirror).reshape(-1)])


def test_a_star_costs_memory_in_proportion_to_its_edges():
    for leaves in (10, 100, 1000):
        pg = prepared(star(leaves), slot_width=4)
        slots = pg.num_rows * pg.slot_width
        assert slots <= 4 * (2 * leaves + leaves + 1)  # not N times the hub's degree
        assert pg.num_overflow == -(-leaves // 4) - 1


def test_budgets_that_are_too_small_are_named():
    with pytest.raises(ValueError, match=r"needs 9 overflow rows but the budget holds 2"):
        sj.prepare_graph(star(10), slot_width=1, num_overflow=2)
    with pytest.raises(ValueError, match=r"needs 20 listed pairs but the budget holds 5"):
        sj.prepare_graph(star(10), num_pairs=5)
    with pytest.raises(ValueError, match=r"slot_width must be an integer >= 1, got 0"):
        sj.prepare_graph(star(3), slot_width=0)
    bad = star(3)._replace(senders=jnp.asarray([0, 1, 2, 9, 0, 0]))
    with pytest.raises(ValueError, match=r"graph\.senders\[3\] = 9 is out of range"):
        sj.prepare_graph(bad)


def test_plain_graph_round_trips_and_prepared_graphs_serve_encoders_and_readouts():
    graph = awkward(np.random.default_rng(1))
    graph = graph._replace(nodes=np.ones((int(graph.n_node.sum()), 2), np.float32))
    pg = prepared(graph)
    back = sj.graph.plain_graph(pg)
    assert isinstance(back, jraph.GraphsTuple)
    for a, b in zip(back, graph, strict=True):
        assert (a is None and b is None) or np.array_equal(a, b)
    assert sj.graph.plain_graph(graph) is graph
    model = sj.Model(sj.LinearEncoder(4), sj.SWANBlock(sj.SWANConfig(num_layers=2)),
                     sj.GraphReadout((3,)))
    params = model.init(jax.random.PRNGKey(0), pg)
    np.testing.assert_allclose(model.apply(params, pg), model.apply(params, graph),
                               rtol=1e-5, atol=1e-6)


# --- exact by construction ---------------------------------------------------------


CODES = sj.config.ADJACENCY_CODES  # the graph operations take the adjacency's code
jit_slot_operators = jax.jit(sj.graph.slot_operators, static_argnums=(1, 3))
# Compiled once per graph shape: op by op, every small operation of a kernel compiles on
# its own (hundreds of tiny programs per test, most of its time).
jit_densify = jax.jit(gather.densify)
jit_edge_operators = jax.jit(sj.graph.edge_operators, static_argnums=(1, 2),
                             static_argnames=("dtype",))
jit_dense_operator = jax.jit(sj.graph.dense_operator, static_argnums=2)


def slot_ops(pg, adjacency, learned: bool, dtype=jnp.float64):
    weights = None
    if learned:  # arbitrary positive per-pair weights, like a learned F
        weights = jnp.asarray(np.random.default_rng(3).uniform(0.1, 2.0, pg.num_pairs), dtype)
    return jit_slot_operators(jax.tree_util.tree_map(jnp.asarray, pg), CODES[adjacency],
                              weights, dtype)


@pytest.mark.parametrize("adjacency,learned", list(itertools.product(sj.ADJACENCIES,
                                                                    (False, True))))
def test_phi_and_psi_are_symmetric_and_antisymmetric_bit_for_bit(adjacency, learned, x64):
    for name, _, pg in case_graphs():
        ops = slot_ops(pg, adjacency, learned)
        mirror = np.asarray(pg.mirror).reshape(-1)
        phi, psi = np.asarray(ops.phi).reshape(-1), np.asarray(ops.psi).reshape(-1)
        assert np.array_equal(phi, phi[mirror]), name
        assert np.array_equal(psi, -psi[mirror]), name
        assert np.array_equal(np.asarray(ops.hat_t).reshape(-1),
                              np.asarray(ops.hat).reshape(-1)[mirror]), name
        assert np.array_equal(np.asarray(ops.psi_t), -np.asarray(ops.psi)), name


@pytest.mark.parametrize("adjacency", sj.ADJACENCIES)
def test_densified_operators_equal_the_edge_operators_exactly(adjacency, x64):
    """On the reference path's own edge weights: `densify(phi) == D(w) + D(w)^T` and
    `densify(psi) == D(w~) - D(w~)^T` to the last bit (at most three parallel edges per
    direction, where a sum of copies and a multiple round alike)."""
    rng = np.random.default_rng(4)
    for graph in (random_undirected(rng, 10, isolated=2), random_directed(rng, 8, 20),
                  star(7)):
        n = int(graph.n_node.sum())
        for width in WIDTHS:
            pg = jax.tree_util.tree_map(jnp.asarray, prepared(graph, width))
            ops = jit_slot_operators(pg, CODES[adjacency], None, jnp.float64)
            edge = jit_edge_operators(graph, n, CODES[adjacency], dtype=jnp.float64)
            a_hat = np.asarray(jit_dense_operator(graph, edge.w_hat, n))
            a_tilde = np.asarray(jit_dense_operator(graph, edge.w_tilde, n))
            assert np.array_equal(np.asarray(jit_densify(pg, ops.phi)), a_hat + a_hat.T)
            assert np.array_equal(np.asarray(jit_densify(pg, ops.psi)), a_tilde - a_tilde.T)
            assert np.array_equal(np.asarray(jit_densify(pg, ops.hat)), a_hat)


# --- the same numbers as the segment-sum path --------------------------------------


def assert_close(a, b, tol=1e-12):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


# Every variant once and every adjacency with several variants (a covering design, not
# the full product): the operators' adjacency is checked bit for bit above on every graph,
# and the property test (tests/test_properties.py) draws the variant x adjacency pairs at
# random on generated graphs with the same 1e-12 equality of field and solve gradient.
CASES = [(variant, sj.ADJACENCIES[i % len(sj.ADJACENCIES)])
         for i, variant in enumerate(sj.VARIANTS)]


def few_graphs(seed: int):
    """A padded batch with every awkward feature, with the chosen slot width and with
    overflow rows everywhere (K = 1); a star with K = 2."""
    graph = awkward(np.random.default_rng(seed))
    yield graph, prepared(graph)
    yield graph, prepared(graph, 1)
    yield star(6), prepared(star(6), 2)


@pytest.mark.parametrize("variant,adjacency", CASES)
def test_field_solve_and_gradients_equal_the_segment_path(variant, adjacency, x64):
    cfg = sj.SWANConfig(variant=variant, adjacency=adjacency, beta=0.7, gamma=0.3,
                        num_layers=3, epsilon=0.2)
    rng = np.random.default_rng(5)

    @jax.jit
    def field(p, x, x0, g):
        return sj.vector_field(p, g, x, cfg, x0=x0)

    @jax.jit
    def value_and_grad(p, x0, g):
        return jax.value_and_grad(lambda p, x0: jnp.sum(jnp.sin(sj.solve(p, g, x0, cfg))),
                                  argnums=(0, 1))(p, x0)

    for graph, pg in few_graphs(6):
        n = pg.num_nodes
        params = make_params(cfg, 3, seed=7)
        x, x0 = (jnp.asarray(rng.normal(size=(n, 3))) for _ in range(2))
        assert_close(field(params, x, x0, pg), field(params, x, x0, graph))
        assert_close(value_and_grad(params, x0, pg), value_and_grad(params, x0, graph))


def _coded_and_named(params, graph, x, x0, cfg, codes, names):
    """Operators and fields vmapped over adjacency codes, and those of each name: one
    program (compiled once per graph)."""
    def both(adjacency):
        run = cfg.replace(adjacency=adjacency)
        return (sj.field.build_operators(params, graph, x0, run),
                sj.vector_field(params, graph, x, run, x0=x0))

    return jax.vmap(both)(codes), [both(name) for name in names]


def test_adjacency_codes_vmapped_per_run_give_each_named_adjacency(x64):
    """One program, both adjacencies: codes `[1, 0]` vmapped (as a sweep's runs) build
    the named choices' operators bit for bit and their fields, on both layouts (fixed
    operators, as graph transfer trains them; `adjacency_hat` is the same for learned)."""
    names = ("sym", "adj")
    codes = jnp.asarray([sj.config.ADJACENCY_CODES[a] for a in names])
    cfg = sj.SWANConfig(beta=0.7, gamma=0.3, num_layers=2, epsilon=0.2)
    rng = np.random.default_rng(8)
    program = jax.jit(_coded_and_named, static_argnames=("cfg", "names"))
    for graph, pg in few_graphs(9):
        n = pg.num_nodes
        params = make_params(cfg, 3, seed=4)
        x, x0 = (jnp.asarray(rng.normal(size=(n, 3))) for _ in range(2))
        for g in (graph, pg):
            (coded_ops, coded_fields), named = program(params, g, x, x0, cfg=cfg,
                                                       codes=codes, names=names)
            for i, (named_ops, named_field) in enumerate(named):
                for a, b in zip(jax.tree_util.tree_leaves(coded_ops),
                                jax.tree_util.tree_leaves(named_ops), strict=True):
                    assert np.array_equal(np.asarray(a)[i], np.asarray(b)), (i, type(g))
                assert_close(coded_fields[i], named_field)
    with pytest.raises(ValueError, match="1 \\(sym\\) or 0 \\(adj\\)"):
        sj.SWANConfig(adjacency=0.5)
    with pytest.raises(ValueError, match="adjacency must be one of sym, adj or its code"):
        sj.SWANConfig(adjacency=None)  # e.g. a grid without the axis
    with pytest.raises(ValueError, match="cannot be traced: it must be one of sym, adj"):
        sj.settings.traced_value("adjacency", "dense")


# Each adjoint (recursive checkpoints, backsolve, direct) with a fixed-step, an adaptive
# or an implicit solver: every kind of solver and every adjoint at least once (the
# default Euler / recursive pair is the test above).
@pytest.mark.parametrize("solver,adjoint,tol", [
    ("heun", "recursive", 1e-12), ("ralston", "backsolve", 1e-12),
    ("dopri5", "direct", 1e-12),
    # An implicit stage is Newton with GMRES (`solvers.KRYLOV`): where a Krylov solve stops
    # follows round-off, so the paths agree within Newton's tolerance (rtol 1e-8; seen:
    # 4e-11), not to round-off as with a dense LU.
    ("kvaerno3", "recursive", 1e-9),
    # Adaptive steps of the continuous adjoint follow an error norm over the augmented state,
    # which holds the operators (per edge on one path, per slot on the other): the two
    # paths then agree to the solver's tolerance (rtol 1e-8), not to round-off.
    ("bosh3", "backsolve", 1e-7),
])
def test_every_kind_of_solver_and_adjoint_equals_the_segment_path(solver, adjoint, tol, x64):
    cfg = sj.SWANConfig(variant="swan-learn", num_layers=3, epsilon=0.1, beta=0.5)
    graph = awkward(np.random.default_rng(8))
    pg = prepared(graph, 2)
    params = make_params(cfg, 3, seed=9)
    x0 = jnp.asarray(np.random.default_rng(10).normal(size=(pg.num_nodes, 3)))

    def loss(p, g):
        out = sj.solve(p, g, x0, cfg, solver, rtol=1e-8, atol=1e-10, adjoint=adjoint)
        return jnp.sum(out ** 2)

    value_and_grad = jax.jit(jax.value_and_grad(loss))
    assert_close(value_and_grad(params, pg), value_and_grad(params, graph), tol=tol)


@pytest.mark.parametrize("variant", ["swan", "swan-learn", "adgn"])
def test_layer_dependent_weights_and_trajectories_equal_the_segment_path(variant, x64):
    cfg = sj.SWANConfig(variant=variant, num_layers=4, epsilon=0.3, weight_sharing=False)
    graph = awkward(np.random.default_rng(11))
    pg = prepared(graph, 1)
    params = make_params(cfg, 3, seed=12)
    x0 = jnp.asarray(np.random.default_rng(13).normal(size=(pg.num_nodes, 3)))
    trajectory = jax.jit(lambda p, g: sj.solve(p, g, x0, cfg, save_trajectory=True))
    assert_close(trajectory(params, pg), trajectory(params, graph))  # compiled, not op by op


def test_forward_mode_jacobians_equal_the_segment_path(x64):
    """Forward mode works on the prepared path too (implicit solvers and the analysis
    use it): the kernels are linear maps with custom transposes, not custom VJPs."""
    cfg = sj.SWANConfig(variant="swan-learn", beta=0.6)
    graph = awkward(np.random.default_rng(14))
    pg = prepared(graph, 2)
    params = make_params(cfg, 2, seed=15)
    x = jnp.asarray(np.random.default_rng(16).normal(size=(pg.num_nodes, 2)))
    def f(p, x, g):
        return sj.vector_field(p, g, x, cfg, x0=x)

    # Both arguments' Jacobians in one program per mode and layout (3 compiles, not 6).
    forward = jax.jit(jax.jacfwd(f, argnums=(0, 1)))
    reverse = jax.jit(jax.jacrev(f, argnums=(0, 1)))
    reference = forward(params, x, graph)
    assert_close(forward(params, x, pg), reference)
    assert_close(reverse(params, x, pg), reference)


def test_vmap_over_seeds_and_hyperparameters_on_the_prepared_path():
    cfg = sj.SWANConfig(variant="swan-learn")
    graph = awkward(np.random.default_rng(17))
    pg = jax.tree_util.tree_map(jnp.asarray, prepared(graph, 2))
    x0 = jnp.asarray(np.random.default_rng(18).normal(size=(pg.num_nodes, 4)), jnp.float32)
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    stacked = jax.vmap(lambda k: sj.init_params(k, 4, cfg))(keys)
    grid = cfg.replace(beta=jnp.asarray([1.0, -0.5, 0.3]), gamma=jnp.asarray([0.1, 0.2, 0.0]),
                       epsilon=jnp.asarray([0.1, 0.2, 0.05]))

    def loss(p, c, g):
        return jnp.sum(sj.solve(p, g, x0, c) ** 2)

    batched = jax.jit(jax.vmap(jax.grad(loss), in_axes=(0, 0, None)))(stacked, grid, pg)
    one_run = jax.jit(jax.grad(loss))  # one compile for the three runs, not op by op
    for i, key in enumerate(keys):
        c = cfg.replace(beta=float(grid.beta[i]), gamma=float(grid.gamma[i]),
                        epsilon=float(grid.epsilon[i]))
        one = one_run(sj.init_params(key, 4, cfg), c, graph)
        assert_close(jax.tree_util.tree_map(lambda a, i=i: a[i], batched), one, tol=2e-5)


def test_values_only_gradient_path(x64):
    """Gradients w.r.t. the edge MLP alone (the other weights held): the aggregation's
    tangent then has no input-sized part and takes the flat embedding."""
    cfg = sj.SWANConfig(variant="swan-learn")
    graph = random_undirected(np.random.default_rng(19), 8)
    pg = prepared(graph, 2)
    params = make_params(cfg, 3, seed=20)
    x0 = jnp.asarray(np.random.default_rng(21).normal(size=(8, 3)))
    mlp = {k: params[k] for k in ("K1", "k1", "K2", "k2")}

    def loss(m, g):
        return jnp.sum(sj.solve({**params, **m}, g, jax.lax.stop_gradient(x0), cfg) ** 2)

    grad = jax.jit(jax.grad(loss))  # compiled once per layout, not op by op
    assert_close(grad(mlp, pg), grad(mlp, graph))


# --- baselines ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(sj.BASELINE_LAYERS))
def test_baselines_on_the_prepared_path_equal_the_segment_path(kind, x64):
    graph = awkward(np.random.default_rng(22))
    n = int(graph.n_node.sum())
    x = jnp.asarray(np.random.default_rng(23).normal(size=(n, 3)))
    stack = sj.MPNNStack(kind, 4, 2)
    params = stack.init(jax.random.PRNGKey(0), graph, x)

    def loss(p, x, g):
        return jnp.sum(jnp.sin(stack.apply(p, g, x)))

    # Compiled once per graph layout: op by op, the same check took ~7x longer.
    value_and_grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    reference = value_and_grad(params, x, graph)
    for width in WIDTHS:
        assert_close(value_and_grad(params, x, prepared(graph, width)), reference, tol=1e-11)


# --- the structural property -------------------------------------------------------


def hlo_has(text: str, opcode: str) -> bool:
    """Whether compiled HLO text holds an instruction `opcode(...)` (fusion bodies too;
    metadata and names do not count). Compile with `PRODUCTION_COMPILE`: the suite's
    cheaper emitters expand scatters into loops."""
    return re.search(rf"\s{opcode}\(", text) is not None


@functools.cache
def segment_gradient_hlo(variant: str) -> str:
    """The positive control of the no-scatter test: the segment-sum path's compiled
    gradient on its graph, which is the same for every slot width (`plain_graph` gives
    back the graph `prepare_graph` took), so one compile per variant serves them all."""
    return compiled_gradient_hlo(variant, sj.graph.plain_graph(prepared(awkward(
        np.random.default_rng(24)))))


def compiled_gradient_hlo(variant: str, graph) -> str:
    cfg = sj.SWANConfig(variant=variant)
    params = sj.init_params(jax.random.PRNGKey(0), 8, cfg)
    pg = jax.tree_util.tree_map(jnp.asarray, graph)
    x0 = jnp.ones((int(np.sum(pg.n_node)), 8), jnp.float32)

    def loss(p, x, g):
        return jnp.sum(sj.solve(p, g, x, cfg) ** 2)

    grad = jax.jit(jax.grad(loss, argnums=(0, 1)))
    return grad.lower(params, x0, pg).compile(PRODUCTION_COMPILE).as_text()


@pytest.mark.parametrize("variant", ["swan", "swan-learn"])
@pytest.mark.parametrize("width", [None, 2])
def test_compiled_gradient_of_solve_has_no_scatter(variant, width):
    graph = prepared(awkward(np.random.default_rng(24)), width)
    text = compiled_gradient_hlo(variant, graph)
    assert hlo_has(text, "gather")  # the aggregations are there ...
    assert not hlo_has(text, "scatter")  # ... and none of them, forward or backward, scatters
    # The segment-sum reference path does scatter, so this test can fail.
    assert all(np.array_equal(a, b) for a, b in zip(
        sj.graph.plain_graph(graph),
        sj.graph.plain_graph(prepared(awkward(np.random.default_rng(24)))),
        strict=True))  # the cached control is this graph's
    assert hlo_has(segment_gradient_hlo(variant), "scatter")


def test_gcn_processor_gradient_has_no_scatter():
    graph = jax.tree_util.tree_map(jnp.asarray, prepared(awkward(np.random.default_rng(25))))
    stack = sj.MPNNStack("gcn", 8, 2)
    x = jnp.ones((graph.num_nodes, 8))
    params = stack.init(jax.random.PRNGKey(0), graph, x)
    grad = jax.jit(jax.grad(lambda p, x: jnp.sum(stack.apply(p, graph, x) ** 2),
                            argnums=(0, 1)))
    assert not hlo_has(grad.lower(params, x).compile(PRODUCTION_COMPILE).as_text(), "scatter")


def test_mix_cotangent_is_one_concatenation_not_a_sum_of_padded_blocks(x64):
    """SWAN's field aggregates column blocks of one product `y = [Y_0 | Y_1 | Y_2]`: the
    cotangent in `y` is built as one concatenation (no `pad`), equal to the one of the
    column-slice form, whose transpose pads and sums each block (the slow CPU kernel)."""
    graph = jax.tree_util.tree_map(jnp.asarray, prepared(random_undirected(
        np.random.default_rng(26), 10)))
    ops = sj.graph.slots.slot_operators(graph, CODES["sym"])
    values, transposed = (ops.phi, ops.psi), (ops.phi, ops.psi_t)
    rng = np.random.default_rng(27)
    y, bias = jnp.asarray(rng.normal(size=(10, 9))), jnp.asarray(rng.normal(size=3))

    def blocks(y, bias):
        return gather.mix_aggregate(graph, values, transposed, y, bias)

    def slices(y, bias):
        return y[:, :3] + bias + gather.aggregate(graph, values, transposed,
                                                  (y[:, 3:6], y[:, 6:]))

    grads = {}
    for name, fn in (("blocks", blocks), ("slices", slices)):
        grad = jax.jit(jax.grad(lambda y, b, fn=fn: jnp.sum(jnp.sin(fn(y, b))), (0, 1)))
        grads[name] = grad(y, bias)
        grads[name + " hlo"] = grad.lower(y, bias).compile(PRODUCTION_COMPILE).as_text()
    assert_close(blocks(y, bias), slices(y, bias))
    assert_close(grads["blocks"], grads["slices"])
    assert hlo_has(grads["blocks hlo"], "concatenate")
    assert not hlo_has(grads["blocks hlo"], "pad")
    assert hlo_has(grads["slices hlo"], "pad")  # so this test can fail


@pytest.mark.parametrize("overflow", [False, True])
def test_unrolled_and_one_gather_slot_passes_agree(x64, monkeypatch, overflow):
    """Slot widths up to `UNROLL_SLOTS` take one gather per slot column, wider ones one
    `[R, K, c]` gather; unrolled transposes of widths from `STORE_TRANSPOSES_FROM` on are
    stored before their concatenation. All three give the same aggregation and the same
    cotangents in `y`, the values and the bias (GraphProp's K = 14 is unrolled and
    stored), with and without overflow rows."""
    plain = random_undirected(np.random.default_rng(28), 12)
    max_degree = int(np.bincount(np.asarray(plain.receivers)).max())
    width = 2 if overflow else max_degree
    graph = jax.tree_util.tree_map(jnp.asarray, prepared(plain, slot_width=width))
    assert (graph.num_overflow > 0) == overflow and width >= 2
    ops = sj.graph.slots.slot_operators(graph, CODES["sym"], dtype=jnp.float64)
    rng = np.random.default_rng(29)
    y, bias = jnp.asarray(rng.normal(size=(12, 9))), jnp.asarray(rng.normal(size=3))

    def loss(y, bias, phi, psi):
        return jnp.sum(jnp.sin(gather.mix_aggregate(graph, (phi, psi), (phi, -psi), y, bias)))

    results, counts = {}, {}
    branches = {"unrolled": (width, width + 1), "stored": (width, width),
                "one gather": (width - 1, width + 1)}
    for name, (unroll, store_from) in branches.items():
        monkeypatch.setattr(gather, "UNROLL_SLOTS", unroll)
        monkeypatch.setattr(gather, "STORE_TRANSPOSES_FROM", store_from)
        fn = jax.jit(jax.value_and_grad(lambda *a: loss(*a), (0, 1, 2, 3)))  # traced anew
        results[name] = fn(y, bias, ops.phi, ops.psi)
        hlo = fn.lower(y, bias, ops.phi, ops.psi).as_text()
        counts[name] = {op: len(re.findall(rf"stablehlo\.{op}\b", hlo))
                        for op in ("gather", "while")}
    # the three branches ran: per-column gathers, then the stored transposes' loops
    assert counts["unrolled"]["gather"] > counts["one gather"]["gather"]
    assert counts["stored"]["while"] > counts["unrolled"]["while"]
    assert_close(results["unrolled"], results["one gather"])
    assert_close(results["stored"], results["one gather"])


# --- bad inputs --------------------------------------------------------------------


def test_prepared_graph_and_state_rows_must_agree_even_under_jit():
    pg = jax.tree_util.tree_map(jnp.asarray, prepared(random_undirected(
        np.random.default_rng(26), 6)))
    cfg = sj.SWANConfig()
    params = sj.init_params(jax.random.PRNGKey(0), 3, cfg)
    with pytest.raises(ValueError, match=r"x has shape \(5, 3\) but the prepared graph has 6 "
                                         r"nodes"):
        jax.jit(lambda x: sj.solve(params, pg, x, cfg))(jnp.ones((5, 3)))
    broken = pg._replace(mirror=pg.mirror[:-1])
    with pytest.raises(ValueError, match=r"prepared graph field mirror has shape"):
        sj.solve(params, broken, jnp.ones((6, 3)), cfg)
    wrong = pg._replace(neighbors=pg.neighbors.at[0, 0].set(99))
    with pytest.raises(ValueError, match=r"field neighbors\[0\] \(flat\) = 99 is out of range"):
        sj.graph.check_prepared(wrong)


# --- prepared batches ----------------------------------------------------------------


def varied_dataset(num_graphs: int, seed: int = 0):
    """Graphs of 20 to 60 nodes: paths with chords and a hub, random features."""
    from swan_jax.data import GraphDataset

    rng = np.random.default_rng(seed)
    graphs = []
    for _ in range(num_graphs):
        n = int(rng.integers(20, 61))
        s = np.arange(n - 1)
        chords = rng.integers(0, n, (n // 4, 2))
        hub = np.arange(1, min(n, 12))
        send = np.concatenate([s, chords[:, 0], hub])
        recv = np.concatenate([s + 1, chords[:, 1], np.zeros_like(hub)])
        graphs.append(dict(nodes=rng.normal(size=(n, 3)).astype(np.float32),
                           senders=np.concatenate([send, recv]),
                           receivers=np.concatenate([recv, send]),
                           graph_targets=rng.normal(size=(1, 2)).astype(np.float32)))
    return GraphDataset.from_graphs(graphs)


def test_batches_are_prepared_fill_the_budget_and_keep_one_shape():
    from swan_jax.data.batching import budget_for, iterate_batches, padding_share

    data = varied_dataset(300)
    budget = budget_for(data, 32)
    assert budget.slot_width is not None
    batches = list(iterate_batches(data, 32, budget, np.random.default_rng(1)))
    shapes = {tuple(np.shape(leaf) for leaf in jax.tree_util.tree_leaves(b.graph))
              for b in batches}
    assert len(shapes) == 1  # one compilation per epoch
    fills = [1 - padding_share(b) for b in batches[:-1]]
    assert np.mean(fills) >= 0.9, fills  # the quantile budget, not 1.15 x the mean
    seen = np.concatenate([b.graph_targets[b.graph_mask][:, 0] for b in batches])
    np.testing.assert_array_equal(np.sort(seen), np.sort(data.graph_targets[:, 0]))
    for batch in batches[:3]:  # cut from the data set's closure = prepared from scratch
        assert isinstance(batch.graph, sj.PreparedGraph)
        fresh = sj.prepare_graph(sj.graph.plain_graph(batch.graph), slot_width=budget.slot_width,
                                 num_overflow=budget.n_overflow, num_pairs=budget.n_pair)
        for a, b in zip(fresh, batch.graph, strict=True):
            assert (a is None and b is None) or np.array_equal(a, b)


def peptides(num: int, tmp_path):
    """The first `num` real Peptides-func graphs when the raw files are here (no
    download), else peptide-shaped stand-ins (`benchmarks.common`)."""
    import os
    from pathlib import Path

    from swan_jax.data import load_peptides_func

    for root in (os.environ.get("SWAN_DATA_DIR"), "/work/shared/data",
                 str(Path(__file__).resolve().parents[2] / "shared" / "data")):
        if root and (Path(root) / "peptides-functional").exists():
            splits = load_peptides_func(root, tmp_path / "cache", limit=num, download=False,
                                        progress=False)
            return splits["train"], "real"
    from benchmarks.common import _synthetic_peptides

    return _synthetic_peptides(num), "synthetic"


@pytest.mark.parametrize("variant", ["swan", "swan-learn"])
def test_a_peptides_batch_gives_the_same_model_gradient_on_both_paths(variant, tmp_path, x64):
    from swan_jax.data.batching import budget_for, iterate_batches
    from swan_jax.encoders import AtomEncoder

    data, _ = peptides(48, tmp_path)
    batch = next(iterate_batches(data, 16, budget_for(data, 16)))
    cfg = sj.SWANConfig(variant=variant, num_layers=3, epsilon=0.5)
    model = sj.Model(AtomEncoder(16), sj.SWANBlock(cfg), sj.GraphReadout((8, 10),
                                                                          pooling=("mean",)))
    params = jax.jit(model.init)(jax.random.PRNGKey(0), batch.graph)  # not op by op
    params = jax.tree_util.tree_map(lambda p: p.astype(jnp.float64), params)

    @jax.jit
    def value_and_grad(p, g):
        return jax.value_and_grad(lambda p: jnp.sum(model.apply(p, g) ** 2))(p)

    graph = jax.tree_util.tree_map(jnp.asarray, batch.graph)
    assert_close(value_and_grad(params, graph), value_and_grad(params, sj.graph.plain_graph(graph)))


def test_the_pair_gather_and_its_transpose_against_numpy():
    """`gather_pair_ends_joined` (SWAN-learn's edge MLP input) and its two-array form:
    `R[u] + S[v]` on each listed pair `(u <- v)`, 0 on padding pairs; the transpose sums
    a pair's cotangent into its receiver's `R` and its sender's `S`, as one `[N, 2c]`
    array. On the batch with multi-edges, self-loops and padding, with its own slot width
    and with width 1 (overflow rows); a non-`[N, 2c]` input is one line."""
    rng = np.random.default_rng(21)
    graph = awkward(rng)
    for name, pg in (("own width", prepared(graph)), ("K=1", prepared(graph, 1))):
        n, c = pg.num_nodes, 3
        ends = jnp.asarray(rng.normal(size=(n, 2 * c)))
        receivers, senders = np.asarray(pg.pair_receivers), np.asarray(pg.pair_senders)
        live = np.asarray(pg.pair_count) > 0
        expected = (np.asarray(ends)[receivers, :c] + np.asarray(ends)[senders, c:]) \
            * live[:, None]
        got = gather.gather_pair_ends_joined(pg, ends)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(gather.gather_pair_ends(pg, ends[:, :c], ends[:, c:]),
                                   expected, rtol=1e-6, atol=1e-6, err_msg=name)
        weights = jnp.asarray(rng.normal(size=got.shape))
        _, transpose = jax.vjp(lambda e, pg=pg: gather.gather_pair_ends_joined(pg, e), ends)
        (cotangent,) = transpose(weights)
        reference = np.zeros((n, 2 * c))
        w = np.asarray(weights) * live[:, None]
        np.add.at(reference[:, :c], receivers[live], w[live])
        np.add.at(reference[:, c:], senders[live], w[live])
        np.testing.assert_allclose(cotangent, reference, rtol=1e-5, atol=1e-5, err_msg=name)
    with pytest.raises(ValueError, match=r"^ends of shape \(10, 3\) is not \[N, 2c\]"):
        gather.gather_pair_ends_joined(pg, jnp.zeros((10, 3)))
