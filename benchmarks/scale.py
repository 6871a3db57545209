"""Benchmark 5: SWAN step time against nodes per batch, 10^3 to 10^6 nodes (CPU).

One gradient step of a 5-step Euler SWAN block (hidden 64) on a sparse graph with about
two edges per node in each direction; the paper claims cost linear in |V| + |E|, so the
log-log slope of time against |V| + |E| should be close to 1. Both paths: segment sums on
the GraphsTuple, gathers on its `prepare_graph` layout (prepared once on the host; the
time to prepare it is reported beside).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import jraph
import numpy as np

import swan_jax as sj
from benchmarks.common import PATHS, interleaved, machine

SIZES = (1_000, 10_000, 100_000, 1_000_000)
HIDDEN = 64


def sparse_graph(num_nodes: int, seed: int = 0) -> jraph.GraphsTuple:
    """A path through every node plus one random chord per node, both directions."""
    rng = np.random.default_rng(seed)
    path = np.arange(num_nodes - 1)
    chord_from = np.arange(num_nodes)
    chord_to = rng.integers(0, num_nodes, num_nodes)
    send = np.concatenate([path, chord_from])
    recv = np.concatenate([path + 1, chord_to])
    senders = np.concatenate([send, recv]).astype(np.int32)
    receivers = np.concatenate([recv, send]).astype(np.int32)
    return jraph.GraphsTuple(nodes=None, edges=None, senders=senders, receivers=receivers,
                             n_node=np.array([num_nodes], np.int32),
                             n_edge=np.array([len(senders)], np.int32), globals=None)


def _slope(points, path: str, start: int = 0) -> float:
    size = np.log([p["nodes"] + p["edges"] for p in points[start:]])
    seconds = np.log([p[path]["median_s"] for p in points[start:]])
    return float(np.polyfit(size, seconds, 1)[0])


def run(quick: bool = False) -> dict:
    import time

    cfg = sj.SWANConfig(variant="swan", adjacency="sym", num_layers=5, epsilon=1.0,
                        gamma=0.1, beta=1.0)
    params = sj.init_params(jax.random.PRNGKey(0), HIDDEN, cfg)
    points = []
    for n in SIZES[:3] if quick else SIZES:
        graph = sparse_graph(n)
        start = time.perf_counter()
        prepared = sj.prepare_graph(graph)
        prepare_s = time.perf_counter() - start
        graphs = {"segment": jax.tree_util.tree_map(jnp.asarray, graph),
                  "gather": jax.tree_util.tree_map(jnp.asarray, prepared)}
        x0 = jax.random.normal(jax.random.PRNGKey(1), (n, HIDDEN)) * 0.1

        def loss(p, graph, x0):
            return jnp.mean(sj.solve(p, graph, x0, cfg, "euler") ** 2)

        grad = jax.jit(jax.grad(loss))  # graph and state as arguments: nothing to fold
        timings = interleaved({path: partial(grad, params, graphs[path], x0) for path in PATHS},
                              repeat=3 if n >= 10**6 else 5)
        points.append({"nodes": n, "edges": int(graph.senders.shape[0]), "prepare_s": prepare_s,
                       "slot_width": prepared.slot_width, "overflow_rows": prepared.num_overflow,
                       **timings})
    return {"benchmark": "scale", "machine": machine(), "hidden": HIDDEN, "layers": 5,
            "points": points,
            "paths": {path: {"loglog_slope": _slope(points, path),
                             "loglog_slope_from_1e4": _slope(points, path, 1)} for path in PATHS}}


def summary(r: dict) -> str:
    parts = []
    for path in PATHS:
        times = ", ".join(f"{p['nodes']:.0e}: {p[path]['median_s']:.3g} s" for p in r["points"])
        parts.append(f"{path}: {times}; slope {r['paths'][path]['loglog_slope']:.2f} "
                     f"({r['paths'][path]['loglog_slope_from_1e4']:.2f} from 1e4)")
    return f"scale (gradient step, hidden {r['hidden']}; 1 = linear): " + "; ".join(parts)


if __name__ == "__main__":
    print(summary(run()))
