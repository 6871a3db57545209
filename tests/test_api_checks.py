"""The API refuses what the CLI refuses, run-time solver errors lead with their message,
and opt-in checks of traced inputs (issue 14's items in the core)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import swan_jax as sj
from tests.graphs import random_undirected


def inputs(prepared: bool = False):
    rng = np.random.default_rng(0)
    graph = random_undirected(rng, 5)
    if prepared:
        graph = jax.tree_util.tree_map(jnp.asarray, sj.prepare_graph(graph))
    cfg = sj.SWANConfig(num_layers=5)
    params = sj.init_params(jax.random.PRNGKey(0), 2, cfg)
    return graph, cfg, params, jnp.asarray(rng.normal(size=(5, 2)), jnp.float32)


@pytest.mark.parametrize("kwargs,message", [
    ({"rtol": -1.0}, r"rtol must be a finite number > 0, got -1\.0"),
    ({"rtol": 0.0}, r"rtol must be a finite number > 0, got 0\.0"),
    ({"atol": 0}, r"atol must be a finite number > 0, got 0"),
    ({"atol": float("nan")}, r"atol must be a finite number > 0, got nan"),
    ({"rtol": float("inf")}, r"rtol must be a finite number > 0, got inf"),
    ({"rtol": "1e-3"}, r"rtol must be a finite number > 0, got '1e-3'"),
    ({"max_steps": 0}, r"max_steps must be an integer >= 1 \(or None\), got 0"),
    ({"max_steps": 2.5}, r"max_steps must be an integer >= 1 \(or None\), got 2\.5"),
    ({"max_steps": True}, r"max_steps must be an integer >= 1 \(or None\), got True"),
])
def test_solve_refuses_bad_tolerances_and_step_budgets(kwargs, message):
    graph, cfg, params, x = inputs()
    with pytest.raises(ValueError, match=message):
        sj.solve(params, graph, x, cfg, "tsit5", **kwargs)
    with pytest.raises(ValueError, match=message):  # before tracing, also inside jit
        jax.jit(lambda p: sj.solve(p, graph, x, cfg, "tsit5", **kwargs))(params)


def test_traced_tolerances_are_accepted():
    graph, cfg, params, x = inputs()
    out = jax.vmap(lambda r: sj.solve(params, graph, x, cfg, "tsit5", rtol=r, atol=1e-6))(
        jnp.asarray([1e-3, 1e-5]))
    assert out.shape == (2, 5, 2)
    np.testing.assert_allclose(out[0], out[1], atol=1e-3)


@pytest.mark.parametrize("hidden", [0, -3, 2.0, True, "8"])
def test_init_params_refuses_widths_below_one(hidden):
    with pytest.raises(ValueError, match=rf"hidden \(the width d\) must be an integer >= 1, "
                                         rf"got {hidden!r}"):
        sj.init_params(jax.random.PRNGKey(0), hidden, sj.SWANConfig())


@pytest.mark.parametrize("prepared", [False, True])
def test_out_of_steps_error_leads_with_what_to_change(prepared):
    graph, cfg, params, x = inputs(prepared)
    with pytest.raises(sj.SolverError) as err:
        sj.solve(params, graph, x, cfg, solver="tsit5", rtol=1e-10, atol=1e-10, max_steps=2)
    first = str(err.value).splitlines()[0]
    assert first.startswith("solver 'tsit5' used its whole budget of max_steps=2 steps")
    assert "kvaerno5" in first
    assert isinstance(err.value, eqx.EquinoxRuntimeError)  # what callers caught before
    assert err.value.__suppress_context__  # the equinox / XLA wrapping is not shown


def test_clear_errors_unwraps_a_failure_inside_users_jit():
    graph, cfg, params, x = inputs(True)
    step = jax.jit(lambda p: sj.solve(p, graph, x, cfg, "tsit5", rtol=1e-10, atol=1e-10,
                                      max_steps=2))
    with pytest.raises(sj.SolverError, match=r"^solver 'tsit5' used its whole budget"):
        with sj.solvers.clear_errors():
            jax.block_until_ready(step(params))
    with pytest.raises(KeyError), sj.solvers.clear_errors():  # anything else passes through
        raise KeyError("other")


@pytest.mark.parametrize("prepared", [False, True])
def test_traced_checks_catch_bad_indices_and_values_inside_jit(prepared):
    graph, cfg, params, x = inputs(prepared)

    def run(g, x):
        return sj.solve(params, g, x, cfg, check_traced=True)

    checked = sj.graph.checked(jax.jit(run))
    np.testing.assert_allclose(checked(graph, x), sj.solve(params, graph, x, cfg), rtol=1e-6)
    with pytest.raises(ValueError, match=r"x has a non-finite value at row 3, column 1"):
        checked(graph, x.at[3, 1].set(jnp.nan))
    if prepared:
        bad = graph._replace(neighbors=graph.neighbors.at[2, 0].set(7))
        field = r"prepared graph field neighbors\[\d+\] \(flat\) = 7 is out of range for 5"
    else:
        bad = graph._replace(senders=graph.senders.at[4].set(-2))
        field = r"graph\.senders\[4\] \(flat\) = -2 is out of range for 5"
    with pytest.raises(ValueError, match=field):
        checked(bad, x)
