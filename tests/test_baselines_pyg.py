"""The message-passing baselines (`swan_jax.models.BASELINE_LAYERS`) are the PyG convolutions
the SWAN authors' code runs: outputs against PyG's recorded ones on a graph with
non-uniform degrees (`tests/make_baselines_fixture.py`), on the plain graph and on its
slot layout at two slot widths; the "torch" initialisation against PyG's ranges; no
scatter in their compiled gradients on slots."""

from __future__ import annotations

import math
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import swan_jax as sj
from swan_jax.models import BASELINE_LAYERS, MPNNStack
from tests.conftest import PRODUCTION_COMPILE
from tests.graphs import graph_from_edges
from tests.make_baselines_fixture import FIXTURE, KINDS
from tests.test_gather import hlo_has


@pytest.fixture(scope="module")
def recorded() -> Mapping[str, np.ndarray]:
    with np.load(FIXTURE) as data:
        return {k: data[k] for k in data.files}


def flax_params(kind: str, rec: Mapping[str, np.ndarray]) -> dict:
    """PyG's weights of `kind` (`"<kind>/w/<name>"`, PyTorch layouts) as our layer's."""
    w = {k.split("/w/")[1]: v for k, v in rec.items() if k.startswith(f"{kind}/w/")}
    if kind == "gcn":
        return {"lin": {"kernel": w["lin.weight"].T}, "bias": w["bias"]}
    if kind == "gin":
        return {"eps": w["eps"][0], "nn": {"kernel": w["nn.weight"].T, "bias": w["nn.bias"]}}
    if kind == "sage":
        return {"lin_l": {"kernel": w["lin_l.weight"].T, "bias": w["lin_l.bias"]},
                "lin_r": {"kernel": w["lin_r.weight"].T}}
    return {"lin": {"kernel": w["lin.weight"].T}, "att_src": w["att_src"].reshape(-1, 1),
            "att_dst": w["att_dst"].reshape(-1, 1), "bias": w["bias"]}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("slot_width", [None, 0, 1])  # None: the plain graph; 1: overflow rows
def test_each_layer_matches_pyg(kind, slot_width, recorded):
    x = jnp.asarray(recorded["x"])
    graph = graph_from_edges(recorded["senders"], recorded["receivers"], x.shape[0])
    if slot_width is not None:
        graph = sj.prepare_graph(graph, slot_width=slot_width or None)
    want = recorded[f"{kind}/out"]
    layer = BASELINE_LAYERS[kind](want.shape[1])
    params = flax_params(kind, recorded)
    # Our structure is PyG's: the same parameters, no more.
    shapes = jax.tree.map(np.shape, layer.init(jax.random.PRNGKey(0), graph, x)["params"])
    assert shapes == jax.tree.map(np.shape, params)
    out = layer.apply({"params": params}, graph, x)
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-6)


def test_the_fixture_tells_a_bias_before_the_propagation_apart(recorded):
    """A bias before the propagation (`P (X W + b)`, the layer's old form) differs from
    PyG's `P X W + b` by `(P 1 - 1) b^T`: nonzero wherever a node's neighbours' degrees
    differ from its own, here at every node but the isolated one."""
    n = recorded["x"].shape[0]
    graph = graph_from_edges(recorded["senders"], recorded["receivers"], n)
    row_sums = np.asarray(BASELINE_LAYERS["gcn"](1).apply(  # P 1
        {"params": {"lin": {"kernel": np.ones((1, 1))}, "bias": np.zeros(1)}},
        graph, jnp.ones((n, 1))))[:, 0]
    assert np.abs(row_sums[:10] - 1.0).min() > 0.03
    assert row_sums[10] == pytest.approx(1.0)


WIDE_IN, WIDE_OUT = 48, 64


@pytest.mark.parametrize("kind", KINDS)
def test_torch_init_draws_in_pygs_ranges(kind):
    """Each weight uniform in PyG's bound (Glorot for GCN's and GAT's, `Linear`'s
    1/sqrt(fan_in) for GIN's and SAGE's, their biases too), zeros where PyG's are."""
    glorot = math.sqrt(6.0 / (WIDE_IN + WIDE_OUT))
    linear = 1.0 / math.sqrt(WIDE_IN)
    bounds = {"gcn": {"lin": glorot, "bias": 0.0},
              "gin": {"nn": linear, "eps": 0.0},
              "sage": {"lin_l": linear, "lin_r": linear},
              "gat": {"lin": glorot, "att_src": math.sqrt(6.0 / (1 + WIDE_OUT)),
                      "att_dst": math.sqrt(6.0 / (1 + WIDE_OUT)), "bias": 0.0}}[kind]
    graph = graph_from_edges([0, 1], [1, 0], 2)
    x = jnp.ones((2, WIDE_IN))
    params = BASELINE_LAYERS[kind](WIDE_OUT).init(jax.random.PRNGKey(0), graph, x)["params"]
    assert set(params) == set(bounds)
    for name, bound in bounds.items():
        peak = max(float(jnp.abs(v).max()) for v in jax.tree.leaves(params[name]))
        if bound == 0.0:
            assert peak == 0.0, name
        else:  # thousands of draws: the largest comes within 10% of the bound
            assert 0.9 * bound <= peak <= bound, (name, peak, bound)


def test_an_unknown_init_is_refused_in_one_line():
    graph = graph_from_edges([0, 1], [1, 0], 2)
    for kind in KINDS:
        with pytest.raises(ValueError, match="unknown init 'xavier'"):
            MPNNStack(kind, 4, 1, weight_init="xavier").init(
                jax.random.PRNGKey(0), graph, jnp.ones((2, 3)))


@pytest.mark.parametrize("kind", KINDS)
def test_on_slots_no_layer_scatters_forward_or_backward(kind, recorded):
    """On the slot layout the aggregations are gathers, in the gradient too (as SWAN's);
    the plain graph's segment sums scatter, so the check can fail."""
    def hlo(graph) -> str:
        x = jnp.asarray(recorded["x"])
        stack = MPNNStack(kind, 8, 2)
        params = stack.init(jax.random.PRNGKey(0), graph, x)
        grad = jax.jit(jax.grad(lambda p, x: jnp.sum(stack.apply(p, graph, x) ** 2),
                                argnums=(0, 1)))
        return grad.lower(params, x).compile(PRODUCTION_COMPILE).as_text()

    n = recorded["x"].shape[0]
    plain = graph_from_edges(recorded["senders"], recorded["receivers"], n)
    slots = jax.tree_util.tree_map(jnp.asarray, sj.prepare_graph(plain, slot_width=2))
    assert not hlo_has(hlo(slots), "scatter")
    assert hlo_has(hlo(plain), "scatter")
