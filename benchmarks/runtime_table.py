"""The paper's runtime table (tab:runtimes), measured here: training and inference seconds
per Peptides-func epoch for GCN, GPS, GraphCON, ADGN, SWAN and SWAN-learn at the table's
setting (batch 64, 128 channels, 5 layers), on the device that runs it, beside the paper's
RTX 3090 figures and, where torch and the authors' model file are at hand, the authors'
PyTorch SWAN and SWAN-learn on the same device and data. GPS is
`benchmarks.common.lrgb_gps_model` with LapPE. The campaign's cell `runtime/peptides-func`.

    python -m benchmarks.runtime_table                         # -> reproductions/runtime-<kind>/
    python -m benchmarks.runtime_table --ref .gpu_ref/swan.py  # with the authors' PyTorch beside
    python -m benchmarks.runtime_table --quick --out runs/runtime-smoke   # 600 graphs a split

Per model, one `swan_jax.train.train` call of `--epochs` epochs on the device pipeline:
*training* is the median training part of the epochs after the first (which compiles),
*inference* the median evaluation of the validation and test splits (4,662 graphs; the
paper does not say which graphs its inference column counts). RESULTS.md shows the
results (`make results`); a run on fewer graphs is marked reduced there.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import reference_pytorch as rp
from benchmarks.common import GPS_LAP_K, ROOT, lrgb_gps_model, lrgb_model, machine
from benchmarks.epoch_anatomy import _epochs, _peptides
from reproduce.device import device_kind
from reproduce.results.store import output_arguments, write_run
from swan_jax.data.lrgb import ensure_available
from swan_jax.data.positional import with_positional_encodings

MODELS = ("gcn", "gps", "graphcon", "adgn", "swan", "swan-learn")  # the paper's rows
EXPERIMENT = "runtime"  # reproduce.results.store.RUNTIME


def peptides_missing() -> str | None:
    """Why the real Peptides-func cannot be timed here (else it times stand-ins), or None."""
    data_dir = os.environ.get("SWAN_DATA_DIR") or str(ROOT.parent / "shared" / "data")
    missing = ensure_available(["peptides-func"], data_dir, download=False, verify_md5=False)
    return (f"Peptides-func's raw files are not in {data_dir} (set SWAN_DATA_DIR)"
            if missing else None)


def measure_ours(epochs: int, quick: bool, models: Sequence[str] = MODELS
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per model its seconds (one `train` call each); the split sizes and `about`."""
    work = _peptides(quick)
    sizes: dict[str, Any] = {name: len(split) for name, split in work.splits.items()}
    sizes["about"] = work.about
    out: dict[str, Any] = {}
    for kind in models:
        print(f"runtime: {kind} ({epochs} epochs) ...", flush=True)
        timed = _epochs(gps_workload(work) if kind == "gps" else dataclasses.replace(
            work, model_fn=lambda hp, k=kind: lrgb_model(k)), "device", epochs)
        out[kind] = {"train_s": timed["train_s"], "inference_s": timed["eval_s"],
                     "epoch_s": timed["epoch_s"], "first_epoch_s": timed["first_epoch_s"],
                     "epochs": epochs}
    return out, sizes


def gps_workload(work):
    """The same graphs with LapPE (untimed) and `lrgb_gps_model` sized to the largest."""
    splits = {name: with_positional_encodings(split, lap_k=GPS_LAP_K)
              for name, split in work.splits.items()}
    max_nodes = max(int(split.n_node.max()) for split in splits.values())
    model = lrgb_gps_model(max_nodes)
    return dataclasses.replace(work, splits=splits, model_fn=lambda hp: model)


def measure_reference(ref: Path, rounds: int, quick: bool) -> dict[str, Any]:
    """The authors' SWAN and SWAN-learn (`benchmarks.reference_pytorch`), or why not."""
    try:
        import torch
    except ImportError:
        return {"skipped": "torch is not installed here"}

    arrays = rp._splits(None, quick)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    timed = rp.time_reference(rp.load_reference(ref),
                              {k: rp.pyg_graphs(v) for k, v in arrays.items()}, device,
                              rounds)
    models = {name.replace("_", "-"): {"train_s": statistics.median(t["train_epoch_s"]),
                                       "inference_s": statistics.median(t["eval_s"])}
              for name, t in timed.items()}
    return {"device": device, "torch": torch.__version__, "patches": rp.PATCHES,
            "models": models}


def results(epochs: int, quick: bool, ref: Path | None) -> dict[str, Any]:
    started = time.time()
    ours, sizes = measure_ours(epochs, quick)
    reference = ({"skipped": "no --ref (the authors' models/swan.py)"} if ref is None
                 else measure_reference(ref, max(epochs - 1, 1), quick))
    return {"experiment": EXPERIMENT, "machine": machine(), "graphs": sizes, "cells": [],
            "config": {"epochs": epochs, "quick": quick},
            "setting": "Peptides-func, batch 64, 128 channels, 5 layers (Euler steps for "
                       "SWAN, SWAN-learn, ADGN and GraphCON), AdamW, BCE, the device "
                       "pipeline",
            "models": ours, "reference": reference, "load_average": os.getloadavg(),
            "wall_s": time.time() - started}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.runtime_table",
                                description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=3,
                   help="epochs per model (the first compiles; default 3)")
    p.add_argument("--ref", type=Path, default=None,
                   help="the authors' graph_property_prediction/models/swan.py")
    p.add_argument("--quick", action="store_true", help="600 graphs a split (a smoke run)")
    output_arguments(p, EXPERIMENT)
    args = p.parse_args(argv)
    if args.epochs < 2:
        p.error("--epochs must be at least 2 (the first epoch compiles)")
    if args.ref is not None and not args.ref.is_file():
        p.error(f"--ref {args.ref}: no such file (the authors' models/swan.py)")
    missing = peptides_missing()
    if missing:  # the runtime table is never timed on stand-in graphs
        p.exit(2, f"python -m benchmarks.runtime_table: {missing}\n")
    out = args.out or args.reproductions / f"{EXPERIMENT}-{device_kind()}"
    record = results(args.epochs, args.quick, args.ref)
    write_run(out, record | ({"note": args.note} if args.note else {}),
              "python -m benchmarks.runtime_table " + " ".join(argv or sys.argv[1:]))
    print(f"runtime: wrote {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
