"""The GPU check (`benchmarks/gpu_check.sh` runs it): everything in one short run.

1. Benchmark 1 on both paths (SWAN, SWAN-learn, GCN training steps; segment sums against
   gathers) -> `benchmarks.train_step`.
2. Four vmapped seeds against one, both paths -> `benchmarks.seeds`.
3. The epoch anatomy of both pipelines (Peptides-func SWAN and SWAN-learn, transfer line
   k = 10 on the paper's grid, GraphProp, Tolokers) -> `benchmarks.epoch_anatomy`.
4. The authors' PyTorch SWAN on the same GPU and data (`--ref`, its `models/swan.py`),
   with swan-jax's step and epoch in the same process -> `benchmarks.reference_pytorch`.
5. A Peptides-func SWAN training run (batch 64, d 128, 5 Euler layers, AdamW 1e-3) for the
   minutes left, resumable across separate runs: the run's checkpoints live in a folder
   that `gpu_check.sh` packs into one file under `$OUT` and unpacks next time.

Figures go to `OUT/gpu_check.json`. `--smoke` shrinks everything for a CPU run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
import traceback
from pathlib import Path

import jax

from benchmarks import seeds, train_step
from benchmarks.common import BATCH, lrgb_model, machine

SPLIT_LIMIT_SMOKE = 300  # graphs (rows of the raw file) in a smoke run


def _save(out: Path, record: dict) -> None:
    tmp = out / "gpu_check.json.tmp"
    tmp.write_text(json.dumps(record, indent=2, default=str))
    tmp.replace(out / "gpu_check.json")


def training(state_dir: Path, deadline: float, smoke: bool) -> dict:
    """Train SWAN on Peptides-func until `deadline` (resuming from `state_dir`)."""
    from swan_jax.data import load_peptides_func
    from swan_jax.train import TrainConfig, train

    data_dir = os.environ.get("SWAN_DATA_DIR", "data")
    splits = load_peptides_func(data_dir, download=False, progress=False,
                                limit=SPLIT_LIMIT_SMOKE if smoke else None)
    checkpoints = state_dir / "checkpoints"
    saved = [int(p.name) for p in checkpoints.glob("*") if p.name.isdigit()] \
        if checkpoints.exists() else []
    done = max(saved, default=0)  # epochs trained by earlier runs

    def config(epochs: int) -> TrainConfig:
        return TrainConfig(epochs=epochs, batch_size=BATCH, optimizer="adamw",
                           learning_rate=1e-3, loss="bce", metric="ap", task_level="graph",
                           checkpoint_dir=str(checkpoints), resume=True, progress=False,
                           description="peptides-func swan (gpu check)")

    def model_fn(hp):
        return lrgb_model("swan")

    # One epoch first (it compiles), then as many more as the time left allows; the second
    # call compiles again, which the first call's time beyond its epoch estimates.
    start = time.perf_counter()
    first = train(model_fn, splits, config(done + 1))
    epoch_s = first.history[-1]["seconds"]
    overhead = time.perf_counter() - start - epoch_s
    left = deadline - time.time() - overhead
    more = max(0, math.floor((left - epoch_s) / max(epoch_s, 1e-3)))
    result = train(model_fn, splits, config(done + 1 + more)) if more else first
    history = result.history
    # The first epoch of each call compiles: steady epochs are the later ones.
    steady = [h["seconds"] for h in history[done + 2:]] or [epoch_s]
    return {"epochs_before": done, "epochs_after": len(history), "first_epoch_s": epoch_s,
            "epoch_s_median": sorted(steady)[len(steady) // 2],
            "epoch_s_all": [h["seconds"] for h in history],
            "val_ap": [h["val"][0] for h in history], "best_val_ap": result.runs[0]["best_val"],
            "test_ap_at_best": result.runs[0]["test"], "train_graphs": len(splits["train"]),
            "wall_s": time.perf_counter() - start, "target_epoch_s": 1.0,
            "paper_epoch_s_rtx3090": 2.88}


def _anatomy(out: Path, workloads: str, smoke: bool) -> dict:
    from benchmarks import epoch_anatomy

    path = out / "epoch_anatomy.json"
    epoch_anatomy.main(["--out", str(path), "--epochs", "3", "--repeat", "3",
                        "--only", workloads, *(["--quick"] if smoke else [])])
    return json.loads(path.read_text())


def _reference(out: Path, ref: str | None, smoke: bool) -> dict:
    if ref is None or not Path(ref).is_file():
        return {"skipped": f"no reference model file ({ref!r}): pass --ref PATH/swan.py"}
    try:
        import torch  # noqa: F401
    except ImportError:
        return {"skipped": "torch is not installed here"}
    from benchmarks import reference_pytorch

    path = out / "reference_pytorch.json"
    reference_pytorch.main(["--ref", ref, "--out", str(path), "--rounds", "2",
                            *(["--quick"] if smoke else [])])
    return json.loads(path.read_text())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--state", required=True, help="checkpoint folder (resumed if present)")
    parser.add_argument("--minutes", type=float, default=7.0,
                        help="finish everything within this many minutes")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for a CPU run")
    parser.add_argument("--only", default="bench,seeds,anatomy,reference,training",
                        help="comma list of the parts to run, in the order they run: bench, "
                             "seeds, anatomy, reference, training; none for none")
    parser.add_argument("--anatomy",
                        default="peptides,peptides-learn,transfer,transfer-cpu,graphprop,tolokers",
                        help="the epoch anatomy's workloads, in the order they run")
    parser.add_argument("--ref", default=None,
                        help="the authors' models/swan.py for the reference part")
    args = parser.parse_args(argv)
    started = time.time()
    deadline = started + 60 * args.minutes
    out, state = Path(args.out), Path(args.state)
    out.mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    record = {"machine": machine(), "devices": [str(d) for d in jax.devices()],
              "smoke": args.smoke, "minutes": args.minutes}
    _save(out, record)
    # Few repeats (GPU timings hardly vary) and no profile: compilations take the time.
    parts = (("bench", "benchmark_1_train_step",
              lambda: train_step.run(quick=True, profile=args.smoke)),
             ("seeds", "benchmark_3_seeds", lambda: seeds.run(quick=True)),
             ("anatomy", "epoch_anatomy", lambda: _anatomy(out, args.anatomy, args.smoke)),
             ("reference", "reference_pytorch", lambda: _reference(out, args.ref, args.smoke)),
             ("training", "peptides_func_training", lambda: training(state, deadline,
                                                                      args.smoke)))
    by_key = {key: (name, fn) for key, name, fn in parts}
    wanted = [p.strip() for p in args.only.split(",") if p.strip() not in ("", "none")]
    unknown = sorted(set(wanted) - set(by_key))
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(by_key)}")
    for name, fn in (by_key[key] for key in wanted):  # in the order asked
        begin = time.time()
        try:
            record[name] = fn()
        except Exception:  # one failed part must not lose the others' figures
            record[name] = {"error": traceback.format_exc()}
        record[name + "_wall_s"] = time.time() - begin
        _save(out, record)
        print(f"[{time.time() - started:.0f} s] {name} done", flush=True)
    summary = {}
    if "paths" in record.get("benchmark_1_train_step", {}):
        r = record["benchmark_1_train_step"]
        summary["train_step_s"] = {k: {p: v[p]["median_s"] for p in ("segment", "gather")}
                                   for k, v in r["models"].items()}
        summary["swan_efficiency_gather"] = r["paths"]["gather"]["swan_efficiency"]
    if "epoch_s_median" in record.get("peptides_func_training", {}):
        summary["epoch_s"] = record["peptides_func_training"]["epoch_s_median"]
    record["summary"] = summary
    _save(out, record)
    print(json.dumps(summary, indent=1))
    return 0 if all("error" not in record.get(name, {}) for _, name, _ in parts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
