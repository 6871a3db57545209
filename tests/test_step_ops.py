"""What a training step compiles to (issue 36, item 4): the atom encoder's lookups as one
lookup with the same parameters and numbers, no loop on a GPU inside the scanned step but
the scan, padding steps masked there as the conditional skips them, and the counting tool
(`benchmarks.step_ops`)."""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest

import swan_jax as sj
import swan_jax.train._pipeline as pipeline_module
from benchmarks.step_ops import count_step, lowered_counts
from swan_jax import encoders
from swan_jax.data import GraphDataset
from swan_jax.encoders import AtomEncoder, embedding_sum
from swan_jax.graph.gather import UNROLL_SCAN_ROWS
from swan_jax.ogb_vocabulary import ATOM_FEATURE_DIMS
from swan_jax.train import TrainConfig, _loop

U = 2.0 ** -24  # float32's unit roundoff


class NineEmbeds(nn.Module):
    """The atom encoder as it was until 2026-11-28: nine `nn.Embed` lookups summed."""

    hidden: int

    @nn.compact
    def __call__(self, graph):
        codes = jnp.asarray(graph.nodes).astype(jnp.int32)
        out = 0.0
        for i, size in enumerate(ATOM_FEATURE_DIMS):
            out = out + nn.Embed(size, self.hidden,
                                 embedding_init=nn.initializers.xavier_uniform(),
                                 name=f"embed_{i}")(codes[:, i])
        return out


def _codes(rng, n: int) -> np.ndarray:
    return rng.integers(0, ATOM_FEATURE_DIMS, (n, len(ATOM_FEATURE_DIMS))).astype(np.int32)


def _graph(codes) -> jraph.GraphsTuple:
    return jraph.GraphsTuple(nodes=jnp.asarray(codes), edges=None, senders=None,
                             receivers=None, n_node=None, n_edge=None, globals=None)


def test_the_atom_encoder_keeps_its_parameters_values_and_cpu_gradient():
    codes = _codes(np.random.default_rng(0), 60)
    codes[0, 0], codes[1, 1], codes[2, 2], codes[3, 3] = -1, 5, -13, -12  # wrap, NaN, NaN, wrap
    graph, old, new = _graph(codes), NineEmbeds(16), AtomEncoder(16)
    p_old, p_new = (m.init(jax.random.PRNGKey(3), graph) for m in (old, new))
    # checkpoints and bundles load: the same names, shapes and initial values
    assert jax.tree_util.tree_structure(p_old) == jax.tree_util.tree_structure(p_new)
    assert p_new["params"]["embed_0"]["embedding"].shape == (ATOM_FEATURE_DIMS[0], 16)
    for a, b in zip(jax.tree_util.tree_leaves(p_old), jax.tree_util.tree_leaves(p_new),
                    strict=True):
        np.testing.assert_array_equal(a, b)
    y_old, y_new = np.asarray(old.apply(p_old, graph)), np.asarray(new.apply(p_new, graph))
    assert np.isnan(y_new[1]).all() and np.isnan(y_new[2]).all() and np.isfinite(y_new[0]).all()
    np.testing.assert_array_equal(y_old, y_new)  # the same bits, NaN rows included
    weights = jax.random.normal(jax.random.PRNGKey(1), y_old.shape)
    grads = [jax.grad(lambda p, m=m: jnp.nansum(m.apply(p, graph) * weights))(p)
             for m, p in ((old, p_old), (new, p_new))]
    for a, b in zip(*map(jax.tree_util.tree_leaves, grads), strict=True):
        np.testing.assert_array_equal(a, b)  # a CPU: the scatter-add, in the same order


