"""Why `shard_runs` is not bit-identical to one device on XLA:CPU (issue 39): one run's
numbers depend on how many runs share its vmapped program; and how blocks of runs made
them the same bits (the `run_block` setting, removed in issue 49: no result needed it).

A two-layer tanh model's loss and gradient, `vmap`ped over `R = 8` runs that share their
inputs `x [N, d]` (as a grid's runs share a batch), computed five ways on 4 simulated CPU
devices:

- `one8`: one device, all 8 runs in one vmapped program (`shard_runs=False`);
- `sharded`: `shard_map` over the 4 devices, 2 runs per device (`shard_runs=True`);
- `one2`: one device, the first 2 runs alone (what device 0 holds);
- `map`: `lax.map` over the runs (each run its own program of width 1), on one device and
  sharded;
- `blocked`: `swan_jax.train.in_blocks` (blocks of 2): on one device 4 vmapped blocks
  of 2 runs one after another, sharded one block per device.

    XLA_FLAGS=--xla_force_host_platform_device_count=4 python -m benchmarks.run_width_bits

What it showed (2026-11-28, jax 0.10.2, the 2-core CPU): `sharded` differs from `one8` by
float32 rounding (1.5e-8 in the gradient) and equals `one2` bit for bit on device 0;
`one8` itself differs from `one2` in those same two runs; `map` is the same bits on one
device and sharded, and so is `blocked`. So a run's numbers move with the width of the
vmapped program it sits in (XLA folds the product with the shared operand over the runs
into one larger matrix product, whose blocking, and so summation order, follows its
size), and no flag tried changed that: `--xla_cpu_use_thunk_runtime=false`,
`--xla_cpu_prefer_vector_width=128`, `--xla_cpu_use_xnnpack=false`,
`--xla_cpu_multi_thread_eigen=false`. Blocks of a fixed width `B` fix it at a cost that
`B` chooses (on a GPU the blocks run one after another: `B` runs fill less of the device
than all of them), where width-1 programs (`map`) give up vmapping altogether.

In the training test model (`tests/run_mesh_script.py`, Adam) width was not the only
cause: with SGD, device 0's runs equalled the same runs trained alone, but with Adam no
run equalled one device's, in blocks or not. The partitioned program simplifies Adam's
bias correction otherwise (the SPMD clean-up's CSE merges the per-run divisors'
broadcasts of same-shape leaves before XLA's algebraic simplifier picks its rewrite of
`(m / c) / (sqrt(v / c') + eps)`); with `run_block` the optimiser multiplied by the
reciprocals (removed with it), and every run's history and parameters were one device's,
bit for bit.
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from swan_jax.train import in_blocks

RUNS, NODES, WIDTH = 8, 300, 16


def _loss(w, x, y):
    h = jnp.tanh(jnp.tanh(x @ w) @ w.T)
    return jnp.mean((h - y) ** 2)


def _vmapped(w, x, y):
    return jax.vmap(jax.value_and_grad(_loss), in_axes=(0, None, None))(w, x, y)


def _mapped(w, x, y):
    return jax.lax.map(lambda wi: jax.value_and_grad(_loss)(wi, x, y), w)


def run() -> dict:
    if jax.device_count() != 4:
        raise SystemExit("run with XLA_FLAGS=--xla_force_host_platform_device_count=4")
    mesh = Mesh(np.asarray(jax.devices()), ("runs",))
    k = jax.random.split(jax.random.key(0), 3)
    w = jax.random.normal(k[0], (RUNS, WIDTH, WIDTH))
    x, y = (jax.random.normal(key, (NODES, WIDTH)) for key in k[1:])

    def sharded(fn):
        return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=(P("runs"), P(), P()),
                                     out_specs=P("runs"), check_vma=False))(w, x, y)

    one8, one2 = jax.jit(_vmapped)(w, x, y), jax.jit(_vmapped)(w[:2], x, y)
    split, map1, map4 = sharded(_vmapped), jax.jit(_mapped)(w, x, y), sharded(_mapped)
    blocked = in_blocks(_vmapped, (True, False, False), 2)
    blocks1, blocks4 = jax.jit(blocked)(w, x, y), sharded(blocked)

    def same(a, b) -> bool:
        return all(bool((p == q).all()) for p, q in zip(a, b, strict=True))

    return {
        "sharded_equals_one_device": same(split, one8),
        "largest_gradient_difference": float(jnp.abs(split[1] - one8[1]).max()),
        "device0_equals_its_runs_alone": same((split[0][:2], split[1][:2]), one2),
        "one_device_width_8_equals_width_2": same((one8[0][:2], one8[1][:2]), one2),
        "lax_map_sharded_equals_one_device": same(map4, map1),
        "blocked_sharded_equals_one_device": same(blocks4, blocks1),
        "blocked_one_device_equals_unblocked_width_2": same(
            (blocks1[0][:2], blocks1[1][:2]), one2),
        "machine": {"jax": jax.__version__, "backend": jax.default_backend()},
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
