"""Open any trained run without repeating its settings, and export it.

A program folder holds `run.json` beside its checkpoints: the training configuration,
the map run -> (grid point, seed), and how to build the model. A sweep's names its
experiment, resolved configuration, cell and static point (`load_run`); a `train()`
call given `describe=swan_jax.runs.export.describe_models(model_fn, grid)` holds each
grid point's model spec. Either is enough to rebuild the model and restore its best
parameters (`open_run`), and to write them as an export any install opens
(`export_run`; `swan_jax.runs.export.load_model` reads it back).

This module stands above `swan_jax.train` (it reads `run.json` and the history with
train's readers); the model specs and the export's files are `swan_jax.runs.export`,
below it.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from swan_jax.config import concrete_hparams
from swan_jax.experiments.config import from_dict
from swan_jax.runs.checkpoint import load_run_variables
from swan_jax.runs.export import build_model, save_model
from swan_jax.train import RUN_FILE, metric_mode, read_history, read_run_file


def program_folders(root: str | Path) -> list[Path]:
    """Every program folder (one holding `run.json`) under `root`, sorted."""
    return sorted(p.parent for p in Path(root).rglob(RUN_FILE))


def load_run(folder: str | Path, run: int = 0) -> tuple[Any, Any, dict[str, Any]]:
    """`(model, variables, config)` of run `run` of the program in `folder`.

    `model` is the Flax module of that run's grid point, `variables` its best parameters
    (by validation metric; a checkpoint of swan-jax 0.1.0's formation of V', Z'
    converted to compute what it trained, `load_run_variables`), and `config` a dict:
    `experiment`, `config` (the resolved experiment configuration), `cell`, `static`,
    `hparams` (static and numeric), `seed`, `train` (the training configuration).
    """
    folder = Path(folder)
    path = folder / RUN_FILE
    info = read_run_file(folder, help_text=f"the program folders under it: "
                                           f"{program_folders(folder)[:5]}")
    described = info.get("description", {})
    if "experiment" not in described:
        raise ValueError(f"{path} was not written by a sweep: it does not say how to build "
                         f"the model")
    runs = info["runs"]
    if not 0 <= run < len(runs):
        raise IndexError(f"run {run} is out of range: {folder} holds runs 0..{len(runs) - 1}")
    where = described["experiment"]
    exp = getattr(importlib.import_module(where["module"]), where["class"])()
    cfg = from_dict(exp.Config, described["config"], source=str(path))
    static, point = described["static"], runs[run]["hparams"]
    hp = concrete_hparams({k: v for k, v in point.items() if k not in static})
    model = exp.model_fn(cfg, described["cell"], static)(hp)
    variables = load_run_variables(folder, run, model=model)
    return model, variables, {"experiment": exp.name, "config": cfg, "cell": described["cell"],
                              "static": static, "hparams": {**static, **point},
                              "seed": runs[run]["seed"], "train": info["train"]}


@dataclasses.dataclass(frozen=True)
class OpenedRun:
    """A run's model with its best parameters. `source` says which folder and run."""

    model: Any
    variables: Any
    task_level: str
    source: dict[str, Any]


def best_run(folder: str | Path) -> int:
    """The run of a program folder with the best validation metric over its epochs."""
    folder = Path(folder)
    info = json.loads((folder / RUN_FILE).read_text())
    history = read_history(folder)
    if not history:
        raise FileNotFoundError(f"{folder} has no trained epoch yet (history.jsonl is empty)")
    val = np.asarray([h["val"] for h in history], np.float64)  # [epochs, runs]
    if metric_mode(info["train"]["metric"]) == "min":
        return int(np.nanargmin(np.nanmin(val, 0)))
    return int(np.nanargmax(np.nanmax(val, 0)))


def _same(a: dict, b: dict) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True,
                                                                    default=str)


def _described_model(info: dict[str, Any], run: int, path: Path) -> Any:
    """The module of run `run` from `describe_models`' specs in `run.json`."""
    hparams = info["runs"][run]["hparams"]
    for point in info["description"]["models"]:
        if _same(point["hparams"], hparams):
            return build_model(point["model"])
    raise ValueError(f"{path} describes no model for run {run}'s hyper-parameters {hparams}")


def open_run(folder: str | Path, run: int | None = None) -> OpenedRun:
    """Run `run` (default: `best_run`) of a program folder, with its best parameters.

    A sweep's folder rebuilds its experiment's model (`load_run`); a folder written by
    `train(..., describe=describe_models(model_fn, grid))` builds the spec it holds.
    """
    folder = Path(folder)
    path = folder / RUN_FILE
    info = read_run_file(folder,
                         help_text="point at the folder holding run.json and checkpoints")
    described = info.get("description", {})
    if "experiment" not in described and "models" not in described:
        raise ValueError(f"{path} does not say how to build its model: train it with "
                         f"describe=swan_jax.runs.export.describe_models(model_fn, grid)")
    run = best_run(folder) if run is None else run
    if not 0 <= run < len(info["runs"]):
        raise IndexError(f"run {run} is out of range: {folder} holds runs "
                         f"0..{len(info['runs']) - 1}")
    if "experiment" in described:
        model, variables, _ = load_run(folder, run)
    else:
        model = _described_model(info, run, path)
        variables = load_run_variables(folder, run, model=model)
    source = {"folder": str(folder.absolute()), "run": run, **info["runs"][run]}
    return OpenedRun(model, variables, info["train"]["task_level"], source)


def export_run(folder: str | Path, path: str | Path, *, run: int | None = None) -> Path:
    """Export the best parameters of run `run` of a program folder (default: the run with
    the best validation metric; a sweep's or a described `train()` folder) into the
    folder `path` (`swan_jax.runs.export.save_model`); returns `path`."""
    opened = open_run(folder, run)
    return save_model(path, opened.model, opened.variables, task_level=opened.task_level,
                      source=opened.source)
