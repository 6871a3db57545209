"""The SWAN core against docs/conventions.md: operators, field, solvers, Jacobian, transforms."""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest
import scipy.integrate

import swan_jax as sj
from swan_jax.field import antisymmetric_weight, symmetric_weight
from tests import reference as ref
from tests.graphs import graph_from_edges, random_directed, random_undirected


def make_params(cfg, d, seed=0, dtype=jnp.float64):
    params = sj.init_params(jax.random.PRNGKey(seed), d, cfg, dtype)
    # Non-zero bias and edge-MLP bias so every term of the formulas is exercised.
    key = jax.random.PRNGKey(seed + 100)
    params["b"] = jax.random.normal(key, params["b"].shape, dtype) * 0.1
    if "k2" in params:
        params["k2"] = jnp.full_like(params["k2"], 0.05)
    return params


def np_params(params):
    return {k: np.asarray(v) for k, v in params.items()}


# --- operators ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_space_operators_are_exactly_antisymmetric_and_symmetric(seed, x64):
    rng = np.random.default_rng(seed)
    for graph in (random_undirected(rng, 9, isolated=2), random_directed(rng, 7, 15)):
        n = int(graph.n_node.sum())
        for adjacency in sj.ADJACENCIES:
            ops = sj.graph.edge_operators(graph, n, sj.config.ADJACENCY_CODES[adjacency],
                                          dtype=jnp.float64)
            A_hat = np.asarray(sj.graph.dense_operator(graph, ops.w_hat, n))
            A_tilde = np.asarray(sj.graph.dense_operator(graph, ops.w_tilde, n))
            S = A_tilde - A_tilde.T
            assert np.array_equal(S, -S.T)
            assert np.array_equal(A_hat + A_hat.T, (A_hat + A_hat.T).T)
            # The aggregations equal the dense operators applied to X.
            x = rng.normal(size=(n, 3))
            np.testing.assert_allclose(
                np.asarray(sj.graph.antisymmetric_aggregate(graph, ops.w_tilde, jnp.asarray(x))),
                S @ x, atol=1e-12)
            np.testing.assert_allclose(
                np.asarray(sj.graph.symmetric_aggregate(graph, ops.w_hat, jnp.asarray(x))),
                (A_hat + A_hat.T) @ x, atol=1e-12)


def test_psi_edge_weight_is_difference_of_inverse_degrees_of_the_same_edge(x64):
    # Star plus a tail: degrees 3, 2, 1, 1 differ on every edge. The public PyTorch code
    # pairs an edge with another edge's weight; docs/conventions.md asks for the reverse edge's.
    undirected = [(0, 1), (0, 2), (0, 3), (1, 4)]
    senders = [u for u, v in undirected] + [v for u, v in undirected]
    receivers = [v for u, v in undirected] + [u for u, v in undirected]
    graph = graph_from_edges(senders, receivers, 5)
    ops = sj.graph.edge_operators(graph, 5, 1.0, dtype=jnp.float64)  # sym
    S = np.asarray(sj.graph.dense_operator(graph, ops.w_tilde, 5))
    S = S - S.T
    deg = np.bincount(receivers, minlength=5)
    for v, u in zip(senders, receivers, strict=True):  # edge v -> u
        assert S[u, v] == pytest.approx(1 / deg[u] - 1 / deg[v], abs=1e-15)
    A = ref.dense_adjacency(senders, receivers, 5)
    _, A_tilde = ref.operators(A, "sym")
    np.testing.assert_array_equal(S, A_tilde - A_tilde.T)


def test_isolated_and_padding_nodes_get_zero_weights_not_nan(x64):
    graph = graph_from_edges([0, 1], [1, 0], 4)  # nodes 2, 3 isolated
    ops = sj.graph.edge_operators(graph, 4, 1.0, dtype=jnp.float64)  # sym
    assert np.all(np.isfinite(ops.w_hat)) and np.all(np.isfinite(ops.w_tilde))
    cfg = sj.SWANConfig()
    params = make_params(cfg, 3)
    x = jnp.ones((4, 3))
    out = sj.solve(params, graph, x, cfg)
    grads = jax.grad(lambda p: sj.solve(p, graph, x, cfg).sum())(params)
    assert np.all(np.isfinite(out))
    assert all(np.all(np.isfinite(g)) for g in jax.tree_util.tree_leaves(grads))