def test_the_dense_gradient_moves_by_float32_rounding_only():
    """Both transposes are float32 sums of the same terms in different orders: each lies
    within `(n - 1) u sum |g|` of the exact sum (n terms), so they lie within twice that
    of each other."""
    rng = np.random.default_rng(1)
    codes = jnp.asarray(_codes(rng, 3000))
    tables = [jnp.asarray(rng.normal(size=(v, 4)), jnp.float32) for v in ATOM_FEATURE_DIMS]
    g = jnp.asarray(rng.normal(size=(3000, 4)), jnp.float32)
    grads = {}
    for backward in ("scatter", "dense"):
        _, vjp = jax.vjp(lambda t, b=backward: embedding_sum(t, codes, backward=b), tables)
        grads[backward] = vjp(g)[0]
    g64, codes64 = np.asarray(g, np.float64), np.asarray(codes)
    for i, (a, b) in enumerate(zip(grads["scatter"], grads["dense"], strict=True)):
        rows = codes64[:, i][:, None] == np.arange(ATOM_FEATURE_DIMS[i])  # [N, V]
        exact, size = rows.T @ g64, rows.T @ np.abs(g64)
        terms = rows.sum(axis=0)[:, None]
        for got in (a, b):
            assert np.all(np.abs(np.asarray(got, np.float64) - exact)
                          <= np.maximum(terms - 1, 0) * U * size)
    assert not all(np.array_equal(a, b) for a, b in zip(grads["scatter"], grads["dense"],
                                                       strict=True))  # other orders indeed
    with pytest.raises(ValueError, match="backward must be"):
        embedding_sum(tables, codes, backward="atomic")


def _molecules(num_graphs: int, seed: int = 0) -> GraphDataset:
    """Small molecule-like graphs: chains, every fifth with a hub of degree 8 (a few
    overflow rows at the chosen slot width), OGB atom codes, two binary labels."""
    rng = np.random.default_rng(seed)
    graphs = []
    for g in range(num_graphs):
        n = int(rng.integers(8, 14))
        hub = np.arange(2, 8) if g % 5 == 0 else np.zeros(0, int)
        s = np.concatenate([np.arange(n - 1), np.zeros_like(hub)])
        r = np.concatenate([np.arange(1, n), hub])
        graphs.append(dict(nodes=_codes(rng, n), senders=np.concatenate([s, r]),
                           receivers=np.concatenate([r, s]),
                           graph_targets=rng.integers(0, 2, (1, 2)).astype(np.float32)))
    return GraphDataset.from_graphs(graphs)


def _model(hp, num_layers: int = 2):
    cfg = sj.SWANConfig(variant="swan-learn", adjacency="sym", num_layers=num_layers, beta=1.0,
                        gamma=0.1, epsilon=1.0)
    return sj.Model(AtomEncoder(8), sj.SWANBlock(cfg), sj.GraphReadout((8, 2),
                                                                       pooling=("mean",)))


def _program(num_layers: int = 2):
    """The tiny program; `num_layers=1` for the padding-steps test: how masked padding
    steps move its numbers does not depend on the depth, and the layers are unrolled in
    the step, so it compiles faster."""
    data = _molecules(20)
    splits = {"train": data.subset(range(12)), "val": data.subset(range(12, 16)),
              "test": data.subset(range(16, 20))}
    cfg = TrainConfig(batch_size=4, seeds=(0, 1), loss="bce", metric="ap",
                      task_level="graph", pipeline="device", progress=False, quiet=True)
    prog = _loop._Program(functools.partial(_model, num_layers=num_layers), splits, cfg,
                          ({},))
    state, _ = _loop._initial_state(prog)
    return prog, state


def _chunk_args(prog, state, ok):
    ids = np.resize(prog.pipeline.epoch_ids(0), (len(ok), prog.budget.n_graph - 1))
    return (state.params, state.opt_state, prog.hp, prog.pipeline.placed["train"], ids,
            np.asarray(ok), jnp.asarray(~state.stopped))


def test_a_gpu_step_runs_no_loop_but_the_scan_and_no_encoder_scatter():
    """The scanned call lowered for a GPU: its one `while` is the scan over steps (no
    overflow scan, no `searchsorted` loop, no opaque-identity loop); the encoder's backward
    has no scatter there and one (not nine) on a CPU."""
    prog, state = _program()
    assert 0 < prog.budget.n_overflow <= UNROLL_SCAN_ROWS  # the overflow scan is in the step
    args = _chunk_args(prog, state, [True] * 3)
    gpu = lowered_counts(
        prog.pipeline._train.trace(*args).lower(lowering_platforms=("cuda",)).as_text())
    assert gpu["whiles"] == 1 and gpu["conditionals"] == 0  # padding steps masked instead
    assert gpu["barriers"] > 0  # what stores values there instead of loops

    codes = jnp.asarray(_codes(np.random.default_rng(2), 30))
    params = AtomEncoder(8).init(jax.random.PRNGKey(0), _graph(codes))
    grad = jax.jit(jax.grad(lambda p: jnp.sum(AtomEncoder(8).apply(p, _graph(codes)) ** 2)))
    for platform, scatters in (("cuda", 0), ("cpu", 1)):
        text = grad.trace(params).lower(lowering_platforms=(platform,)).as_text()
        assert lowered_counts(text)["scatters"] == scatters, platform


