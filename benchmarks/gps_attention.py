"""Figure 3's GPS epoch with flax's attention against `gpsconv.masked_attention`.

The authors' GPS attends over the whole batch (`swan_jax.models.gpsconv`): at line
k = 3, 512 graphs make a `[runs, heads, 2112, 2112]` attention. With flax's
`dot_product_attention`, autodiff's softmax VJP compiled on XLA:CPU into a row reduction
that took 54% of the epoch (`benchmarks.device_profile`-style trace); `masked_attention`
takes those row sums as one batched dot (`gpsconv.softmax_rows`). This benchmark builds
the campaign cell's program twice in one process (the paper's 4 seeds), once with each
attention, and alternates their epochs (training, then validation and test):

    python -m benchmarks.gps_attention                 # line k = 3, 3 rounds
    python -m benchmarks.gps_attention --distance 5 --rounds 5

It prints the wall and CPU seconds per epoch of both, their ratio, and how far apart
the two programs' evaluation outputs and parameters are after one epoch (rounding
only: both compute the same softmax and gradient).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import numpy as np

from benchmarks.common import ROOT, machine
from swan_jax.experiments.sweep import train_config
from swan_jax.experiments.transfer import EXPERIMENT
from swan_jax.models import gpsconv
from swan_jax.train import open_program


def flax_attention(query, key, value, mask=None, dtype=None):
    """flax's own attention (autodiff's softmax VJP), with `masked_attention`'s signature."""
    return nn.dot_product_attention(query, key, value, mask=mask, dtype=dtype)


def _program(distance: int, folder: Path):
    cfg = dataclasses.replace(EXPERIMENT.default_config(), topologies=("line",),
                              distances=(distance,), models=("gps",), epochs=3,
                              checkpoint_dir=str(folder), progress=False, quiet=True)
    (program,) = EXPERIMENT.plan(cfg, EXPERIMENT.cells(cfg)[:1])
    splits = EXPERIMENT.load_data(cfg, program.cell)
    tcfg = dataclasses.replace(train_config(EXPERIMENT, cfg, program, None), progress=False,
                               quiet=True)
    return open_program(EXPERIMENT.model_fn(cfg, program.cell, program.static), splits, tcfg,
                        program.grid)


def _epoch(prog, state) -> tuple[float, float, Any, list]:
    wall, cpu = time.perf_counter(), time.process_time()
    state, _ = prog.pipeline.train_epoch(state, prog.hp, 1, lambda n: None)
    scores = jax.block_until_ready([prog.pipeline.evaluate(state.params, prog.hp, s)
                                    for s in ("val", "test")])
    return time.perf_counter() - wall, time.process_time() - cpu, state, scores


def _largest_gap(a, b) -> float:
    return max(float(np.max(np.abs(np.asarray(x, float) - np.asarray(y, float))))
               for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b),
                               strict=True))


def measure(distance: int, rounds: int) -> dict[str, Any]:
    """Both programs compiled (their first epochs compared), then `rounds` alternations."""
    ours = gpsconv.masked_attention
    with tempfile.TemporaryDirectory() as tmp:
        gpsconv.masked_attention = flax_attention  # read when the program is traced
        try:
            flax_prog = _program(distance, Path(tmp) / "flax")
            first_flax = _epoch(*flax_prog)
        finally:
            gpsconv.masked_attention = ours
        our_prog = _program(distance, Path(tmp) / "ours")
        first_ours = _epoch(*our_prog)
        times: dict[str, list[tuple[float, float]]] = {"flax": [], "ours": []}
        for _ in range(rounds):
            for name, prog in (("flax", flax_prog), ("ours", our_prog)):
                times[name].append(_epoch(*prog)[:2])
    pairs = list(zip(times["flax"], times["ours"], strict=True))
    return {"machine": machine(), "distance": distance, "runs": len(our_prog[1].stopped),
            "seconds": times,
            "wall_ratio": statistics.median(f[0] / o[0] for f, o in pairs),
            "cpu_ratio": statistics.median(f[1] / o[1] for f, o in pairs),
            "first_epoch_score_gap": _largest_gap(first_flax[3], first_ours[3]),
            "first_epoch_param_gap": _largest_gap(first_flax[2].params, first_ours[2].params)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gps_attention",
                                description=__doc__.split("\n")[0])
    p.add_argument("--distance", type=int, default=3, help="line graph distance k")
    p.add_argument("--rounds", type=int, default=3, help="alternating epochs timed")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                   "gps_attention.json")
    args = p.parse_args(argv)
    if args.distance < 1 or args.rounds < 1:
        p.error("--distance and --rounds take positive numbers")
    result = measure(args.distance, args.rounds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=float) + "\n")
    for name, rows in result["seconds"].items():
        print(f"{name:5s} wall {statistics.median(w for w, _ in rows):.2f} s, "
              f"CPU {statistics.median(c for _, c in rows):.2f} s per epoch")
    print(f"flax / ours: wall {result['wall_ratio']:.2f}x, CPU {result['cpu_ratio']:.2f}x; "
          f"after one epoch, scores differ by {result['first_epoch_score_gap']:.1e}, "
          f"parameters by {result['first_epoch_param_gap']:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
