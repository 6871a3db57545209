"""Command-line pieces shared by every experiment: flag parsers that name what is wrong,
one base parser, one results file, summaries over seeds.

Each experiment adds its own flags to `base_parser()` (`swan_jax.experiments.command`
turns the namespace into the experiment's configuration); the flags here (solver,
seeds, epochs, optimiser, checkpoints, results) mean the same thing everywhere.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from swan_jax.config import ADJACENCIES, VARIANTS
from swan_jax.io import save_json_atomic
from swan_jax.solvers import ADJOINTS, SOLVERS
from swan_jax.train import OPTIMIZERS, SCHEDULES


def parse_int_list(text: str) -> tuple[int, ...]:
    """'0,1,2' -> (0, 1, 2); an empty list is an error."""
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as err:
        message = f"expected comma-separated integers, got {text!r}"
        raise argparse.ArgumentTypeError(message) from err
    if not values:
        raise argparse.ArgumentTypeError("expected at least one value, got an empty list")
    return values


def _require(values: tuple, ok, requirement: str, text: str) -> tuple:
    """`values` if every one passes `ok`, else an error naming the first that does not."""
    bad = [v for v in values if not ok(v)]
    if bad:
        raise argparse.ArgumentTypeError(
            f"every value must be {requirement}, got {bad[0]:g} in {text!r}")
    return values


def parse_positive_int_list(text: str) -> tuple[int, ...]:
    """'5,8' -> (5, 8); every value must be >= 1 (layers, widths, distances, sizes)."""
    return _require(parse_int_list(text), lambda v: v >= 1, ">= 1", text)


def parse_seed_list(text: str) -> tuple[int, ...]:
    """'0,1,2' -> (0, 1, 2); seeds must be distinct (each one is a separate run)."""
    values = parse_int_list(text)
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(f"seeds must be distinct, {repeated[0]} is repeated "
                                         f"in {text!r}")
    return values


def parse_float_list(text: str) -> tuple[float, ...]:
    """'0.5,0.1' -> (0.5, 0.1); an empty list, NaN or infinity is an error."""
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from err
    if not values:
        raise argparse.ArgumentTypeError("expected at least one value, got an empty list")
    bad = [v for v in values if not math.isfinite(v)]
    if bad:
        raise argparse.ArgumentTypeError(f"expected finite numbers, got {bad[0]} in {text!r}")
    return values


def parse_positive_float_list(text: str) -> tuple[float, ...]:
    """'0.5,0.1' -> (0.5, 0.1); every value must be > 0 (step sizes, learning rates)."""
    return _require(parse_float_list(text), lambda v: v > 0, "> 0", text)


def parse_nonnegative_float_list(text: str) -> tuple[float, ...]:
    """'0,1e-4' -> (0.0, 0.0001); every value must be >= 0 (weight decay)."""
    return _require(parse_float_list(text), lambda v: v >= 0, ">= 0", text)


def parse_str_list(valid: Sequence[str]):
    """A parser for comma-separated names out of `valid`, naming the valid ones on error."""
    def parse(text: str) -> tuple[str, ...]:
        values = tuple(v.strip() for v in text.split(",") if v.strip())
        if not values:
            raise argparse.ArgumentTypeError(
                f"expected at least one name, got an empty list; valid: {', '.join(valid)}")
        bad = [v for v in values if v not in valid]
        if bad:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(map(repr, bad))}; valid: {', '.join(valid)}")
        return values

    return parse


def positive_float(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def nonnegative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def base_parser(description: str) -> argparse.ArgumentParser:
    """Flags every experiment shares. Defaults are None: unset flags keep the value of the
    experiment's configuration (its packaged TOML, or `--config FILE`)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--config", type=Path, default=None,
                   help="a TOML configuration (the resolved one of a run is written to "
                        "<results-dir>/config.toml); flags given here override it")
    p.add_argument("--variant", type=parse_str_list(VARIANTS), default=None,
                   help=f"comma-separated SWAN variants: {', '.join(VARIANTS)}")
    p.add_argument("--adjacency", type=parse_str_list(ADJACENCIES), default=None,
                   help="A_hat grid: sym (D^-1/2 A D^-1/2), adj (A)")
    p.add_argument("--solver", choices=SOLVERS, default=None,
                   help="integrator: euler is the paper's layers; any other integrates to t1")
    p.add_argument("--rtol", type=positive_float, default=None)
    p.add_argument("--atol", type=positive_float, default=None)
    p.add_argument("--adjoint", choices=ADJOINTS, default=None)
    p.add_argument("--seeds", type=parse_seed_list, default=None,
                   help="comma-separated seeds, trained together as one vmapped program")
    p.add_argument("--epochs", type=positive_int, default=None)
    p.add_argument("--patience", type=positive_int, default=None)
    p.add_argument("--batch-size", type=positive_int, default=None)
    p.add_argument("--epsilon", type=parse_positive_float_list, default=None,
                   help="step-size grid (each > 0)")
    p.add_argument("--gamma", type=parse_float_list, default=None)
    p.add_argument("--beta", type=parse_float_list, default=None)
    p.add_argument("--lr", type=parse_positive_float_list, default=None,
                   help="learning-rate grid (each > 0)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=None)
    p.add_argument("--schedule", choices=SCHEDULES, default=None,
                   help="learning rate per epoch: constant, cosine (with --warmup-epochs), "
                        "plateau (reduce on a validation plateau)")
    p.add_argument("--warmup-epochs", type=nonnegative_int, default=None)
    p.add_argument("--grad-clip", type=positive_float, default=None,
                   help="clip every gradient to this global norm")
    p.add_argument("--results-dir", type=Path, default=None)
    p.add_argument("--checkpoint-dir", type=Path, default=None,
                   help="program folders: checkpoints, run.json, history.jsonl "
                        "(default <results-dir>/checkpoints)")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="processed-data cache (default $SWAN_CACHE_DIR, else cache/)")
    p.add_argument("--no-checkpoints", action="store_true",
                   help="keep no epoch checkpoints (run.json and history.jsonl still written)")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoints")
    p.add_argument("--overwrite", action="store_true", help="replace existing results files")
    p.add_argument("--skip-missing", action="store_true",
                   help="run only the cells whose data is present (a partial run, so stated)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--data-parallel", action="store_true",
                   help="split every step's graphs over all local devices (jax.sharding); "
                        "after jax.distributed.initialize() over every host's devices")
    return p


