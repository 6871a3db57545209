"""`swan_jax.analysis` against hand-computed cases and docs/conventions.md's "Jacobian facts"."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import swan_jax as sj
from swan_jax import analysis as sja
from swan_jax.runs.checkpoint import CheckpointStore
from tests import reference as ref
from tests.graphs import random_undirected


def make_params(cfg, d, seed=0, dtype=jnp.float64):
    params = sj.init_params(jax.random.PRNGKey(seed), d, cfg, dtype)
    # Non-zero biases so every term of the formulas is exercised.
    params["b"] = jax.random.normal(jax.random.PRNGKey(seed + 100), params["b"].shape, dtype) * 0.1
    if "k2" in params:
        params["k2"] = jnp.full_like(params["k2"], 0.05)
    return params


# --- hand-computed: the 3-node path 0 - 1 - 2 -------------------------------------

PATH = sja.line_graph(3)
# Degrees 1, 2, 1: A_tilde = D^-1 A has rows [0, 1, 0], [1/2, 0, 1/2], [0, 1, 0].
PATH_S = np.array([[0.0, 0.5, 0.0], [-0.5, 0.0, -0.5], [0.0, 0.5, 0.0]])  # A_tilde - A_tilde^T
PATH_A = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])


def test_path_graph_swan_jacobian_by_hand(x64):
    # d = 1: W - W^T = V - V^T = 0, so only -gamma and beta (Z + Z^T) S = 2 beta z S remain;
    # at x = 0 with b = 0, tanh' = 1 and J = M2 = -gamma I + 2 beta z S.
    gamma, beta, z = 0.3, 0.7, 0.4
    cfg = sj.SWANConfig(gamma=gamma, beta=beta)
    params = {"W": jnp.array([[0.9]]), "V": jnp.array([[-0.6]]), "Z": jnp.array([[z]]),
              "b": jnp.zeros(1)}
    x = jnp.zeros((3, 1))
    want = -gamma * np.eye(3) + 2 * beta * z * PATH_S
    np.testing.assert_allclose(sja.graph_jacobian(params, PATH, x, cfg), want, atol=1e-15)
    m1, m2 = sja.jacobian_factors(params, PATH, x, cfg)
    np.testing.assert_allclose(m1, np.eye(3), atol=1e-15)
    np.testing.assert_allclose(m2, want, atol=1e-15)
    # S has eigenvalues 0, +-i/sqrt(2): the spectrum is -gamma + 2 beta z {0, +-i/sqrt(2)}.
    eig = sja.spectrum(m2)
    want_eig = -gamma + 2 * beta * z * np.array([0, 1j / np.sqrt(2), -1j / np.sqrt(2)])
    by_imag = np.argsort(eig.imag)
    np.testing.assert_allclose(eig[by_imag], want_eig[np.argsort(want_eig.imag)], atol=1e-14)
    summary = sja.dissipativity_summary(params, PATH, x, cfg)
    assert summary.non_dissipative and summary.max_abs_real_shift < 1e-15


def test_path_graph_adgn_spectrum_by_hand_is_real(x64):
    # adgn, A_hat = A, d = 1, x = 0: J = -gamma I + v A; A has eigenvalues 0, +-sqrt(2).
    gamma, v = 0.1, 0.5
    cfg = sj.SWANConfig(variant="adgn", adjacency="adj", gamma=gamma)
    params = {"W": jnp.array([[0.2]]), "V": jnp.array([[v]]), "b": jnp.zeros(1)}
    x = jnp.zeros((3, 1))
    np.testing.assert_allclose(sja.graph_jacobian(params, PATH, x, cfg),
                               -gamma * np.eye(3) + v * PATH_A, atol=1e-15)
    summary = sja.dissipativity_summary(params, PATH, x, cfg)
    assert summary.max_abs_real_shift == pytest.approx(v * np.sqrt(2), abs=1e-12)
    assert summary.real_range[1] == pytest.approx(-gamma + v * np.sqrt(2), abs=1e-12)
    assert not summary.non_dissipative and "unstable" in str(summary)


def test_path_graph_laplacians_by_hand(x64):
    r = 1 / np.sqrt(2)
    np.testing.assert_allclose(sja.dense_laplacian(PATH, 3, "sym", jnp.float64),
                               [[1, -r, 0], [-r, 1, -r], [0, -r, 1]], atol=1e-15)
    np.testing.assert_allclose(sja.dense_laplacian(PATH, 3, "combinatorial", jnp.float64),
                               [[1, -1, 0], [-1, 2, -1], [0, -1, 1]], atol=1e-15)
    jac = sja.heat_jacobian(PATH, 3, 2, "combinatorial", jnp.float64)
    np.testing.assert_allclose(jac, -np.kron(np.eye(2), [[1, -1, 0], [-1, 2, -1], [0, -1, 1]]))
    # Combinatorial path Laplacian: eigenvalues 0, 1, 3, each once per channel.
    np.testing.assert_allclose(np.sort(sja.spectrum(jac).real), [-3, -3, -1, -1, 0, 0],
                               atol=1e-12)
    with pytest.raises(ValueError, match="unknown Laplacian"):
        sja.laplacian_apply(PATH, jnp.ones((3, 1)), "rw")


# --- docs/conventions.md "Jacobian facts" on random graphs -------------------------------------

# One graph and width for all of them: eager JAX compiles each op once per shape.
GRAPH = random_undirected(np.random.default_rng(5), 7, isolated=1)
WIDTH = 3


def random_state(seed):
    return jnp.asarray(np.random.default_rng(seed).normal(size=(7, WIDTH)))


# Every variant, each with one of the two adjacencies (both are covered twice or more).
VARIANT_CASES = [(variant, sj.ADJACENCIES[i % 2]) for i, variant in enumerate(sj.VARIANTS)]


@pytest.mark.parametrize("variant,adjacency", VARIANT_CASES)
def test_jacobian_is_m1_m2_and_m2_is_spec_kronecker_form(variant, adjacency, x64):
    cfg = sj.SWANConfig(variant=variant, adjacency=adjacency, beta=0.8, gamma=0.2)
    params = make_params(cfg, WIDTH, seed=6)
    x = random_state(1)
    jac = sja.graph_jacobian(params, GRAPH, x, cfg)
    m1, m2 = sja.jacobian_factors(params, GRAPH, x, cfg)
    np.testing.assert_allclose(jac, m1 @ m2, atol=1e-12)
    np.testing.assert_array_equal(m1, jnp.diag(jnp.diagonal(m1)))
    ref_m1, ref_m2 = ref.m1_m2({k: np.asarray(v) for k, v in params.items()},
                               np.asarray(GRAPH.senders), np.asarray(GRAPH.receivers),
                               np.asarray(x), cfg)
    np.testing.assert_allclose(m2, ref_m2, atol=1e-12)
    np.testing.assert_allclose(m1, ref_m1, atol=1e-12)
    # Column stacking: J[c N + v, c' N + u] = d f(X)[v, c] / d X[u, c'].
    field = jax.jacfwd(lambda state: sj.vector_field(params, GRAPH, state, cfg, x0=x))(x)
    np.testing.assert_allclose(jac, field.transpose(1, 0, 3, 2).reshape(21, 21), atol=1e-12)


def test_m1_uses_the_derivative_of_any_activation_and_t_picks_the_layer(x64):
    x = random_state(2)
    for activation in ("relu", "sigmoid"):
        cfg = sj.SWANConfig(activation=activation, num_layers=3, weight_sharing=False)
        params = make_params(cfg, WIDTH, seed=8)
        t = 1.5 * cfg.epsilon  # step 1's weights
        m1, m2 = sja.jacobian_factors(params, GRAPH, x, cfg, t=t)
        np.testing.assert_allclose(sja.graph_jacobian(params, GRAPH, x, cfg, t=t), m1 @ m2,
                                   atol=1e-12)
        layer1 = {k: (v[1] if k in "WVZb" else v) for k, v in params.items()}
        _, m2_layer1 = sja.jacobian_factors(layer1, GRAPH, x, cfg.replace(weight_sharing=True))
        np.testing.assert_allclose(m2, m2_layer1, atol=1e-15)
        assert not np.allclose(m2, sja.jacobian_factors(params, GRAPH, x, cfg)[1])


@pytest.mark.parametrize("variant", ["swan", "swan-learn", "swan-beta0"])
def test_swan_spectrum_sits_on_minus_gamma_to_round_off(variant, x64):
    cfg = sj.SWANConfig(variant=variant, gamma=0.15, beta=1.3)
    params = make_params(cfg, WIDTH, seed=10)
    x, x0 = random_state(3), random_state(4)
    summary = sja.dissipativity_summary(params, GRAPH, x, cfg, x0)
    assert summary.non_dissipative
    assert summary.max_abs_real_shift < 1e-13
    assert summary.real_range[0] == pytest.approx(-0.15, abs=1e-13)
    # J = M1 M2 keeps Re(lambda) in [-gamma max M1, -gamma min M1]; purely imaginary at gamma 0.
    assert summary.jacobian_band_violation < 1e-10
    at_zero = sja.dissipativity_summary(params, GRAPH, x, cfg.replace(gamma=0.0), x0)
    assert at_zero.max_abs_real_shift_jacobian < 1e-10
    assert re.fullmatch(rf"{variant}: max \|Re\(lambda\(M2\)\) \+ gamma\| = \d\.\de-\d\d "
                        r"\(non-dissipative\)", str(summary))


@pytest.mark.parametrize("variant", ["swan-ne", "swan-learn-ne", "adgn"])
def test_non_enforced_variants_are_not_round_off(variant, x64):
    cfg = sj.SWANConfig(variant=variant, gamma=0.1)
    params = make_params(cfg, WIDTH, seed=14)
    summary = sja.dissipativity_summary(params, GRAPH, random_state(6), cfg)
    assert summary.max_abs_real_shift > 1e-3
    assert not summary.non_dissipative
    assert str(summary).startswith(f"{variant}: max |Re(lambda(M2)) + gamma| = ")
    assert "(non-dissipative)" not in str(summary)


def test_diffusion_is_dissipative_with_a_real_spectrum(x64):
    jac = sja.heat_jacobian(GRAPH, 7, WIDTH, dtype=jnp.float64)
    eig = sja.spectrum(jac)
    assert np.max(np.abs(eig.imag)) < 1e-12 and np.max(eig.real) < 1e-12
    assert np.min(eig.real) < -0.5  # the normalised Laplacian of a connected graph
    summary = sja.summarize_spectrum("diffusion", jac)
    assert not summary.non_dissipative and "dissipative: " in str(summary)


# --- sensitivity --------------------------------------------------------------------


def full_jacobian_sensitivity(trajectory_fn, x0):
    """`[L + 1, N(v), N(u)]` block norms from the full reverse-mode Jacobian."""
    full = jax.jacrev(trajectory_fn)(x0)  # [L + 1, N, d, N, d]
    return np.sqrt(np.sum(np.asarray(full) ** 2, axis=(2, 4)))


RING = sja.ring_graph(8)
RING_CFG = sj.SWANConfig(gamma=0.0, epsilon=0.2, num_layers=30)


def test_forward_sensitivity_equals_the_full_reverse_mode_jacobian(x64):
    params = make_params(RING_CFG, 3, seed=16)
    x0 = 0.3 * jax.random.normal(jax.random.PRNGKey(17), (8, 3), jnp.float64)
    want = full_jacobian_sensitivity(
        lambda z: sj.solve(params, RING, z, RING_CFG, save_trajectory=True), x0)
    for source in (0, 5):
        got = sja.sensitivity(params, RING, x0, RING_CFG, source)
        assert got.shape == (31, 8)
        np.testing.assert_allclose(got, want[:, :, source], rtol=1e-10, atol=1e-13)
    # Layer 0 is the identity: sqrt(d) on the source, 0 elsewhere.
    np.testing.assert_allclose(got[0], np.sqrt(3) * (np.arange(8) == 5), atol=1e-15)


def test_swan_sensitivity_does_not_decay_while_diffusion_does(x64):
    # Theorems 3.1 / 3.2: non-dissipative SWAN keeps ||d X(l) / d x_u(0)||; heat loses it.
    params = make_params(RING_CFG, 3, seed=16)
    x0 = 0.3 * jax.random.normal(jax.random.PRNGKey(17), (8, 3), jnp.float64)
    swan = np.linalg.norm(sja.sensitivity(params, RING, x0, RING_CFG, 0), axis=1)
    heat = np.linalg.norm(sja.sensitivity(
        None, None, x0, None, 0,
        trajectory_fn=lambda z: sja.heat_trajectory(RING, z, 0.2, 30)), axis=1)
    assert swan[-1] >= 0.9 * swan[0]
    assert heat[-1] < 0.5 * heat[0]


@pytest.mark.parametrize("kind", sja.LAPLACIANS)
def test_heat_sensitivity_is_the_matrix_power_and_decays(kind, x64):
    graph, epsilon, layers, width = GRAPH, 0.2, 12, WIDTH
    x0 = random_state(19)
    lap = np.asarray(sja.dense_laplacian(graph, 7, kind, jnp.float64))
    step = np.eye(7) - epsilon * lap
    trajectory = np.asarray(sja.heat_trajectory(graph, x0, epsilon, layers, kind))
    for layer in range(layers + 1):
        np.testing.assert_allclose(trajectory[layer],
                                   np.linalg.matrix_power(step, layer) @ np.asarray(x0),
                                   atol=1e-12)
    source = 3
    got = np.asarray(sja.sensitivity(
        None, None, x0, None, source,
        trajectory_fn=lambda z: sja.heat_trajectory(graph, z, epsilon, layers, kind)))
    want = np.stack([np.sqrt(width) * np.abs(np.linalg.matrix_power(step, layer)[:, source])
                     for layer in range(layers + 1)])
    np.testing.assert_allclose(got, want, atol=1e-12)
    one_by_one = sja.trajectory_sensitivity(
        lambda z: sja.heat_trajectory(graph, z, epsilon, layers, kind), x0, source,
        vectorize=False)
    np.testing.assert_allclose(one_by_one, want, atol=1e-12)
    total = np.linalg.norm(got, axis=1)
    assert np.all(np.diff(total) <= 1e-12)  # symmetric L, |1 - eps lambda| <= 1: never grows
    assert got[-1, source] < 0.6 * got[0, source]


def test_mpnn_sensitivity_through_layer_maps_matches_reverse_mode(x64):
    graph, x0 = GRAPH, random_state(21)
    stack = sj.MPNNStack("gcn", WIDTH, 4, activation=jnp.tanh)
    variables = stack.init(jax.random.PRNGKey(22), graph, x0)
    trajectory_fn = sja.trajectory_from_steps(sja.mpnn_layer_maps(stack, variables["params"],
                                                                  graph))
    np.testing.assert_allclose(trajectory_fn(x0)[-1], stack.apply(variables, graph, x0),
                               atol=1e-12)
    want = full_jacobian_sensitivity(trajectory_fn, x0)
    got = sja.trajectory_sensitivity(trajectory_fn, x0, 2)
    np.testing.assert_allclose(got, want[:, :, 2], atol=1e-12)
    # GCN reaches exactly the nodes within l hops after l layers; the isolated node never.
    hops = sja.hop_distances(graph, 2)
    assert hops[6] == -1
    for layer in range(5):
        reachable = (hops >= 0) & (hops <= layer)
        assert np.all(np.asarray(got[layer])[~reachable] == 0)


def test_hop_distances_on_a_line():
    np.testing.assert_array_equal(sja.hop_distances(sja.line_graph(5), 1), [1, 0, 1, 2, 3])
    np.testing.assert_array_equal(sja.hop_distances(sja.ring_graph(6), 0), [0, 1, 2, 3, 2, 1])


# --- Jacobian drift over layers (Appendix I) ---------------------------------------


def test_jacobian_drift_by_hand():
    jacobians = jnp.stack([jnp.eye(2), 2 * jnp.eye(2), 2 * jnp.eye(2), jnp.zeros((2, 2))])
    np.testing.assert_allclose(sja.jacobian_drift(jacobians), [1.0, 0.0, 1.0])
    np.testing.assert_allclose(sja.jacobian_drift(list(jacobians[:2])), [1.0])


def test_swan_jacobian_drifts_far_less_than_gcn(x64):
    graph, x0 = GRAPH, random_state(25)
    cfg = sj.SWANConfig(num_layers=6)
    params = make_params(cfg, WIDTH, seed=24)
    swan_jacobians = sja.swan_layer_jacobians(params, graph, x0, cfg)
    assert swan_jacobians.shape == (6, 21, 21)
    states = sj.solve(params, graph, x0, cfg, save_trajectory=True)
    np.testing.assert_allclose(swan_jacobians[4],
                               sja.graph_jacobian(params, graph, states[4], cfg, x0), atol=1e-12)
    # tanh (the authors' baselines'): at width 3 a ReLU stack can switch every unit of a
    # layer off (a zero Jacobian, whose drift is undefined).
    stack = sj.MPNNStack("gcn", WIDTH, 6, activation=jnp.tanh)
    variables = stack.init(jax.random.PRNGKey(26), graph, x0)
    gcn_jacobians = sja.layer_map_jacobians(sja.mpnn_layer_maps(stack, variables["params"],
                                                                graph), x0)
    assert gcn_jacobians.shape == (6, 21, 21)
    layer_maps = sja.swan_layer_jacobians(params, graph, x0, cfg, layer_map=True)
    np.testing.assert_allclose(layer_maps, np.eye(21) + cfg.epsilon * swan_jacobians, atol=1e-15)
    swan_drift = sja.jacobian_drift(swan_jacobians)
    gcn_drift = sja.jacobian_drift(gcn_jacobians)
    # Weight sharing: only M1 = tanh'(pre) moves along SWAN's trajectory (about 8% per
    # layer here, untrained); every GCN layer has its own weights.
    assert float(jnp.max(swan_drift)) < 0.15
    assert float(jnp.mean(gcn_drift)) > 5 * float(jnp.mean(swan_drift))


# --- trained models ----------------------------------------------------------------


def test_model_helpers_find_the_field_and_the_encoded_input(tmp_path):
    graph = sja.ring_graph(5)._replace(nodes=jnp.arange(10.0).reshape(5, 2) / 10)
    cfg = sj.SWANConfig(num_layers=2)
    model = sj.Model(sj.LinearEncoder(3), sj.SWANBlock(cfg), sj.NodeReadout((1,)))
    variables = model.init(jax.random.PRNGKey(27), graph)
    field = sja.swan_field_params(variables)
    assert field["W"] is variables["params"]["processor"]["field"]["W"]
    dense = variables["params"]["encoder"]["Dense_0"]
    np.testing.assert_allclose(sja.encoded_input(model, variables, graph),
                               graph.nodes @ dense["kernel"] + dense["bias"], atol=1e-6)
    summary = sja.model_dissipativity_summary(model, variables, graph)  # float32
    assert summary.non_dissipative and str(summary).startswith("swan: ")
    assert summary.max_abs_real_shift < 1e-6
    nested = {"params": {"outer": {"inner": {"field": field}}}}
    assert sja.swan_field_params(nested)["V"] is field["V"]
    with pytest.raises(KeyError, match="no SWAN field"):
        sja.swan_field_params({"params": {"encoder": dense}})
    # A CheckpointStore of two vmapped runs: take run 1's best parameters.
    runs = jax.tree_util.tree_map(lambda a: jnp.stack([a, a + 1.0]), variables)
    store = CheckpointStore(tmp_path / "ckpt")
    store.save(3, {"params": runs, "opt_state": {"count": jnp.zeros(2)}, "best_params": runs},
               {"epoch": 3})
    store.close()
    restored = sja.load_checkpoint_params(tmp_path / "ckpt", run=1)
    np.testing.assert_allclose(sja.swan_field_params(restored)["W"], field["W"] + 1.0)


def test_analysis_accepts_a_prepared_graph_with_the_same_numbers():
    """Every analysis entry point takes `sj.prepare_graph(graph)` where it takes a
    GraphsTuple (issue 12), and gives the same numbers."""
    an = sja
    graph = an.line_graph(6)
    prepared = sj.prepare_graph(graph)
    cfg = sj.SWANConfig(num_layers=3, variant="swan-learn")
    params = sj.init_params(jax.random.PRNGKey(0), 3, cfg)
    x = jax.random.normal(jax.random.PRNGKey(1), (6, 3))
    calls = {
        "graph_jacobian": lambda g: an.graph_jacobian(params, g, x, cfg),
        "jacobian_factors": lambda g: an.jacobian_factors(params, g, x, cfg),
        "dissipativity": lambda g: an.dissipativity_summary(params, g, x, cfg).real_range,
        "sensitivity": lambda g: an.sensitivity(params, g, x, cfg, 0),
        "layer_jacobians": lambda g: an.swan_layer_jacobians(params, g, x, cfg),
        "heat_jacobian": lambda g: an.heat_jacobian(g, 6, 3),
        "hop_distances": lambda g: an.hop_distances(g, 0),
    }
    for name, call in calls.items():
        for a, b in zip(jax.tree_util.tree_leaves(call(graph)),
                        jax.tree_util.tree_leaves(call(prepared)), strict=True):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6,
                                       err_msg=name)
