"""`swan-predict`: a trained run's predictions for new graphs, from its best epoch.

    swan-predict RUN_FOLDER --data graphs.npz --out predictions.npz [--run N]

RUN_FOLDER is a program folder (`run.json` beside its checkpoints: any experiment's, or a
`train()` call given `describe=swan_jax.runs.export.describe_models(model_fn, grid)`) or an
export folder (`swan_jax.experiments.runs.export_run`).
`--data` is a data set saved with `GraphDataset.save` (e.g.
`GraphDataset.from_graphs(my_graphs).save("graphs.npz")`).
The output holds `predictions` (`[sum n_node, T]` or `[G, T]`), `n_node` `[G]`, `level`
and `run`. The Python function behind it is `predict_run`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from swan_jax.data.dataset import GraphDataset
from swan_jax.experiments.runs import OpenedRun, open_run
from swan_jax.runs.export import SPEC_FILE, load_model
from swan_jax.runs.inference import predict
from swan_jax.train import RUN_FILE


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
