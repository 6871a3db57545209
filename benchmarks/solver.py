"""Benchmark 2: the diffrax Euler solve against a hand-written loop of the same steps.

Forward and gradient (of a sum of squares of the final state w.r.t. the field's
parameters) on a Peptides batch, once and vmapped over 4 parameter sets, on both paths
(segment sums and gathers). Target: gradient at most 1.15x the loop.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

import swan_jax as sj
from benchmarks.common import (
    HIDDEN,
    LAYERS,
    PATHS,
    interleaved,
    machine,
    on_path,
    peptide_batch,
    peptides_train,
)


def hand_loop(params, graph, x0, cfg):
    """`num_layers` explicit Euler steps `x <- x + eps f(x)` (the paper's layers), with the
    operators built once from `x0` as `solve` does."""
    ops = sj.field.build_operators(params, graph, x0, cfg)
    x = x0
    for layer in range(cfg.num_layers):
        x = x + cfg.epsilon * sj.field.field_with_operators(params, graph, x, ops, cfg,
                                                      layer * cfg.epsilon)
    return x


def run(quick: bool = False) -> dict:
    data, source = peptides_train(256)
    batch, _ = peptide_batch(data)
    n = batch.graph.nodes.shape[0]
    cfg = sj.SWANConfig(variant="swan", adjacency="sym", num_layers=LAYERS, epsilon=1.0,
                        gamma=0.1, beta=1.0)
    x0 = jax.random.normal(jax.random.PRNGKey(1), (n, HIDDEN)) * 0.1
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    params = sj.init_params(keys[0], HIDDEN, cfg)
    stacked = jax.vmap(lambda k: sj.init_params(k, HIDDEN, cfg))(keys)

    # Graph and state are arguments (as in training), never constants XLA could fold.
    solvers = {"diffrax": lambda p, g, x: sj.solve(p, g, x, cfg, "euler"),
               "loop": lambda p, g, x: hand_loop(p, g, x, cfg)}
    record = {"benchmark": "solver", "machine": machine(), "data": source, "nodes": n,
              "layers": LAYERS, "hidden": HIDDEN, "target_grad_ratio": 1.15, "paths": {}}
    repeat = 3 if quick else 11
    fns = {}
    for path in PATHS:
        graph = on_path(batch, path).graph
        for name, fn in solvers.items():
            def loss(p, g, x, fn=fn):
                return jnp.sum(fn(p, g, x) ** 2)

            forward = jax.jit(fn)
            grad = jax.jit(jax.grad(loss))
            vgrad = jax.jit(jax.vmap(jax.grad(loss), in_axes=(0, None, None)))
            fns[f"{path}/{name}/forward_s"] = partial(forward, params, graph, x0)
            fns[f"{path}/{name}/grad_s"] = partial(grad, params, graph, x0)
            fns[f"{path}/{name}/grad_vmap4_s"] = partial(vgrad, stacked, graph, x0)
    timings = interleaved(fns, repeat)
    for path in PATHS:
        t = {name: {k: timings[f"{path}/{name}/{k}"]["median_s"]
                    for k in ("forward_s", "grad_s", "grad_vmap4_s")} for name in solvers}
        record["paths"][path] = {"timings": t, **{f"{k}_ratio": t["diffrax"][k] / t["loop"][k]
                                                  for k in ("forward_s", "grad_s",
                                                            "grad_vmap4_s")}}
    return record


def summary(r: dict) -> str:
    parts = [f"{path}: forward {p['forward_s_ratio']:.2f}x, gradient {p['grad_s_ratio']:.2f}x, "
             f"vmapped over 4 {p['grad_vmap4_s_ratio']:.2f}x"
             for path, p in r["paths"].items()]
    return (f"diffrax Euler / hand loop ({r['nodes']} nodes, {r['layers']} steps; target "
            f"gradient <= 1.15x): " + "; ".join(parts))


if __name__ == "__main__":
    print(summary(run()))
