"""Open any trained run without repeating its settings: `load_run(folder, run)`.

A sweep's program folder holds `run.json` (the experiment, its resolved configuration,
the cell, the static point and the map run -> (grid point, seed)) beside the
checkpoints; that is enough to rebuild the model and restore its best parameters.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from swan_jax.config import concrete_hparams
from swan_jax.experiments.config import from_dict
from swan_jax.runs.checkpoint import load_run_variables
from swan_jax.train import RUN_FILE, read_run_file


def program_folders(root: str | Path) -> list[Path]:
    """Every program folder (one holding `run.json`) under `root`, sorted."""
    return sorted(p.parent for p in Path(root).rglob(RUN_FILE))


def load_run(folder: str | Path, run: int = 0) -> tuple[Any, Any, dict[str, Any]]:
    """`(model, variables, config)` of run `run` of the program in `folder`.

    `model` is the Flax module of that run's grid point, `variables` its best parameters
    (by validation metric), and `config` a dict: `experiment`, `config` (the resolved
    experiment configuration), `cell`, `static`, `hparams` (static and numeric), `seed`,
    `train` (the training configuration).
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
    variables = load_run_variables(folder, run)
    return model, variables, {"experiment": exp.name, "config": cfg, "cell": described["cell"],
                              "static": static, "hparams": {**static, **point},
                              "seed": runs[run]["seed"], "train": info["train"]}
