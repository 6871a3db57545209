"""Run bookkeeping of the sweep: the results file a sweep appends to, summaries over
seeds, and where a number was measured.

- `ResultsFile`: a JSON list of records, appended to cell by cell (atomic writes).
- `summarise_runs`: group run records by grid point; the best point by mean validation.
- `machine_info`: platform, CPU cores, accelerator kind and count, jax version.
"""

from __future__ import annotations

import json
import math
import platform
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from swan_jax.runs.io import save_json_atomic
from swan_jax.train import writes_files


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
        with np.errstate(invalid="ignore"):  # a diverged run's inf: a NaN spread, quietly
            spread = float(np.std(val)), float(np.std(test))
        points.append({
            "hparams": json.loads(key), "val_mean": float(np.mean(val)),
            "val_std": spread[0], "test_mean": float(np.mean(test)),
            "test_std": spread[1], "seeds": [m["seed"] for m in members],
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
        # the resolved configuration the file's last writer ran (`config`), when it says
        self.saved_config: dict[str, Any] | None = None
        if self.path.exists():
            if resume:
                self.records = self._records()
            elif not overwrite:
                raise FileExistsError(
                    f"{self.path} exists; pass --resume to skip the cells already done "
                    f"or --overwrite to start again")

    def _records(self) -> list[dict[str, Any]]:
        """The records of the existing file; one line naming it when it is not a results
        file (truncated, edited, another program's): `FileExistsError`, as for a file
        that is there without --resume."""
        try:
            saved = json.loads(self.path.read_text())
            records = saved["records"]
            config = saved.get("config")
            self.saved_config = config if isinstance(config, dict) else None
            if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
                raise ValueError("its records are not a list of objects")
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
            reason = (f"no {err} key" if isinstance(err, KeyError)
                      else " ".join(str(err).split()))
            raise FileExistsError(
                f"{self.path} is not a results file --resume can continue ({reason}): move "
                f"it away (the checkpoints are kept and resume), or pass --overwrite to "
                f"start again") from None
        return records

    def done(self, key: Mapping[str, Any]) -> bool:
        return any(all(r.get(k) == v for k, v in key.items()) for r in self.records)

    def add(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        if writes_files():  # process 0 of a multi-host sweep; every process has the records
            save_json_atomic(self.path, {"machine": machine_info(),
                                         "records": self.records}, overwrite=True)