def summarise_runs(runs: Sequence[Mapping[str, Any]], mode: str = "min") -> dict[str, Any]:
    """Group run records by grid point; pick the point with the best mean validation metric.

    Returns the best point's hyper-parameters and mean / std over seeds of its validation
    and test metrics, plus every point's means.
    """
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for run in runs:
        groups.setdefault(json.dumps(run["hparams"], sort_keys=True), []).append(run)
    points = []
    for key, members in groups.items():
        val = np.asarray([m["val_at_best"] for m in members], float)
        test = np.asarray([m["test"] for m in members], float)
        points.append({
            "hparams": json.loads(key), "val_mean": float(np.mean(val)),
            "val_std": float(np.std(val)), "test_mean": float(np.mean(test)),
            "test_std": float(np.std(test)), "seeds": [m["seed"] for m in members],
            "epochs_run": [m["epochs_run"] for m in members],
            "diverged": [m.get("diverged", False) for m in members],
        })
    finite = [p for p in points if math.isfinite(p["val_mean"])] or points
    best = (min if mode == "min" else max)(finite, key=lambda p: p["val_mean"])
    return {"best": best, "points": points}


def machine_info() -> dict[str, Any]:
    """Where a number was measured: platform, CPU cores, accelerator kind and count, jax."""
    import os

    import jax

    devices = jax.devices()
    return {"machine": platform.platform(), "processor": platform.processor(),
            "cpu_count": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else os.cpu_count(),
            "device": str(devices[0]), "device_kind": devices[0].device_kind,
            "device_count": len(devices), "jax": jax.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}


class ResultsFile:
    """A JSON list of records that a sweep appends to cell by cell (atomic writes).

    An existing file is refused unless `overwrite` (start again) or `resume` (skip the
    cells already in it) is given.
    """

    def __init__(self, path: Path, *, overwrite: bool = False, resume: bool = False):
        self.path = Path(path)
        self.records: list[dict[str, Any]] = []
        if self.path.exists():
            if resume:
                self.records = json.loads(self.path.read_text())["records"]
            elif not overwrite:
                raise FileExistsError(
                    f"{self.path} exists; pass --resume to skip the cells already done "
                    f"or --overwrite to start again")

    def done(self, key: Mapping[str, Any]) -> bool:
        return any(all(r.get(k) == v for k, v in key.items()) for r in self.records)

    def add(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        save_json_atomic(self.path, {"machine": machine_info(), "records": self.records},
                         overwrite=True)
