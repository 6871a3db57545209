"""Benchmark 1: a Peptides-func training step (batch 64, hidden 128, 5 layers), both paths.

For SWAN, SWAN-learn and a GCN of the same size, the training loop's own step on the same
batch through the segment-sum path (plain GraphsTuple) and the gather-only path
(`PreparedGraph`), timed in turn. Targets (gather path): SWAN's dense FLOPs on real nodes
(three `N x d x d` products per Euler step, backward twice the forward) at >= 65% of the
f32 matmul rate measured in the same run; SWAN-learn <= 1.3x SWAN; SWAN <= 1.5x GCN.
The matmul rate is measured for the field's unfused product `[N, d] x [d, d]` and for the
fused `[N, d] x [d, 3d]`; the efficiency is reported against both and judged against the
higher one. A profile by ablation splits the field's gradient on each path.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

import swan_jax as sj
from benchmarks.common import (
    HIDDEN,
    LAYERS,
    PATHS,
    interleaved,
    lrgb_model,
    machine,
    matmul_rate,
    on_path,
    padding_record,
    peptide_batch,
    peptides_train,
    train_step_fn,
)
from swan_jax.graph import gather
from swan_jax.train import count_params

MODELS = ("swan", "swan-learn", "gcn")
TARGET_EFFICIENCY, TARGET_LEARN, TARGET_GCN = 0.65, 1.3, 1.5


def _profile_fields(cfg):
    """Full field, its dense part alone, its aggregations alone, for each path."""
    eye = jnp.eye(HIDDEN)
    phi, psi = sj.field.antisymmetric_weight, sj.field.symmetric_weight  # V', Z'

    def full(p, graph, ops, x):
        return sj.field.field_with_operators(p, graph, x, ops, cfg)

    def dense_segment(p, graph, ops, x):  # the three products and tanh, as the field has them
        return jnp.tanh(x @ (p["W"] - p["W"].T - 0.1 * eye) + x @ phi(p["V"])
                        + x @ psi(p["Z"]) + p["b"])

    def dense_gather(p, graph, ops, x):  # one fused product and tanh
        y = x @ jnp.concatenate([p["W"] - p["W"].T - 0.1 * eye, phi(p["V"]), psi(p["Z"])],
                                axis=1)
        return jnp.tanh(y[:, :HIDDEN] + y[:, HIDDEN:2 * HIDDEN] + y[:, 2 * HIDDEN:] + p["b"])

    def aggregation_segment(p, graph, ops, x):
        return (sj.graph.symmetric_aggregate(graph, ops.w_hat, x)
                + sj.graph.antisymmetric_aggregate(graph, ops.w_tilde, x))

    def aggregation_gather(p, graph, ops, x):
        return gather.aggregate(graph, (ops.phi, ops.psi), (ops.phi, ops.psi_t), (x, x))

    return {"segment": {"full_field": full, "dense_only": dense_segment,
                        "aggregation_only": aggregation_segment},
            "gather": {"full_field": full, "dense_only": dense_gather,
                       "aggregation_only": aggregation_gather}}


def field_profile(batch, repeat: int) -> dict[str, dict[str, float]]:
    """Where SWAN's step goes, by ablation, on each path: the gradient of 5 Euler steps of
    the full field, of its dense part alone, and of its aggregations alone. Graph and
    state are arguments (as in training), never constants XLA could fold."""
    cfg = sj.SWANConfig(variant="swan", adjacency="sym", num_layers=LAYERS, epsilon=1.0,
                        gamma=0.1, beta=1.0)
    params = sj.init_params(jax.random.PRNGKey(0), HIDDEN, cfg)
    x0 = jax.random.normal(jax.random.PRNGKey(1), (batch.graph.nodes.shape[0], HIDDEN)) * 0.1
    fns = {}
    for path, fields in _profile_fields(cfg).items():
        graph = on_path(batch, path).graph
        for name, field in fields.items():
            def loss(p, x, graph, field=field):
                ops = sj.field.build_operators(p, graph, x, cfg)
                for _ in range(LAYERS):
                    x = x + field(p, graph, ops, x)
                return jnp.sum(x ** 2)

            grad = jax.jit(jax.grad(loss, argnums=(0, 1)))
            fns[f"{path}/{name}"] = partial(grad, params, x0, graph)
    timings = interleaved(fns, repeat)
    return {path: {f"{name}_s": timings[f"{path}/{name}"]["median_s"]
                   for name in ("full_field", "dense_only", "aggregation_only")}
            for path in PATHS}


def dense_flops(num_nodes: int, hidden: int = HIDDEN, layers: int = LAYERS) -> float:
    """Three `N x d x d` products per Euler step; forward + backward = 3x the forward."""
    return 3 * (3 * 2.0 * num_nodes * hidden * hidden * layers)


def _ratios(models: dict, path: str) -> dict[str, float]:
    m = {k: v[path]["median_s"] for k, v in models.items()}
    return {"learn_over_swan": m["swan-learn"] / m["swan"], "swan_over_gcn": m["swan"] / m["gcn"]}


def run(quick: bool = False, profile: bool = True) -> dict:
    data, source = peptides_train()
    batch, budget = peptide_batch(data)
    real_nodes = int(np.asarray(batch.node_mask).sum())
    rows = int(batch.graph.nodes.shape[0])
    rates = {"square": matmul_rate(rows, HIDDEN), "fused": matmul_rate(rows, HIDDEN,
                                                                         columns=3 * HIDDEN)}
    record = {"benchmark": "train_step", "machine": machine(), "data": source,
              "batch_graphs": int(np.asarray(batch.graph_mask).sum()), "real_nodes": real_nodes,
              "real_edges": int(np.asarray(batch.graph.n_edge)[:-1].sum()),
              **padding_record(data, batch, budget),
              "matmul_rate_flops": max(rates.values()), "matmul_rates_flops": rates,
              "models": {}}
    steps, params = {}, {}
    for kind in MODELS:
        for path in PATHS:
            once, state = train_step_fn(lrgb_model(kind), on_path(batch, path))
            steps[f"{kind}/{path}"] = once
            params[kind] = jax.tree_util.tree_map(lambda x: x[0], state["params"])
    timings = interleaved(steps, repeat=3 if quick else 9)
    for kind in MODELS:
        record["models"][kind] = {"params": count_params(params[kind])}
        for path in PATHS:
            t = timings[f"{kind}/{path}"]
            record["models"][kind][path] = {**t, "graphs_per_s": record["batch_graphs"]
                                            / t["median_s"]}
    if profile:
        record["profile"] = field_profile(batch, repeat=3 if quick else 7)
    flops = dense_flops(real_nodes)
    record.update(swan_dense_flops=flops, floor_s=flops / record["matmul_rate_flops"],
                  target_efficiency=TARGET_EFFICIENCY, target_learn_over_swan=TARGET_LEARN,
                  target_swan_over_gcn=TARGET_GCN, paths={})
    for path in PATHS:
        swan = record["models"]["swan"][path]
        record["paths"][path] = {
            **_ratios(record["models"], path),
            "swan_flop_rate": flops / swan["median_s"],
            "swan_efficiency": flops / swan["median_s"] / record["matmul_rate_flops"],
            "swan_efficiency_by_rate": {k: flops / swan["median_s"] / r
                                        for k, r in rates.items()},
            "swan_efficiency_cpu_time": flops / swan["cpu_median_s"]
            / record["matmul_rate_flops"]}
    return record


def summary(r: dict) -> str:
    g, s = r["paths"]["gather"], r["paths"]["segment"]
    m = r["models"]
    return (f"train step ({r['data']}, {r['batch_graphs']} graphs, {r['real_nodes']} real nodes,"
            f" {100 * r['batch_padding_share']:.0f}% padding): SWAN "
            f"{m['swan']['segment']['median_s']:.3f} -> {m['swan']['gather']['median_s']:.3f} s,"
            f" SWAN-learn {m['swan-learn']['segment']['median_s']:.3f} -> "
            f"{m['swan-learn']['gather']['median_s']:.3f} s, GCN "
            f"{m['gcn']['segment']['median_s']:.3f} -> {m['gcn']['gather']['median_s']:.3f} s "
            f"(segment -> gather); efficiency {100 * s['swan_efficiency']:.0f}% -> "
            f"{100 * g['swan_efficiency']:.0f}% of {r['matmul_rate_flops'] / 1e9:.0f} GFLOP/s "
            f"(target >= 65%); learn/swan {g['learn_over_swan']:.2f}x (<= 1.3x); swan/gcn "
            f"{g['swan_over_gcn']:.2f}x (<= 1.5x)")


if __name__ == "__main__":
    print(summary(run()))
