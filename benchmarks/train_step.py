"""Benchmark 1: a Peptides-func training step (batch 64, hidden 128, 5 layers).

Graphs per second for SWAN, SWAN-learn and a GCN of the same size; SWAN's step against
GCN's (target <= 1.15x); and the step's dense FLOPs (three `N x d x d` products per Euler
step, backward twice the forward) over its time, as a share of the f32 matmul rate
measured in the same run (target >= 70%).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

import swan_jax as sj
from benchmarks.common import (
    BATCH,
    HIDDEN,
    LAYERS,
    lrgb_model,
    machine,
    matmul_rate,
    peptide_batch,
    peptides_train,
    timeit,
    train_step_fn,
)
from swan_jax.train import count_params

MODELS = ("swan", "swan-learn", "gcn")


def field_profile(batch, repeat: int) -> dict[str, float]:
    """Where SWAN's step goes, by ablation: the gradient of 5 Euler steps of the full field,
    of its dense part alone (three products, tanh), and of its aggregations alone (the
    gathers and segment sums of `(A_hat + A_hat^T) X` and `(A_tilde - A_tilde^T) X`).
    Graph and state are arguments (as in training), never constants XLA could fold."""
    cfg = sj.SWANConfig(variant="swan", adjacency="sym", num_layers=LAYERS, epsilon=1.0,
                        gamma=0.1, beta=1.0)
    params = sj.init_params(jax.random.PRNGKey(0), HIDDEN, cfg)
    x0 = jax.random.normal(jax.random.PRNGKey(1), (batch.graph.nodes.shape[0], HIDDEN)) * 0.1
    eye = jnp.eye(HIDDEN)

    def full(p, graph, ops, x):
        return sj.field_with_operators(p, graph, x, ops, cfg)

    def dense(p, graph, ops, x):
        return jnp.tanh(x @ (p["W"] - p["W"].T - 0.1 * eye) + x @ (p["V"] - p["V"].T)
                        + x @ (p["Z"] + p["Z"].T) + p["b"])

    def aggregation(p, graph, ops, x):
        return (sj.symmetric_aggregate(graph, ops.w_hat, x)
                + sj.antisymmetric_aggregate(graph, ops.w_tilde, x))

    out = {}
    for name, field in (("full_field", full), ("dense_only", dense),
                        ("aggregation_only", aggregation)):
        def loss(p, x, graph, field=field):
            ops = sj.build_operators(p, graph, x, cfg)
            for _ in range(LAYERS):
                x = x + field(p, graph, ops, x)
            return jnp.sum(x ** 2)

        grad = jax.jit(jax.grad(loss, argnums=(0, 1)))
        out[f"{name}_s"] = timeit(partial(grad, params, x0, batch.graph), repeat)["median_s"]
    return out


def dense_flops(num_nodes: int, hidden: int = HIDDEN, layers: int = LAYERS) -> float:
    """Three `N x d x d` products per Euler step; forward + backward = 3x the forward."""
    return 3 * (3 * 2.0 * num_nodes * hidden * hidden * layers)


def run(quick: bool = False) -> dict:
    data, source = peptides_train(BATCH * 4)
    batch, budget = peptide_batch(data)
    real_nodes = int(np.asarray(batch.node_mask).sum())
    rate = matmul_rate()
    record = {"benchmark": "train_step", "machine": machine(), "data": source,
              "batch_graphs": int(np.asarray(batch.graph_mask).sum()), "real_nodes": real_nodes,
              "real_edges": int(np.asarray(batch.graph.n_edge)[:-1].sum()),
              "budget": {"nodes": budget.n_node, "edges": budget.n_edge},
              "matmul_rate_flops": rate, "models": {}}
    for kind in MODELS:
        once, state = train_step_fn(lrgb_model(kind), batch)
        params = jax.tree_util.tree_map(lambda x: x[0], state["params"])
        timing = timeit(once, repeat=3 if quick else 10)
        record["models"][kind] = {"params": count_params(params), **timing,
                                  "graphs_per_s": record["batch_graphs"] / timing["median_s"]}
    record["profile"] = field_profile(batch, repeat=3 if quick else 10)
    swan, gcn = record["models"]["swan"], record["models"]["gcn"]
    flops = dense_flops(real_nodes)
    record.update(
        swan_over_gcn=swan["median_s"] / gcn["median_s"], target_swan_over_gcn=1.15,
        swan_dense_flops=flops, swan_flop_rate=flops / swan["median_s"],
        swan_efficiency=flops / swan["median_s"] / rate, target_efficiency=0.70,
        floor_s=flops / rate)
    return record


def summary(r: dict) -> str:
    m = r["models"]
    return (f"train step ({r['data']}, {r['batch_graphs']} graphs, {r['real_nodes']} nodes): "
            f"SWAN {m['swan']['median_s']:.3f} s, SWAN-learn {m['swan-learn']['median_s']:.3f} s,"
            f" GCN {m['gcn']['median_s']:.3f} s; SWAN/GCN {r['swan_over_gcn']:.2f}x (target "
            f"<= 1.15x); dense FLOPs {r['swan_dense_flops'] / 1e9:.1f} G at "
            f"{r['swan_flop_rate'] / 1e9:.1f} GFLOP/s = {100 * r['swan_efficiency']:.0f}% of "
            f"the {r['matmul_rate_flops'] / 1e9:.0f} GFLOP/s matmul rate (target >= 70%); "
            f"field gradient {r['profile']['full_field_s']:.3f} s = dense part "
            f"{r['profile']['dense_only_s']:.3f} s + aggregations "
            f"{r['profile']['aggregation_only_s']:.3f} s alone")


if __name__ == "__main__":
    print(summary(run()))