@pytest.mark.parametrize("overflow", [7, 16])
def test_the_unrolled_overflow_scan_gives_the_loops_bits(monkeypatch, overflow):
    """Two hubs (runs of 5 and 2 overflow rows at slot width 2) and, with a budget of 16,
    the unused rows (the last node's run): node sums and maxima with the passes unrolled
    and in the loop."""
    from swan_jax.graph import gather
    from tests.graphs import graph_from_edges

    spokes = [(0, v) for v in range(2, 13)] + [(1, v) for v in range(3, 9)]
    senders = [u for u, v in spokes] + [v for u, v in spokes]
    graph = sj.prepare_graph(graph_from_edges(senders, senders[len(spokes):] + senders[
        :len(spokes)], 13), slot_width=2, num_overflow=overflow)
    assert graph.num_overflow == overflow
    rows = jax.random.normal(jax.random.PRNGKey(0), (graph.num_rows, 3))
    got = {}
    for unroll in (UNROLL_SCAN_ROWS, 0):
        monkeypatch.setattr(gather, "UNROLL_SCAN_ROWS", unroll)
        got[unroll] = (gather.node_sum(graph, rows), gather.node_max(graph, rows[:, 0]))
    for a, b in zip(*map(jax.tree_util.tree_leaves, got.values()), strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_finite_check_is_one_reduction_on_a_gpu_and_agrees():
    from swan_jax.train import _step

    trees = [{"a": jnp.ones(3), "b": jnp.zeros((2, 2))}, {"a": jnp.ones(3).at[1].set(jnp.inf)},
             {"a": jnp.ones(3), "b": jnp.full((2, 2), jnp.nan)}, {}]
    for tree in trees:
        want = all(bool(np.isfinite(np.asarray(x)).all()) for x in jax.tree_util.tree_leaves(tree))
        assert bool(_step.all_finite(tree)) == want
        if tree:
            leaves = jax.tree_util.tree_leaves(tree)
            assert bool(_step._joined_finite(leaves)) == bool(_step._per_leaf_finite(leaves))
    gpu = jax.jit(_step.all_finite).trace(trees[0]).lower(lowering_platforms=("cuda",))
    assert gpu.as_text().count("stablehlo.reduce") == 1


@pytest.fixture
def padding_steps(monkeypatch):
    def use(mode):
        monkeypatch.setattr(pipeline_module, "PADDING_STEPS", mode)
    return use


def test_masked_padding_steps_train_and_evaluate_as_the_conditional(padding_steps):
    """A GPU passes over padding steps by running them with every run stopped (no
    conditional): such a step leaves the state exactly as it was and loses NaN. Against
    the conditional (a CPU's way) the real steps are the same arithmetic in another
    program, which XLA fuses otherwise: the same numbers up to float32 rounding (a few
    units in the last place; measured 1.2), evaluations included."""
    out = {}
    for mode in ("mask", "cond"):
        padding_steps(mode)
        prog, state = _program(num_layers=1)
        train = prog.pipeline._train
        if mode == "mask":  # only padding steps: nothing moves
            params, opt_state, losses = train(*_chunk_args(prog, state, [False] * 4))
            assert np.isnan(np.asarray(losses)).all()
            for a, b in zip(jax.tree_util.tree_leaves((params, opt_state)),
                            jax.tree_util.tree_leaves((state.params, state.opt_state)),
                            strict=True):
                np.testing.assert_array_equal(a, b)
        params, opt_state, losses = train(*_chunk_args(prog, state, [True, False, True, False]))
        ids, real = prog.pipeline.eval_ids["val"]
        out[mode] = (params, opt_state, losses, prog.pipeline._eval(
            params, prog.hp, prog.pipeline.placed["val"], ids, real.at[-1].set(False)))
    losses = np.asarray(out["mask"][2])
    assert np.isnan(losses[[1, 3]]).all() and np.isfinite(losses[[0, 2]]).all()
    for a, b in zip(*map(jax.tree_util.tree_leaves, out.values()), strict=True):
        np.testing.assert_allclose(a, b, rtol=16 * 2 * U, atol=16 * U)


def test_training_with_the_dense_gradient_moves_by_rounding_only(monkeypatch):
    """Three epochs of the tiny SWAN-learn program with each transpose of the encoder:
    the gradients differ by float32 rounding (above), and so do the trained numbers."""
    results = {}
    for backward in ("scatter", "dense"):
        monkeypatch.setattr(encoders, "EMBED_BACKWARD", backward)
        prog, state = _program()
        for epoch in range(3):
            state, losses = prog.pipeline.train_epoch(state, prog.hp, epoch, lambda n: None)
        results[backward] = (state.params, losses)
    (p_s, loss_s), (p_d, loss_d) = results["scatter"], results["dense"]
    np.testing.assert_allclose(loss_s, loss_d, rtol=64 * U)
    moved = False
    for a, b in zip(jax.tree_util.tree_leaves(p_s), jax.tree_util.tree_leaves(p_d),
                    strict=True):
        np.testing.assert_allclose(a, b, rtol=64 * U, atol=64 * U)
        moved |= not np.array_equal(a, b)
    assert moved  # the two sums do differ in their last bits


HLO = """HloModule jit_chunk, entry_computation_layout={()->f32[4]}

FileNames
1 "/repo/swan_jax/encoders.py"

FunctionNames
1 "embedding_sum"

FileLocations
1 {file_name_id=1 function_name_id=1 line=101 end_line=101 column=1 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%scatter_computation (p0: f32[4], p1: s32[2]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  ROOT %scatter.1 = f32[4]{0} scatter(%p0, %p1, %p0), to_apply=%add
}

%inner_body (t: (s32[], f32[4])) -> (s32[], f32[4]) {
  %t = (s32[], f32[4]{0}) parameter(0)
  %x = f32[4]{0} get-tuple-element(%t), index=1
  %neg.1 = f32[4]{0} negate(%x)
  ROOT %r = (s32[], f32[4]{0}) tuple(%i, %neg.1)
}

%inner_cond (t: (s32[], f32[4])) -> pred[] {
  %t = (s32[], f32[4]{0}) parameter(0)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%step_body (t: (s32[], f32[4])) -> (s32[], f32[4]) {
  %t = (s32[], f32[4]{0}) parameter(0)
  %x = f32[4]{0} get-tuple-element(%t), index=1
  %embed = f32[4]{0} fusion(%x), kind=kLoop, calls=%scatter_computation, @META
  %loop = (s32[], f32[4]{0}) while(%t), condition=%inner_cond, body=%inner_body
  ROOT %r = (s32[], f32[4]{0}) tuple(%i, %embed)
}

%step_cond (t: (s32[], f32[4])) -> pred[] {
  %t = (s32[], f32[4]{0}) parameter(0)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %steps = (s32[], f32[4]{0}) while(%t), condition=%step_cond, body=%step_body, @TRIPS
  ROOT %out = f32[4]{0} get-tuple-element(%steps), index=1
}
""".replace("@META", 'metadata={op_name="transpose(jvp())/scatter-add" stack_frame_id=1}').replace(
    "@TRIPS", 'backend_config={"known_trip_count":{"n":"3"}}')


def test_step_ops_counts_the_scanned_steps_operations():
    counts = count_step(HLO)
    # the step: its body (fusion, loop, tuple) and condition, the inner loop's once each
    assert counts["ops"] == 5  # fusion, while, 2 conditions' compares, negate
    assert (counts["fusions"], counts["scatters"], counts["whiles"]) == (1, 1, 1)
    assert counts["whiles_known_trip_count"] == 0  # the inner loop's count is data
    assert counts["top"] == [
        {"name": "compare (no source kept)", "count": 2},
        {"name": "scatter-add, backward, encoders.py:101 embedding_sum", "count": 1},
        {"name": "while (no source kept)", "count": 1},
        {"name": "negate (no source kept)", "count": 1}]


def test_lowered_counts_skip_platform_choices_and_attributes():
    text = """    %c_1 = stablehlo.constant dense<1> : tensor<i32>
    %0 = "stablehlo.case"(%c_1) ({
    %1:3 = "stablehlo.case"(%0) ({
    %4 = "stablehlo.case"(%3) ({
      %5 = stablehlo.while(%iterArg = %2) : tensor<f32>
      %6 = "stablehlo.scatter"(%a, %b, %c) <{dims = #stablehlo.scatter<update_window_dims = [1]>}>
    """
    counts = lowered_counts(text)
    assert (counts["whiles"], counts["conditionals"], counts["scatters"]) == (1, 1, 1)