# --- the vector field --------------------------------------------------------------

CASES = list(itertools.product(sj.VARIANTS, sj.ADJACENCIES))


@pytest.mark.parametrize("variant,adjacency", CASES)
def test_vector_field_matches_dense_numpy(variant, adjacency, x64):
    rng = np.random.default_rng(1)
    cfg = sj.SWANConfig(variant=variant, adjacency=adjacency, beta=0.7, gamma=0.3)
    d = 4
    for graph in (random_undirected(rng, 8, isolated=1), random_directed(rng, 6, 14)):
        n = int(graph.n_node.sum())
        params = make_params(cfg, d, seed=2)
        x = rng.normal(size=(n, d))
        x0 = rng.normal(size=(n, d))
        got = sj.vector_field(params, graph, jnp.asarray(x), cfg, x0=jnp.asarray(x0))
        want = ref.vector_field(np_params(params), np.asarray(graph.senders),
                                np.asarray(graph.receivers), x, cfg, x0=x0)
        assert np.max(np.abs(np.asarray(got) - want)) < 1e-9


@pytest.mark.parametrize("variant", sj.VARIANTS)
def test_layer_dependent_weights_use_the_step_of_floor_t_over_epsilon(variant, x64):
    rng = np.random.default_rng(3)
    cfg = sj.SWANConfig(variant=variant, num_layers=4, epsilon=0.3, weight_sharing=False)
    graph = random_undirected(rng, 7)
    params = make_params(cfg, 3, seed=4)
    x = rng.normal(size=(7, 3))
    s, r = np.asarray(graph.senders), np.asarray(graph.receivers)
    for layer in range(4):
        for t in (layer * 0.3, layer * 0.3 + 0.29):
            got = sj.vector_field(params, graph, jnp.asarray(x), cfg, t=t)
            want = ref.vector_field(np_params(params), s, r, x, cfg, layer=layer)
            assert np.max(np.abs(np.asarray(got) - want)) < 1e-9
    got = sj.solve(params, graph, jnp.asarray(x), cfg)
    want = ref.euler(np_params(params), s, r, x, cfg)
    assert np.max(np.abs(np.asarray(got) - want)) < 1e-9



def test_phi_and_psi_weights_are_the_authors_triu_parametrisations(x64):
    """`V' = triu(V, 1) - triu(V, 1)^T`, `Z' = triu(Z) + triu(Z)^T` (gravins/SWAN
    `AntiSymmetric`, `Symmetric`), layer by layer on `[L, d, d]`: exactly antisymmetric
    and symmetric, read from the upper triangle only."""
    raw = np.random.default_rng(6).normal(size=(3, 4, 4))
    v = np.asarray(antisymmetric_weight(jnp.asarray(raw)))
    z = np.asarray(symmetric_weight(jnp.asarray(raw)))
    for layer in range(3):
        upper = np.triu(raw[layer], 1)
        np.testing.assert_array_equal(v[layer], upper - upper.T)
        upper = np.triu(raw[layer])
        np.testing.assert_array_equal(z[layer], upper + upper.T)
    assert np.array_equal(v, -np.swapaxes(v, 1, 2)) and np.array_equal(z, np.swapaxes(z, 1, 2))


@pytest.mark.parametrize("weight_sharing,layout", [(True, "edges"), (False, "slots")])
def test_only_the_upper_triangle_of_raw_v_and_z_is_trained(weight_sharing, layout, x64):
    """As the authors' `right_inverse` keeps `triu(V, 1)`, `triu(Z)`: the raw entries
    below (and for `V` on) the diagonal get exactly zero gradient, the others do not; the
    -ne variants' plain `V` is trained whole."""
    rng = np.random.default_rng(1)
    graph = random_undirected(rng, 8)  # unequal degrees on an edge: Psi is not zero
    graph = graph if layout == "edges" else sj.prepare_graph(graph)
    x = jnp.asarray(rng.normal(size=(8, 4)))
    below = np.tril(np.ones((4, 4), bool), -1)
    for variant in ("swan", "swan-ne"):
        cfg = sj.SWANConfig(variant=variant, num_layers=2, weight_sharing=weight_sharing,
                            beta=0.7)
        params = make_params(cfg, 4, seed=5)
        grads = jax.grad(lambda p, c=cfg: jnp.sum(sj.solve(p, graph, x, c) ** 2))(params)
        v, z = np.asarray(grads["V"]), np.asarray(grads["Z"])
        assert np.all(z[..., below] == 0) and np.all(z[..., ~below] != 0)
        if variant == "swan":
            assert np.all(v[..., ~below.T] == 0) and np.all(v[..., below.T] != 0)
        else:
            assert np.all(v != 0)


