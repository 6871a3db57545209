"""The paper's runtime table (tab:runtimes), measured here: training and inference seconds
per Peptides-func epoch for GCN, GPS, ADGN, SWAN and SWAN-learn at the table's setting
(batch 64, 128 channels, 5 layers; GPS as `benchmarks.common.lrgb_gps_model`), on the
device that runs it, beside the paper's RTX 3090 figures and, where torch and the
authors' model file are at hand, the authors' PyTorch SWAN and SWAN-learn on the same
device and data.

    python -m reproduce.runtime                         # -> reproductions/runtime-<kind>/
    python -m reproduce.runtime --ref .gpu_ref/swan.py  # with the authors' PyTorch beside
    python -m reproduce.runtime --quick --out runs/runtime-smoke   # 600 graphs a split

Per model, one `swan_jax.train.train` call of `--epochs` epochs on the device pipeline:
*training* is the median training part of the epochs after the first (which compiles),
*inference* the median evaluation of the validation and test splits (4,662 graphs; the
paper does not say which graphs its inference column counts). RESULTS.md shows the
results (`make results`); a run on fewer graphs is marked reduced there.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MODELS = ("gcn", "gps", "adgn", "swan", "swan-learn")
EXPERIMENT = "runtime"  # reproduce.results.store.RUNTIME


def measure_ours(epochs: int, quick: bool) -> tuple[dict[str, Any], dict[str, int]]:
    """Per model: training, inference, epoch and first-epoch seconds; and the split sizes."""
    from benchmarks.common import lrgb_model
    from benchmarks.epoch_anatomy import _epochs, _peptides

    work = _peptides(quick)
    sizes = {name: len(split) for name, split in work.splits.items()}
    out = {}
    for kind in MODELS:
        print(f"runtime: {kind} ({epochs} epochs) ...", flush=True)
        row = gps_workload(work) if kind == "gps" else dataclasses.replace(
            work, model_fn=lambda hp, k=kind: lrgb_model(k))
        timed = _epochs(row, "device", epochs)
        out[kind] = {"train_s": timed["train_s"], "inference_s": timed["eval_s"],
                     "epoch_s": timed["epoch_s"], "first_epoch_s": timed["first_epoch_s"],
                     "epochs": epochs}
    return out, sizes


def gps_workload(work):
    """The runtime workload with GPS: the same graphs with LapPE appended (computed here,
    once, untimed) and `benchmarks.common.lrgb_gps_model` sized to the largest graph."""
    from benchmarks.common import GPS_LAP_K, lrgb_gps_model
    from swan_jax.data.positional import with_positional_encodings

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
    from benchmarks import reference_pytorch as rp

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
    """The results file's content (`experiment = "runtime"`)."""
    from benchmarks.common import machine

    started = time.time()
    ours, sizes = measure_ours(epochs, quick)
    reference = ({"skipped": "no --ref (the authors' models/swan.py)"} if ref is None
                 else measure_reference(ref, max(epochs - 1, 1), quick))
    return {"experiment": EXPERIMENT, "machine": machine(), "graphs": sizes, "cells": [],
            "setting": "Peptides-func, batch 64, 128 channels, 5 layers (Euler steps for "
                       "SWAN, SWAN-learn and ADGN), AdamW, BCE, the device pipeline",
            "models": ours, "reference": reference, "load_average": os.getloadavg(),
            "wall_s": time.time() - started}


def _default_out(reproductions: Path) -> Path:
    from reproduce.campaign.__main__ import detect_device_kind

    return reproductions / f"runtime-{detect_device_kind()}"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reproduce.runtime",
                                description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=3,
                   help="epochs per model (the first compiles; default 3)")
    p.add_argument("--ref", type=Path, default=None,
                   help="the authors' graph_property_prediction/models/swan.py")
    p.add_argument("--quick", action="store_true", help="600 graphs a split (a smoke run)")
    p.add_argument("--reproductions", type=Path, default=Path("reproductions"))
    p.add_argument("--out", type=Path, default=None,
                   help="results folder (default REPRODUCTIONS/runtime-<device kind>)")
    args = p.parse_args(argv)
    if args.epochs < 2:
        p.error("--epochs must be at least 2 (the first epoch compiles)")
    if args.ref is not None and not args.ref.is_file():
        p.error(f"--ref {args.ref}: no such file (the authors' models/swan.py)")
    out = args.out or _default_out(args.reproductions)
    record = results(args.epochs, args.quick, args.ref)
    out.mkdir(parents=True, exist_ok=True)
    from swan_jax.io import write_text_atomic

    write_text_atomic(out / "results.json", json.dumps(record, indent=1, default=float) + "\n")
    collected = {"source": "python -m reproduce.runtime " + " ".join(argv or sys.argv[1:]),
                 "collected": time.strftime("%Y-%m-%d %H:%M:%S"), "experiment": EXPERIMENT,
                 "note": f"load average {record['load_average'][0]:.1f} at the end"}
    write_text_atomic(out / "collected.json", json.dumps(collected, indent=1) + "\n")
    print(f"runtime: wrote {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
