"""XLA:CPU's own switches against the lone GraphProp epoch (issue 50's 10x).

Could a flag of XLA:CPU, rather than a change of ours, bring a lone GraphProp epoch
("SSSP", SWAN hidden 20, 10 layers, one seed, full data; train + validation + test)
toward the authors' / 10? XLA reads its flags once per process, so each flag set runs in
its own child process (`--child`), which builds the epoch as `benchmarks.epoch_anatomy
--grid` does, compiles it and times `--epochs` epochs. Rounds alternate the flag sets;
the ratio to the default is taken round by round, then its median. Every child also
prints its validation loss after one more epoch: a flag that changes the numbers says
so. Results: `benchmarks/results/xla_flags.json` (or `--out`).

    python -m benchmarks.xla_flags                  # 3 rounds, all flag sets
    python -m benchmarks.xla_flags --rounds 5 --sets XNNPACK      # one set, 5 rounds
    python -m benchmarks.xla_flags --rounds 1 --per-size 128,32,64   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, machine

FLAG_SETS = {
    "default": "",
    "Eigen on one thread": "--xla_cpu_multi_thread_eigen=false",
    "XNNPACK": "--xla_cpu_use_xnnpack=true",
    "XNNPACK graph fusion": "--xla_cpu_experimental_xnn_graph_fusion_mode="
                            "XNN_GRAPH_FUSION_MODE_GREEDY",
    "no YNNPACK dots": "--xla_cpu_experimental_ynn_fusion_type=",
    "oneDNN": "--xla_cpu_use_onednn=true",
    "512-bit vectors": "--xla_cpu_prefer_vector_width=512",
    "concurrency scheduler": "--xla_cpu_enable_concurrency_optimized_scheduler=true",
    "legacy fusion emitters": "--xla_cpu_use_fusion_emitters=false",
}


def child(per_size: tuple[int, int, int], epochs: int) -> dict[str, Any]:
    """Median wall and CPU seconds of `epochs` lone-run epochs in this process."""
    import jax

    from benchmarks.epoch_anatomy import _grid_epoch, _grid_program

    with tempfile.TemporaryDirectory() as tmp:
        prog, state = _grid_program((0.1,), ("sym",), per_size, f"{tmp}/0")
        _grid_epoch(prog, state)  # compiles
        timings = [_grid_epoch(prog, state) for _ in range(epochs)]
        state, _ = prog.pipeline.train_epoch(state, prog.hp, 1, lambda n: None)
        val = prog.pipeline.evaluate(state.params, prog.hp, "val")
        loss = float(jax.numpy.mean(jax.tree_util.tree_leaves(val)[0]))
    return {"wall_s": statistics.median(w for w, _ in timings),
            "cpu_s": statistics.median(c for _, c in timings), "val_loss": loss}


def _run_child(flags: str, per_size: str, epochs: int) -> dict[str, Any]:
    env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()}
    done = subprocess.run([sys.executable, "-m", "benchmarks.xla_flags", "--child",
                           "--per-size", per_size, "--epochs", str(epochs)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def sweep(rounds: int, per_size: str, epochs: int, names: list[str]) -> dict[str, Any]:
    """The flag sets `names` (and the default) in every round; per set, medians and the
    median ratio to the default."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in ["default", *names]}
    for r in range(rounds):
        for name in runs:
            runs[name].append(_run_child(FLAG_SETS[name], per_size, epochs))
            print(f"round {r + 1}/{rounds}  {name}: {runs[name][-1]}", flush=True)
    out: dict[str, Any] = {"per_size": per_size, "epochs": epochs, "rounds": rounds,
                           "machine": machine(), "load_average": os.getloadavg(),
                           "flag_sets": {}}
    for name, results in runs.items():
        pairs = [(a, b) for a, b in zip(results, runs["default"], strict=True)
                 if "error" not in a and "error" not in b]
        if not pairs:
            out["flag_sets"][name] = {"flags": FLAG_SETS[name], "error": results[-1]["error"]}
            continue
        out["flag_sets"][name] = {
            "flags": FLAG_SETS[name],
            "wall_s": statistics.median(a["wall_s"] for a, _ in pairs),
            "cpu_s": statistics.median(a["cpu_s"] for a, _ in pairs),
            "wall_ratio": statistics.median(b["wall_s"] / a["wall_s"] for a, b in pairs),
            "cpu_ratio": statistics.median(b["cpu_s"] / a["cpu_s"] for a, b in pairs),
            "val_loss": pairs[-1][0]["val_loss"]}
    return out


def table(result: dict[str, Any]) -> str:
    rows = ["| flag set | wall s | CPU s | default / this (wall) | (CPU) | val loss |",
            "|---|---|---|---|---|---|"]
    for name, r in result["flag_sets"].items():
        rows.append(f"| {name} | error: {r['error']} | | | | |" if "error" in r else
                    f"| {name} | {r['wall_s']:.3f} | {r['cpu_s']:.3f} | "
                    f"{r['wall_ratio']:.2f}x | {r['cpu_ratio']:.2f}x | {r['val_loss']:.6g} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.xla_flags",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="rounds over all flag sets")
    p.add_argument("--epochs", type=int, default=5, help="timed epochs per child")
    p.add_argument("--per-size", default="512,128,256",
                   help="GraphProp graphs per node count, train,val,test (full: default)")
    p.add_argument("--sets", default=",".join(list(FLAG_SETS)[1:]),
                   help="comma-separated flag sets beside the default (default: all)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                   "xla_flags.json")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    train, val, test = (int(n) for n in args.per_size.split(","))
    if args.child:
        print(json.dumps(child((train, val, test), args.epochs)))
        return 0
    names = [n for n in args.sets.split(",") if n and n != "default"]
    unknown = [n for n in names if n not in FLAG_SETS]
    if unknown:
        p.error(f"unknown flag set(s) {', '.join(unknown)}; valid: {', '.join(FLAG_SETS)}")
    started = time.perf_counter()
    result = sweep(args.rounds, args.per_size, args.epochs, names)
    result["seconds"] = time.perf_counter() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