# --- solvers -----------------------------------------------------------------------


@pytest.mark.parametrize("variant", sj.VARIANTS)
def test_euler_solve_equals_num_layers_explicit_steps(variant, x64):
    rng = np.random.default_rng(5)
    cfg = sj.SWANConfig(variant=variant, num_layers=7, epsilon=0.2, beta=-1.0)
    graph = random_undirected(rng, 10, isolated=1)
    params = make_params(cfg, 5, seed=6)
    x0 = rng.normal(size=(10, 5))
    got = sj.solve(params, graph, jnp.asarray(x0), cfg, solver="euler")
    want = ref.euler(np_params(params), np.asarray(graph.senders),
                     np.asarray(graph.receivers), x0, cfg)
    assert np.max(np.abs(np.asarray(got) - want)) < 1e-10


def test_euler_trajectory_holds_every_layer(x64):
    rng = np.random.default_rng(7)
    cfg = sj.SWANConfig(num_layers=3, epsilon=0.5)
    graph = random_undirected(rng, 6)
    params = make_params(cfg, 2)
    x0 = jnp.asarray(rng.normal(size=(6, 2)))
    traj = sj.solve(params, graph, x0, cfg, save_trajectory=True)
    assert traj.shape == (4, 6, 2)
    np.testing.assert_allclose(traj[0], x0, atol=1e-12)
    for layer in range(1, 4):
        step = sj.solve(params, graph, x0, cfg.replace(num_layers=layer))
        np.testing.assert_allclose(traj[layer], step, atol=1e-10)


