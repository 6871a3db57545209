"""Figure 3's GPS epoch with another attention against `gpsconv.masked_attention`.

The authors' GPS attends over the whole batch (`swan_jax.models.gpsconv`): at line
k = 3, 512 graphs make a `[runs, heads, 2112, 2112]` attention. Two steps took it down:
`softmax_rows`, a softmax VJP whose row sums are one batched dot (flax's
`dot_product_attention`, autodiff's VJP: a row reduction that took 54% of the epoch on
XLA:CPU), then `blocked_attention`, the attention `ATTENTION_BLOCK` query rows at a time
(`whole_attention` writes every `[runs, heads, N, N]` array whole to memory). This
benchmark builds the campaign cell's program twice in one process (the paper's 4 seeds),
once with the baseline attention (`--baseline whole`, the default, or `flax`) and once
with ours, and alternates their epochs (training, then validation and test):

    python -m benchmarks.gps_attention                 # line k = 3, 3 rounds
    python -m benchmarks.gps_attention --topology ring --distance 5 --rounds 3
    python -m benchmarks.gps_attention --baseline flax --distance 5

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


def whole_attention(query, key, value, mask=None, dtype=None):
    """Our attention on whole score arrays (before `blocked_attention`)."""
    return gpsconv.whole_attention(query, key, value, mask)


BASELINES = {"whole": whole_attention, "flax": flax_attention}


def _program(topology: str, distance: int, folder: Path, **train: Any):
    """The campaign cell's program (`open_program`), its training configuration changed
    by `train`."""
    cfg = dataclasses.replace(EXPERIMENT.default_config(), topologies=(topology,),
                              distances=(distance,), models=("gps",), epochs=3,
                              checkpoint_dir=str(folder), progress=False, quiet=True)
    (program,) = EXPERIMENT.plan(cfg, EXPERIMENT.cells(cfg)[:1])
    splits = EXPERIMENT.load_data(cfg, program.cell)
    tcfg = dataclasses.replace(train_config(EXPERIMENT, cfg, program, None), progress=False,
                               quiet=True, **train)
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


def measure(topology: str, distance: int, rounds: int,
            baseline: str = "whole") -> dict[str, Any]:
    """Both programs compiled (their first epochs compared), then `rounds` alternations."""
    ours = gpsconv.masked_attention
    with tempfile.TemporaryDirectory() as tmp:
        gpsconv.masked_attention = BASELINES[baseline]  # read when the program is traced
        try:
            base_prog = _program(topology, distance, Path(tmp) / baseline)
            first_base = _epoch(*base_prog)
        finally:
            gpsconv.masked_attention = ours
        our_prog = _program(topology, distance, Path(tmp) / "ours")
        first_ours = _epoch(*our_prog)
        times: dict[str, list[tuple[float, float]]] = {baseline: [], "ours": []}
        for _ in range(rounds):
            for name, prog in ((baseline, base_prog), ("ours", our_prog)):
                times[name].append(_epoch(*prog)[:2])
    pairs = list(zip(times[baseline], times["ours"], strict=True))
    return {"machine": machine(), "topology": topology, "distance": distance,
            "baseline": baseline, "block": gpsconv.ATTENTION_BLOCK,
            "runs": len(our_prog[1].stopped), "seconds": times,
            "wall_ratio": statistics.median(f[0] / o[0] for f, o in pairs),
            "cpu_ratio": statistics.median(f[1] / o[1] for f, o in pairs),
            "first_epoch_score_gap": _largest_gap(first_base[3], first_ours[3]),
            "first_epoch_param_gap": _largest_gap(first_base[2].params, first_ours[2].params)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gps_attention",
                                description=__doc__.split("\n")[0])
    p.add_argument("--topology", default="line", choices=("line", "ring", "crossed-ring"))
    p.add_argument("--distance", type=int, default=3, help="the distance k")
    p.add_argument("--baseline", default="whole", choices=sorted(BASELINES),
                   help="the attention ours is timed against")
    p.add_argument("--rounds", type=int, default=3, help="alternating epochs timed")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                   "gps_attention.json")
    args = p.parse_args(argv)
    if args.distance < 1 or args.rounds < 1:
        p.error("--distance and --rounds take positive numbers")
    result = measure(args.topology, args.distance, args.rounds, args.baseline)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=float) + "\n")
    for name, rows in result["seconds"].items():
        print(f"{name:5s} wall {statistics.median(w for w, _ in rows):.2f} s, "
              f"CPU {statistics.median(c for _, c in rows):.2f} s per epoch")
    print(f"{args.baseline} / ours: wall {result['wall_ratio']:.2f}x, "
          f"CPU {result['cpu_ratio']:.2f}x; "
          f"after one epoch, scores differ by {result['first_epoch_score_gap']:.1e}, "
          f"parameters by {result['first_epoch_param_gap']:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
