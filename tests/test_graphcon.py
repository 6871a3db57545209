"""GraphCON (Rusch et al. 2022): its own paper's explicit update, checked against NumPy;
shapes, shared weights, permutation equivariance, and a refusal of an unknown coupling.
(Padding: test_models.py runs it with every other processor.)"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import swan_jax as sj
from tests.graphs import graph_from_edges, random_undirected

WIDTH = 4


def _graph(seed=0, n=6):
    rng = np.random.default_rng(seed)
    g = random_undirected(rng, n)
    x = jnp.asarray(rng.normal(size=(n, WIDTH)), jnp.float32)
    return g, x


def _numpy_gcn(params, g, x):
    """`D^-1/2 (A + I) D^-1/2 X W + b` (PyG's `GCNConv`), degrees counting the self-loop,
    dense."""
    n = x.shape[0]
    a = np.zeros((n, n))
    np.add.at(a, (np.asarray(g.receivers), np.asarray(g.senders)), 1.0)
    a_loop = a + np.eye(n)
    scale = 1.0 / np.sqrt(a_loop.sum(axis=1))
    h = x @ np.asarray(params["lin"]["kernel"])
    return scale[:, None] * (a_loop @ (scale[:, None] * h)) + np.asarray(params["bias"])


def test_update_equals_a_hand_written_numpy_step():
    g, x = _graph()
    dt, gamma, alpha = 0.3, 0.7, 0.4
    block = sj.GraphCONBlock(num_layers=3, epsilon=dt, gamma=gamma, alpha=alpha)
    params = block.init(jax.random.PRNGKey(1), g, x)["params"]
    gcn = params["GCNLayer_0"]
    xn, yn = np.asarray(x, np.float64), np.asarray(x, np.float64)
    for _ in range(3):
        yn = yn + dt * (np.maximum(_numpy_gcn(gcn, g, xn), 0.0) - gamma * xn - alpha * yn)
        xn = xn + dt * yn
    out = block.apply({"params": params}, g, x)
    assert out.shape == x.shape
    np.testing.assert_allclose(out, xn, rtol=1e-5, atol=1e-5)
    # One coupling for every step (GraphCON shares F_theta), not one per layer.
    assert list(params) == ["GCNLayer_0"]


@pytest.mark.parametrize("coupling", sj.models.GRAPHCON_COUPLINGS)
def test_permuting_the_nodes_permutes_the_output(coupling):
    g, x = _graph(seed=3, n=7)
    block = sj.GraphCONBlock(num_layers=4, epsilon=0.5, coupling=coupling)
    params = block.init(jax.random.PRNGKey(2), g, x)
    out = block.apply(params, g, x)
    order = np.random.default_rng(4).permutation(x.shape[0])
    where = np.argsort(order)  # old node i is new node where[i]
    permuted = graph_from_edges(where[np.asarray(g.senders)], where[np.asarray(g.receivers)],
                                x.shape[0])
    out_p = block.apply(params, permuted, x[order])
    np.testing.assert_allclose(out_p, out[order], rtol=1e-5, atol=1e-5)
    assert not np.allclose(out, x)  # the dynamics moved the states


def test_the_step_size_and_damping_can_be_traced_grid_axes():
    g, x = _graph()
    net = sj.Model(sj.LinearEncoder(8), sj.GraphCONBlock(num_layers=2), sj.NodeReadout((3,)))
    params = net.init(jax.random.PRNGKey(0), g._replace(nodes=x))

    def run(dt, gamma):
        model = sj.Model(sj.LinearEncoder(8), sj.GraphCONBlock(num_layers=2, epsilon=dt,
                                                               gamma=gamma),
                         sj.NodeReadout((3,)))
        return model.apply(params, g._replace(nodes=x))

    grid = jax.jit(jax.vmap(run))(jnp.array([0.1, 1.0]), jnp.array([1.0, 0.5]))
    np.testing.assert_allclose(grid[1], run(1.0, 0.5), rtol=1e-5, atol=1e-6)
    assert grid.shape == (2, x.shape[0], 3) and not np.allclose(grid[0], grid[1])


def test_an_unknown_coupling_is_named():
    g, x = _graph()
    with pytest.raises(ValueError, match="unknown GraphCON coupling 'gin'; valid couplings: "
                                         "gcn, gat"):
        sj.GraphCONBlock(num_layers=2, coupling="gin").init(jax.random.PRNGKey(0), g, x)


def test_graphprop_trains_graphcon_over_its_own_grid(tmp_path):
    """GraphCON is a GraphProp model (Table 1): its grid is epsilon (dt) x gamma, without
    the A_hat and beta axes it ignores, and a tiny sweep trains it end to end."""
    import json

    from swan_jax.experiments import graphprop as gp

    cfg = gp.parse_config(["--all"])
    assert "graphcon" in cfg.models
    (program, *rest) = gp.EXPERIMENT.plan(cfg, [{"task": "sssp", "labels": "paper",
                                                 "model": "graphcon"}])
    assert len(program.grid) == 3 * 2  # epsilon x gamma of configs/graphprop.toml
    assert {"adjacency", "beta"}.isdisjoint(program.grid[0])
    assert gp.EXPERIMENT.paper({"task": "sssp", "labels": "paper", "model": "graphcon"}) == (
        -1.3836, 0.0092)
    out = tmp_path / "results"
    assert gp.main(["--task", "sssp", "--models", "graphcon", "--hidden", "4", "--layers", "2",
                    "--epsilon", "0.1,0.5", "--gamma", "1", "--epochs", "2", "--seeds", "0",
                    "--per-size", "6,3,3", "--node-counts", "6,7", "--no-progress",
                    "--results-dir", str(out), "--cache-dir", str(tmp_path / "cache")]) == 0
    (cell,) = json.loads((out / "results.json").read_text())["cells"]
    assert cell["model"] == "graphcon" and np.isfinite(cell["test_mean"])
    assert cell["best_hparams"]["epsilon"] in (0.1, 0.5)