@pytest.mark.parametrize("variant", ["swan", "swan-learn", "adgn"])
def test_tsit5_matches_scipy_on_the_dense_field(variant, x64):
    rng = np.random.default_rng(8)
    cfg = sj.SWANConfig(variant=variant, num_layers=5, epsilon=0.2)
    graph = random_undirected(rng, 7)
    params = make_params(cfg, 3, seed=9)
    x0 = rng.normal(size=(7, 3))
    got = sj.solve(params, graph, jnp.asarray(x0), cfg, solver="tsit5", rtol=1e-10, atol=1e-12)
    s, r, p = np.asarray(graph.senders), np.asarray(graph.receivers), np_params(params)

    def rhs(t, y):
        return ref.vector_field(p, s, r, y.reshape(7, 3), cfg, x0=x0).reshape(-1)

    sol = scipy.integrate.solve_ivp(rhs, (0.0, 1.0), x0.reshape(-1), method="DOP853",
                                    rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(np.asarray(got).reshape(-1), sol.y[:, -1], atol=1e-8)


@functools.cache
def _t1_problem():
    """The problem every named solver integrates, and its fine dopri8 solution (solved
    once for all the solvers' cases, not once per case)."""
    with jax.enable_x64(True):
        rng = np.random.default_rng(10)
        cfg = sj.SWANConfig(num_layers=50, epsilon=0.02)  # t1 = 1
        graph = random_undirected(rng, 6)
        params = make_params(cfg, 3)
        x0 = jnp.asarray(rng.normal(size=(6, 3)))
        fine = sj.solve(params, graph, x0, cfg, solver="dopri8", rtol=1e-11, atol=1e-12)
        return cfg, graph, params, x0, np.asarray(fine)


@pytest.mark.parametrize("solver", sj.SOLVERS)
def test_every_named_solver_integrates_to_t1(solver, x64):
    cfg, graph, params, x0, fine = _t1_problem()
    assert x0.dtype == jnp.float64 and fine.dtype == np.float64
    got = sj.solve(params, graph, x0, cfg, solver=solver, rtol=1e-8, atol=1e-10)
    # Fixed-step methods carry their truncation error at dt = 0.02: O(dt) for Euler,
    # O(dt^2) for the second-order ones; adaptive ones follow their tolerances.
    tol = {"euler": 2e-2, "heun": 1e-3, "midpoint": 1e-3, "ralston": 1e-3}.get(solver, 1e-6)
    assert np.max(np.abs(np.asarray(got - fine))) < tol


def test_an_implicit_solver_takes_fixed_layer_steps_with_the_solve_tolerances(x64):
    """`adaptive=False` with kvaerno3: one implicit step per layer, its root find held to
    the solve's `rtol` / `atol` (diffrax takes them from an adaptive controller, and
    without one it failed: "Type of `other` not understood"). Third order at
    dt = 0.02: close to the fine solution, and a finite gradient."""
    cfg, graph, params, x0, fine = _t1_problem()
    got = sj.solve(params, graph, x0, cfg, solver="kvaerno3", adaptive=False, rtol=1e-10,
                   atol=1e-12)
    assert np.max(np.abs(np.asarray(got - fine))) < 1e-5
    grad = jax.grad(lambda p: jnp.sum(sj.solve(p, graph, x0, cfg, solver="kvaerno3",
                                               adaptive=False) ** 2))(params)
    assert all(np.all(np.isfinite(leaf)) for leaf in jax.tree_util.tree_leaves(grad))


@pytest.mark.parametrize("solver", sj.solvers.IMPLICIT_SOLVERS)
def test_an_implicit_solver_solves_its_stages_without_a_dense_jacobian_to_the_same_gradient(
        solver, x64):
    """Each stage is a Newton iteration with a Jacobian-free GMRES solve (diffrax's default
    reused a dense LU of the whole state and rejected half its steps): the gradient of the
    solution matches an explicit solver's at tight tolerances."""
    diffrax_solver, _ = sj.solvers.make_solver(solver)
    assert isinstance(diffrax_solver.root_finder.linear_solver, sj.solvers.lx.GMRES)
    cfg, graph, params, x0, _ = _t1_problem()

    def grad(name, tol):
        return jax.grad(lambda p: jnp.sum(sj.solve(p, graph, x0, cfg, solver=name,
                                                   rtol=tol, atol=tol) ** 2))(params)

    for got, want in zip(jax.tree_util.tree_leaves(grad(solver, 1e-9)),
                         jax.tree_util.tree_leaves(grad("dopri8", 1e-11)), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-7)


def test_backsolve_with_an_implicit_solver_refuses_parameters_of_another_dtype(x64):
    """float32 parameters on a float64 state: one line naming both dtypes and the two ways
    out, before anything runs (lineax raised a TypeError inside the adjoint's root find);
    cast to the state's dtype, the same solve runs."""
    rng = np.random.default_rng(12)
    cfg = sj.SWANConfig(num_layers=3, epsilon=0.1)
    graph = random_undirected(rng, 5)
    params = sj.init_params(jax.random.PRNGKey(0), 2, cfg)
    x0 = jnp.asarray(rng.normal(size=(5, 2)))
    assert x0.dtype == jnp.float64 and {leaf.dtype for leaf in jax.tree_util.tree_leaves(
        params)} == {jnp.dtype("float32")}

    def loss(p):
        return jnp.sum(sj.solve(p, graph, x0, cfg, "kvaerno3", adjoint="backsolve") ** 2)

    with pytest.raises(ValueError, match=r"^adjoint 'backsolve' with the implicit solver "
                       r"'kvaerno3' needs the parameters in the state's dtype float64, but "
                       r"they hold float32: cast them .* or use adjoint 'recursive' or "
                       r"'direct'"):
        jax.grad(loss)(params)
    cast = jax.tree_util.tree_map(lambda a: a.astype(x0.dtype), params)
    assert all(np.all(np.isfinite(g)) for g in jax.tree_util.tree_leaves(jax.grad(loss)(cast)))


def test_any_diffrax_solver_instance_is_accepted(x64):
    import diffrax

    rng = np.random.default_rng(11)
    cfg = sj.SWANConfig(num_layers=3)
    graph = random_undirected(rng, 5)
    params = make_params(cfg, 2)
    x0 = jnp.asarray(rng.normal(size=(5, 2)))
    a = sj.solve(params, graph, x0, cfg, solver=diffrax.Euler())
    b = sj.solve(params, graph, x0, cfg, solver="euler")
    np.testing.assert_allclose(a, b, atol=1e-14)


@pytest.mark.parametrize("adjoint", ["recursive", "direct"])
def test_discrete_adjoints_equal_backprop_through_euler_steps(adjoint, x64):
    rng = np.random.default_rng(12)
    cfg = sj.SWANConfig(num_layers=4, epsilon=0.05)
    graph = random_undirected(rng, 6)
    params = make_params(cfg, 3)
    x0 = jnp.asarray(rng.normal(size=(6, 3)))

    def loop(p):
        x = x0
        for _ in range(cfg.num_layers):
            x = x + cfg.epsilon * sj.vector_field(p, graph, x, cfg)
        return jnp.sum(x**2)

    exact = jax.jit(jax.grad(loop))(params)
    got = jax.jit(jax.grad(
        lambda p: jnp.sum(sj.solve(p, graph, x0, cfg, adjoint=adjoint) ** 2)))(params)
    for key in exact:
        np.testing.assert_allclose(got[key], exact[key], atol=1e-12)


def test_backsolve_adjoint_matches_the_continuous_gradient(x64):
    # Backsolve integrates the continuous adjoint ODE backwards, so it agrees with
    # backprop only up to the solver's error: compare both at tight tolerances.
    rng = np.random.default_rng(12)
    cfg = sj.SWANConfig(num_layers=4, epsilon=0.05)
    graph = random_undirected(rng, 6)
    params = make_params(cfg, 3)
    x0 = jnp.asarray(rng.normal(size=(6, 3)))

    def loss(p, adjoint):
        out = sj.solve(p, graph, x0, cfg, "tsit5", rtol=1e-10, atol=1e-12, adjoint=adjoint)
        return jnp.sum(out**2)

    grad = jax.jit(jax.grad(loss), static_argnums=1)  # one program each, not op by op
    exact = grad(params, "recursive")
    got = grad(params, "backsolve")
    for key in exact:
        np.testing.assert_allclose(got[key], exact[key], atol=1e-7)


def test_adaptive_solver_out_of_steps_says_what_to_change(x64):
    import equinox as eqx

    rng = np.random.default_rng(13)
    cfg = sj.SWANConfig(num_layers=5)
    graph = random_undirected(rng, 5)
    params = make_params(cfg, 2)
    x0 = jnp.asarray(rng.normal(size=(5, 2)))
    with pytest.raises(eqx.EquinoxRuntimeError, match="max_steps=2.*kvaerno5"):
        sj.solve(params, graph, x0, cfg, solver="tsit5", rtol=1e-10, atol=1e-10, max_steps=2)


# --- Jacobian facts ----------------------------------------------------------------


@pytest.mark.parametrize("variant,adjacency", list(itertools.product(
    ["swan", "swan-learn"], sj.ADJACENCIES)))
def test_kronecker_m2_has_real_part_minus_gamma_and_jacobian_is_m1_m2(variant, adjacency, x64):
    rng = np.random.default_rng(14)
    gamma = 0.2
    cfg = sj.SWANConfig(variant=variant, adjacency=adjacency, gamma=gamma, beta=0.8)
    graph = random_undirected(rng, 6, isolated=1)
    params = make_params(cfg, 3, seed=15)
    x = rng.normal(size=(6, 3))
    s, r = np.asarray(graph.senders), np.asarray(graph.receivers)
    M1, M2 = ref.m1_m2(np_params(params), s, r, x, cfg)
    eig = np.linalg.eigvals(M2)
    np.testing.assert_allclose(eig.real, -gamma, atol=1e-10)

    def f_vec(v):
        X = v.reshape(3, 6).T  # inverse of column stacking
        out = sj.vector_field(params, graph, X, cfg, x0=jnp.asarray(x))
        return out.T.reshape(-1)

    J = np.asarray(jax.jacfwd(f_vec)(jnp.asarray(ref.vec(x))))
    np.testing.assert_allclose(J, M1 @ M2, atol=1e-10)


def test_swan_ne_m2_is_not_purely_imaginary(x64):
    rng = np.random.default_rng(16)
    cfg = sj.SWANConfig(variant="swan-ne", gamma=0.0)
    graph = random_undirected(rng, 6)
    params = make_params(cfg, 3)
    _, M2 = ref.m1_m2(np_params(params), np.asarray(graph.senders),
                      np.asarray(graph.receivers), rng.normal(size=(6, 3)), cfg)
    assert np.max(np.abs(np.linalg.eigvals(M2).real)) > 1e-3


# --- transforms, padding, dtypes ---------------------------------------------------


def test_padding_leaves_real_nodes_unchanged(x64):
    rng = np.random.default_rng(17)
    g1, g2 = random_undirected(rng, 5), random_undirected(rng, 7, isolated=2)
    batch = jraph.batch([g1, g2])
    n = int(batch.n_node.sum())
    x = rng.normal(size=(n, 3))
    batch = batch._replace(nodes=jnp.asarray(x))
    padded = jraph.pad_with_graphs(batch, n_node=n + 6, n_edge=int(batch.n_edge.sum()) + 10,
                                   n_graph=4)
    xp = np.concatenate([x, rng.normal(size=(6, 3))])
    xq = np.concatenate([x, 1e3 * rng.normal(size=(6, 3))])  # other padding values
    for variant in sj.VARIANTS:
        cfg = sj.SWANConfig(variant=variant)
        params = make_params(cfg, 3)
        a = sj.solve(params, batch, jnp.asarray(x), cfg)
        b = sj.solve(params, padded, jnp.asarray(xp), cfg)
        c = sj.solve(params, padded, jnp.asarray(xq), cfg)
        # Same shapes: nothing of the padding reaches a real node, bit for bit.
        np.testing.assert_array_equal(np.asarray(b)[:n], np.asarray(c)[:n])
        # Other shapes: XLA may vectorise arrays of another length differently (FMA,
        # tanh remainder loops), so the last bit may move; nothing more.
        np.testing.assert_allclose(np.asarray(a), np.asarray(b)[:n], rtol=1e-14, atol=1e-15)


def test_vmap_over_four_parameter_sets_equals_four_calls():
    rng = np.random.default_rng(18)
    cfg = sj.SWANConfig(variant="swan-learn")
    graph = random_undirected(rng, 8)
    x0 = jnp.asarray(rng.normal(size=(8, 4)), jnp.float32)
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    stacked = jax.vmap(lambda k: sj.init_params(k, 4, cfg))(keys)
    batched = jax.jit(jax.vmap(lambda p: sj.solve(p, graph, x0, cfg)))(stacked)
    for i, key in enumerate(keys):
        single = sj.solve(sj.init_params(key, 4, cfg), graph, x0, cfg)
        np.testing.assert_allclose(batched[i], single, rtol=1e-5, atol=1e-6)


def test_vmap_over_beta_gamma_epsilon_shares_one_program():
    rng = np.random.default_rng(19)
    graph = random_undirected(rng, 6)
    x0 = jnp.asarray(rng.normal(size=(6, 3)), jnp.float32)
    params = sj.init_params(jax.random.PRNGKey(1), 3, sj.SWANConfig())
    betas, gammas, epss = (jnp.array([1.0, 0.1, -1.0]), jnp.array([0.1, 1.0, 0.1]),
                           jnp.array([0.5, 0.1, 0.01]))
    grid = sj.SWANConfig(beta=betas, gamma=gammas, epsilon=epss)
    out = jax.jit(jax.vmap(lambda c: sj.solve(params, graph, x0, c)))(grid)
    for i in range(3):
        cfg = sj.SWANConfig(beta=float(betas[i]), gamma=float(gammas[i]), epsilon=float(epss[i]))
        np.testing.assert_allclose(out[i], sj.solve(params, graph, x0, cfg), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("variant", sj.VARIANTS)
def test_jit_grad_in_float32_are_finite(variant):
    rng = np.random.default_rng(20)
    cfg = sj.SWANConfig(variant=variant)
    graph = random_undirected(rng, 8, isolated=1)
    params = sj.init_params(jax.random.PRNGKey(2), 4, cfg)
    x0 = jnp.asarray(rng.normal(size=(8, 4)), jnp.float32)
    def loss(p):
        out = sj.solve(p, graph, x0, cfg)
        return jnp.sum(out ** 2), out

    # One program for the solution and its gradient (compiling is this test's cost).
    grads, out = jax.jit(jax.grad(loss, has_aux=True))(params)
    assert out.dtype == jnp.float32 and out.shape == x0.shape
    for key, g in grads.items():
        assert np.all(np.isfinite(g)), key
        if key != "b" or variant != "adgn":
            assert np.any(g != 0), key


# --- errors before tracing ---------------------------------------------------------


def _ok_inputs():
    rng = np.random.default_rng(21)
    graph = random_undirected(rng, 5)
    cfg = sj.SWANConfig()
    params = sj.init_params(jax.random.PRNGKey(0), 3, cfg)
    return graph, cfg, params, jnp.asarray(rng.normal(size=(5, 3)), jnp.float32)


@pytest.mark.parametrize("change,message", [
    (lambda g, x: (g._replace(senders=g.senders.at[2].set(9)), x),
     r"senders\[2\] = 9 is out of range"),
    (lambda g, x: (g._replace(receivers=g.receivers.at[0].set(-1)), x), r"receivers\[0\] = -1"),
    (lambda g, x: (g._replace(n_node=jnp.asarray([4])), x), r"4 nodes|sum\(graph.n_node\)"),
    (lambda g, x: (g, x[:, :2]), r"width 2 but the parameters expect 3"),
    (lambda g, x: (g, x.at[3, 1].set(jnp.nan)), r"non-finite value .* row 3, column 1"),
    (lambda g, x: (g, x[:4]), r"4 rows but the graph has 5 nodes"),
])
def test_bad_inputs_raise_value_errors_that_name_the_problem(change, message):
    graph, cfg, params, x = _ok_inputs()
    graph, x = change(graph, x)
    with pytest.raises(ValueError, match=message):
        sj.vector_field(params, graph, x, cfg)
    with pytest.raises(ValueError, match=message):
        sj.solve(params, graph, x, cfg)


@pytest.mark.parametrize("kwargs,message", [
    ({"variant": "swan-xl"}, r"unknown variant 'swan-xl'; valid variants: swan, swan-learn"),
    ({"adjacency": "lap"}, r"unknown adjacency 'lap'; valid adjacencies: sym, adj"),
    ({"epsilon": 0.0}, r"epsilon must be > 0"),
    ({"epsilon": -0.1}, r"epsilon must be > 0"),
    ({"num_layers": 0}, r"num_layers must be an integer >= 1"),
    ({"activation": "softsign"}, r"unknown activation"),
])
def test_bad_config_raises(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sj.SWANConfig(**kwargs)


def test_unknown_solver_and_adjoint_list_the_valid_ones():
    graph, cfg, params, x = _ok_inputs()
    with pytest.raises(ValueError, match=r"solver 'rk4'; valid solvers: euler, heun.*kvaerno5"):
        sj.solve(params, graph, x, cfg, solver="rk4")
    with pytest.raises(ValueError, match=r"unknown adjoint 'magic'; valid adjoints: recursive"):
        sj.solve(params, graph, x, cfg, adjoint="magic")


def test_missing_and_misshapen_params_are_named():
    graph, cfg, params, x = _ok_inputs()
    with pytest.raises(ValueError, match=r"lack keys \['K1', 'k1', 'K2', 'k2'\]"):
        sj.vector_field(params, graph, x, cfg.replace(variant="swan-learn"))
    with pytest.raises(ValueError, match=r"expected \[5, d, d\]"):
        sj.vector_field(params, graph, x, cfg.replace(weight_sharing=False))


def test_explicit_fixed_steps_hold_no_host_callback():
    """JAX's persistent compilation cache refuses programs with host callbacks, so the
    training programs of explicit fixed-step solvers must hold none; an implicit solver's
    step can fail and keeps its run-time check (a callback), so this test can fail."""
    rng = np.random.default_rng(14)
    cfg = sj.SWANConfig(num_layers=3)
    graph = random_undirected(rng, 5)
    params = make_params(cfg, 2, dtype=jnp.float32)  # (this test runs without x64)
    x0 = jnp.asarray(rng.normal(size=(5, 2)), jnp.float32)

    def lowered(solver):
        return jax.jit(lambda p: sj.solve(p, graph, x0, cfg, solver=solver,
                                          adaptive=False)).lower(params).as_text()

    for solver in ("euler", "heun", "ralston"):
        assert "callback" not in lowered(solver), solver
    assert "callback" in lowered("kvaerno3")
