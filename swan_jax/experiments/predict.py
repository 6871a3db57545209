"""`swan-predict`: a trained run's predictions for new graphs, from its best epoch.

    swan-predict RUN_FOLDER --data graphs.npz --out predictions.npz [--run N]

RUN_FOLDER is a program folder (`run.json` beside its checkpoints: any experiment's, or a
`train()` call given `describe=swan_jax.export.describe_models(model_fn, grid)`) or an
export folder (`swan_jax.export.export_run`). `--data` is a data set saved with
`GraphDataset.save` (e.g. `GraphDataset.from_graphs(my_graphs).save("graphs.npz")`).
The output holds `predictions` (`[sum n_node, T]` or `[G, T]`), `n_node` `[G]`, `level`
and `run`. The Python function behind it is `predict_run`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from swan_jax.data.dataset import GraphDataset
from swan_jax.export import SPEC_FILE, build_model, load_model
from swan_jax.train import RUN_FILE, metric_mode, read_history


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


def _described_model(info: dict[str, Any], run: int, path: Path):
    """The module of run `run` from `describe_models`' specs in `run.json`."""
    hparams = info["runs"][run]["hparams"]
    for point in info["description"]["models"]:
        if _same(point["hparams"], hparams):
            return build_model(point["model"])
    raise ValueError(f"{path} describes no model for run {run}'s hyper-parameters {hparams}")


def open_run(folder: str | Path, run: int | None = None) -> OpenedRun:
    """Run `run` (default: `best_run`) of a program folder, with its best parameters."""
    from swan_jax.checkpoint import load_run_variables

    folder = Path(folder)
    path = folder / RUN_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{folder} is not a program folder: it has no {RUN_FILE} "
                                f"(point at the folder holding run.json and checkpoints)")
    info = json.loads(path.read_text())
    described = info.get("description", {})
    if "experiment" not in described and "models" not in described:
        raise ValueError(f"{path} does not say how to build its model: train it with "
                         f"describe=swan_jax.export.describe_models(model_fn, grid)")
    run = best_run(folder) if run is None else run
    if not 0 <= run < len(info["runs"]):
        raise IndexError(f"run {run} is out of range: {folder} holds runs "
                         f"0..{len(info['runs']) - 1}")
    if "experiment" in described:
        from swan_jax.experiments.runs import load_run

        model, variables, _ = load_run(folder, run)
    else:
        model, variables = _described_model(info, run, path), load_run_variables(folder, run)
    source = {"folder": str(folder.absolute()), "run": run, **info["runs"][run]}
    return OpenedRun(model, variables, info["train"]["task_level"], source)


def open_model(path: str | Path, run: int | None = None) -> OpenedRun:
    """A program folder (`open_run`) or an export folder (`load_model`)."""
    path = Path(path)
    if (path / SPEC_FILE).is_file() and not (path / RUN_FILE).is_file():
        if run is not None:
            raise ValueError(f"{path} is an export (one model): --run does not apply")
        loaded = load_model(path)
        return OpenedRun(loaded.model, loaded.variables, loaded.task_level, loaded.source)
    return open_run(path, run)


def predict_run(folder: str | Path, data: GraphDataset, *, run: int | None = None,
                batch_size: int = 32) -> tuple[np.ndarray, OpenedRun]:
    """Predictions of a run (or export) for every graph of `data`, and what was opened."""
    from swan_jax.inference import predict

    opened = open_model(folder, run)
    predictions = predict(opened.model, opened.variables, data, level=opened.task_level,
                          batch_size=batch_size)
    return predictions, opened


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="swan-predict", description="Predictions of a trained run (its best epoch) "
        "or an exported model for the graphs of a saved GraphDataset.")
    p.add_argument("folder", type=Path, metavar="RUN_FOLDER",
                   help="a program folder (run.json + checkpoints) or an export folder")
    p.add_argument("--data", type=Path, required=True,
                   help="a .npz written by GraphDataset.save")
    p.add_argument("--out", type=Path, required=True, help="where to write predictions.npz")
    p.add_argument("--run", type=int, default=None,
                   help="run index in the program (default: the best validation metric)")
    p.add_argument("--batch-size", type=int, default=32, help="graphs per batch (default 32)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.out.exists() and not args.overwrite:
        print(f"swan-predict: {args.out} exists; pass --overwrite to replace it",
              file=sys.stderr)
        return 1
    try:
        data = GraphDataset.read(args.data)
    except (FileNotFoundError, ValueError) as err:
        print(f"swan-predict: {err}; fix --data", file=sys.stderr)
        return 1
    try:
        predictions, opened = predict_run(args.folder, data, run=args.run,
                                          batch_size=args.batch_size)
    except (FileNotFoundError, ValueError, IndexError) as err:
        print(f"swan-predict: {err}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.out, predictions=predictions, n_node=data.n_node,
             level=np.asarray(opened.task_level), run=np.asarray(opened.source.get("run", -1)))
    print(f"swan-predict: {predictions.shape[0]} {opened.task_level} prediction(s) of run "
          f"{opened.source.get('run', '-')} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
