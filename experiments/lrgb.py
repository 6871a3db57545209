"""LRGB (paper Table 3): SWAN and SWAN-learn on Peptides-func, Peptides-struct, PascalVOC-SP.

    python experiments/lrgb.py --dataset peptides-func --variant swan-learn --seeds 0,1,2
    python experiments/lrgb.py --all --resume          # every cell (`make reproduce-lrgb`)
    python experiments/lrgb.py --dataset peptides-func --grid full   # the paper's whole grid
    python experiments/lrgb.py --dataset peptides-func --limit 200 --epochs 2   # quick look

Every (grid point, seed) of one shape-changing configuration (layers, width, A_hat) trains
as one vmapped program (`swan_jax.train.train`); each such program checkpoints every epoch
under `--checkpoint-dir/<dataset>/<variant>/<config>` and `--resume` continues it (and
skips the cells already in the results). One record per dataset x variant goes to
`<results-dir>/results.json`; `<results-dir>/table.md` sets mean +- std over seeds beside
the paper's Table 3. The model selection metric is the validation metric; the test metric
is read at each run's best validation epoch.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np

from swan_jax.cli import (
    ResultsFile,
    base_parser,
    grid_points,
    machine_info,
    parse_nonnegative_float_list,
    parse_positive_int_list,
    parse_str_list,
    positive_int,
    summarise_runs,
)
from swan_jax.config import SWANConfig
from swan_jax.data.batching import budget_for, iterate_batches
from swan_jax.data.download import DownloadError
from swan_jax.encoders import AtomEncoder, LinearNodeEncoder
from swan_jax.models import GraphReadout, Model, NodeReadout, SWANBlock
from swan_jax.train import TrainConfig, count_params, train

# ============================================================================ configuration
# Everything that decides what an LRGB run is, in one place.


@dataclasses.dataclass(frozen=True)
class Task:
    loader: str  # function of swan_jax.data.lrgb
    loss: str
    metric: str
    level: str  # "graph" or "node"
    outputs: int
    encoder: str  # "atom" (OGB AtomEncoder on the 9 atom codes) or "linear" (VOC's 14 floats)
    percent: bool  # the paper reports the metric x 100 (AP, F1)
    mode: str  # "max" or "min": how the validation metric selects


TASKS: dict[str, Task] = {
    "peptides-func": Task("load_peptides_func", "bce", "ap", "graph", 10, "atom", True, "max"),
    "peptides-struct": Task("load_peptides_struct", "l1", "mae", "graph", 11, "atom", False,
                            "min"),
    "pascalvoc-sp": Task("load_pascalvoc_sp", "weighted_ce", "f1", "node", 21, "linear", True,
                         "max"),
}
RUN_VARIANTS = ("swan", "swan-learn")

# Table 3 of the paper (mean over 3 seeds; AP and F1 in percent).
PAPER_TABLE3: dict[tuple[str, str], tuple[float, float]] = {
    ("peptides-func", "swan"): (63.13, 0.46),
    ("peptides-struct", "swan"): (0.2571, 0.0018),
    ("pascalvoc-sp", "swan"): (27.96, 0.48),
    ("peptides-func", "swan-learn"): (67.51, 0.39),
    ("peptides-struct", "swan-learn"): (0.2485, 0.0009),
    ("pascalvoc-sp", "swan-learn"): (31.92, 2.50),
}

# The paper's LRGB grid (Appendix E.4 and the hyper-parameter table, column "LRGB"):
# AdamW, up to 300 epochs, 3 seeds, within LRGB's 500k-parameter budget, tanh field.
PAPER_GRID: dict[str, tuple] = {
    "learning_rate": (1e-3, 5e-4),
    "weight_decay": (0.0, 1e-4),
    "num_layers": (5, 8, 16, 32),
    "hidden": (64, 128),
    "epsilon": (1.0, 0.01),
    "gamma": (1.0, 0.1),
    "beta": (1.0, 0.1),
    "adjacency": ("adj", "sym"),
}
NUMERIC = ("learning_rate", "weight_decay", "epsilon", "gamma", "beta")  # vmapped together
STATIC = ("num_layers", "hidden", "adjacency")  # change shapes or code: one program each

# The configuration actually run (`--grid paper`). The paper does NOT publish the selected
# configuration of any LRGB cell, so this is our pick from its grid, the same for every
# cell: 128 channels, 5 layers and batch 64 are the setting of the paper's runtime table
# (Appendix "Complexity and Runtimes", measured on Peptides-struct); epsilon = 1 (with 5
# layers epsilon = 0.01 would integrate only to t = 0.05, barely moving the encoding),
# gamma = 0.1, beta = 1, A_hat = D^-1/2 A D^-1/2, lr 1e-3, no weight decay: 96,970
# (SWAN) / 146,378 (SWAN-learn) parameters on Peptides. Edit a cell here to deviate.
SELECTED = {"learning_rate": 1e-3, "weight_decay": 0.0, "num_layers": 5, "hidden": 128,
            "epsilon": 1.0, "gamma": 0.1, "beta": 1.0, "adjacency": "sym"}
CONFIGS: dict[tuple[str, str], dict[str, Any]] = {
    (dataset, variant): dict(SELECTED) for dataset in TASKS for variant in RUN_VARIANTS
}
# Not in the paper either: batch size (64, as its runtime table), no early stopping (the
# best validation epoch of the 300 is kept), head = mean pooling (graph tasks) then
# MLP(hidden, hidden/2, outputs) with ReLU.
TRAINING = {"optimizer": "adamw", "epochs": 300, "batch_size": 64, "patience": None}
PARAM_BUDGET = 500_000  # LRGB's rule; --allow-more-params lifts it


def readout_features(hidden: int, outputs: int) -> tuple[int, ...]:
    return (hidden, hidden // 2, outputs)


# ================================================================================ models


def make_model_fn(task: Task, variant: str, static: dict[str, Any], args):
    """hp (numeric, possibly traced) -> encoder -> SWAN ODE block -> readout."""
    hidden, layers = int(static["hidden"]), int(static["num_layers"])

    def model_fn(hp):
        cfg = SWANConfig(variant=variant, adjacency=static["adjacency"], num_layers=layers,
                         beta=hp["beta"], gamma=hp["gamma"], epsilon=hp["epsilon"])
        encoder = AtomEncoder(hidden) if task.encoder == "atom" else LinearNodeEncoder(hidden)
        head = readout_features(hidden, task.outputs)
        readout = (GraphReadout(head, pooling=("mean",)) if task.level == "graph"
                   else NodeReadout(head))
        block = SWANBlock(cfg, args.solver, args.rtol, args.atol, args.adjoint)
        return Model(encoder, block, readout)

    return model_fn


def parameter_count(model_fn, splits, point: dict[str, float], batch_size: int) -> int:
    """Parameters of the model on one batch of `splits` (shapes only, nothing computed)."""
    budget = budget_for(list(splits.values()), batch_size)
    graph = next(iterate_batches(splits["train"], batch_size, budget)).graph
    hp = {k: np.float32(v) for k, v in point.items()}
    shapes = jax.eval_shape(lambda: model_fn(hp).init(jax.random.PRNGKey(0), graph))
    return count_params(shapes)


# ================================================================================= cells


def axes(args, dataset: str, variant: str) -> dict[str, tuple]:
    """The grid of one cell: the selected point or the paper's grid, then CLI overrides."""
    selected = CONFIGS.get((dataset, variant), SELECTED)  # other variants: the same point
    base = ({k: (v,) for k, v in selected.items()} if args.grid == "paper"
            else dict(PAPER_GRID))
    overrides = {"learning_rate": args.lr, "weight_decay": args.weight_decay,
                 "epsilon": args.epsilon, "gamma": args.gamma, "beta": args.beta,
                 "adjacency": args.adjacency, "num_layers": args.layers, "hidden": args.hidden}
    base.update({k: tuple(v) for k, v in overrides.items() if v is not None})
    return base


def cell_key(args, dataset: str, variant: str) -> dict[str, Any]:
    return {"dataset": dataset, "variant": variant, "solver": args.solver, "grid": args.grid,
            "epochs": args.epochs, "limit": args.limit, "seeds": list(args.seeds)}


def train_config(args, task: Task, ckpt: Path, description: str) -> TrainConfig:
    return TrainConfig(
        epochs=args.epochs, patience=args.patience, batch_size=args.batch_size,
        optimizer=TRAINING["optimizer"], loss=task.loss, metric=task.metric,
        task_level=task.level, seeds=tuple(args.seeds), checkpoint_dir=str(ckpt),
        resume=args.resume, allow_more_params=args.allow_more_params,
        on_divergence="stop_run", progress=not args.no_progress, description=description,
        data_parallel=args.data_parallel)


def checkpoint_dir(args, dataset, variant, static, numeric) -> Path:
    ident = {"numeric": numeric, "seeds": list(args.seeds), "limit": args.limit,
             "batch": args.batch_size, "patience": args.patience, "rtol": args.rtol,
             "atol": args.atol, "adjoint": args.adjoint}
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:10]
    name = (f"{args.solver}-L{static['num_layers']}-h{static['hidden']}-"
            f"{static['adjacency']}-{digest}")
    return args.checkpoint_dir / dataset / variant / name


def run_cell(args, dataset: str, variant: str, splits) -> dict[str, Any]:
    """Train every configuration of one dataset x variant; summarise the best one."""
    task, grid = TASKS[dataset], axes(args, dataset, variant)
    numeric = grid_points(**{k: grid[k] for k in NUMERIC})
    runs, programs = [], {}
    for static in grid_points(**{k: grid[k] for k in STATIC}):
        model_fn = make_model_fn(task, variant, static, args)
        params = parameter_count(model_fn, splits, numeric[0], args.batch_size)
        print(f"{dataset} / {variant} {static}: {params:,} parameters "
              f"(budget {PARAM_BUDGET:,}), {len(numeric)} grid point(s) x {len(args.seeds)} "
              f"seed(s)")
        if params > PARAM_BUDGET and not args.allow_more_params:
            raise SystemExit(f"{dataset} / {variant} {static}: {params:,} parameters exceed "
                             f"LRGB's budget of {PARAM_BUDGET:,}; lower --hidden or --layers, "
                             f"or pass --allow-more-params")
        ckpt = checkpoint_dir(args, dataset, variant, static, numeric)
        if args.overwrite and not args.resume and ckpt.exists():
            shutil.rmtree(ckpt)  # --overwrite starts the cell again
        result = train(model_fn, splits, train_config(args, task, ckpt, f"{dataset}/{variant}"),
                       numeric, fingerprint_extra={"dataset": dataset, "variant": variant,
                                                   "solver": args.solver, **static})
        for run in result.runs:
            run["hparams"] = {**static, **run["hparams"]}
        runs += result.runs
        seconds = [h["seconds"] for h in result.history]
        programs[json.dumps(static, sort_keys=True)] = {
            "params": result.num_params, "epochs_completed": result.epochs_completed,
            "first_epoch_seconds": seconds[0] if seconds else None,
            "seconds_per_epoch": float(np.median(seconds[1:] or seconds)) if seconds else None,
            "wall_seconds": result.wall_time}
    best = summarise_runs(runs, task.mode)["best"]
    program = programs[json.dumps({k: best["hparams"][k] for k in STATIC}, sort_keys=True)]
    per_seed = [{k: r[k] for k in ("seed", "val_at_best", "test", "best_epoch", "epochs_run",
                                   "diverged")} for r in runs if r["hparams"] == best["hparams"]]
    return {"metric": task.metric, "config": best["hparams"], "val_mean": best["val_mean"],
            "val_std": best["val_std"], "test_mean": best["test_mean"],
            "test_std": best["test_std"], "per_seed": per_seed, **program,
            "grid_points": len(runs) // len(args.seeds), "batch_size": args.batch_size,
            "optimizer": TRAINING["optimizer"], "machine": machine_info()}


def load_splits(args, dataset: str):
    from swan_jax.data import lrgb

    kwargs: dict[str, Any] = {"data_dir": args.data_dir, "cache_dir": args.cache_dir,
                              "limit": args.limit, "progress": not args.no_progress}
    if dataset != "pascalvoc-sp":
        kwargs.update(verify_md5=not args.no_verify_md5, download=not args.no_download)
    return getattr(lrgb, TASKS[dataset].loader)(**kwargs)


# ================================================================================ table


def _fmt(task: Task, mean: float, std: float, scale: bool = True) -> str:
    if task.percent:
        factor = 100.0 if scale else 1.0
        return f"{factor * mean:.2f} ± {factor * std:.2f}"
    return f"{mean:.4f} ± {std:.4f}"


def write_table(path: Path, records: list[dict[str, Any]], skipped: list[str]) -> None:
    """Markdown: our mean ± std over seeds beside Table 3 (newest record per row)."""
    latest: dict[tuple, dict[str, Any]] = {}
    for r in records:
        latest[(r["dataset"], r["variant"], r["grid"], r["solver"], r["limit"])] = r
    order = {d: i for i, d in enumerate(TASKS)}
    lines = ["# LRGB: swan-jax vs. the paper (Table 3)", "",
             "AP and F1 in percent; mean ± std over seeds (population std); test metric at "
             "the best validation epoch.", "",
             "| Dataset | Metric | Variant | Test (ours) | Paper | Val (ours) | Epochs | "
             "Seeds | Params | s/epoch | Grid | Notes |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for key in sorted(latest, key=lambda k: (order.get(k[0], 99), k[1:3], k[3], str(k[4]))):
        r, task = latest[key], TASKS[key[0]]
        paper = PAPER_TABLE3.get((r["dataset"], r["variant"]))
        notes = [f"first {r['limit']} graphs only" if r["limit"] else "",
                 f"solver {r['solver']}" if r["solver"] != "euler" else "",
                 "diverged run(s)" if any(s["diverged"] for s in r["per_seed"]) else ""]
        spe = r.get("seconds_per_epoch")
        epochs = max(s["epochs_run"] for s in r["per_seed"])
        lines.append(
            f"| {r['dataset']} | {task.metric.upper()} | {r['variant']} | "
            f"{_fmt(task, r['test_mean'], r['test_std'])} | "
            f"{_fmt(task, *paper, scale=False) if paper else '–'} | "
            f"{_fmt(task, r['val_mean'], r['val_std'])} | {epochs} | {len(r['seeds'])} | "
            f"{r['params']:,} | {'–' if spe is None else f'{spe:.1f}'} | {r['grid']} | "
            f"{'; '.join(n for n in notes if n)} |")
    lines += [""] + [f"- not run: {s}" for s in skipped]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines).rstrip() + "\n")


# ================================================================================== CLI


def parse_args(argv=None) -> argparse.Namespace:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--dataset", type=parse_str_list(tuple(TASKS)), default=None,
                   help=f"comma-separated: {', '.join(TASKS)}")
    p.add_argument("--all", action="store_true",
                   help="every dataset x {swan, swan-learn} (PascalVOC-SP when its files exist)")
    p.add_argument("--grid", choices=("paper", "full"), default="paper",
                   help="paper: the selected configuration (CONFIGS); full: the paper's grid")
    p.add_argument("--hidden", type=parse_positive_int_list, default=None)
    p.add_argument("--layers", type=parse_positive_int_list, default=None)
    p.add_argument("--weight-decay", type=parse_nonnegative_float_list, default=None)
    p.add_argument("--data-dir", type=Path, default=Path(os.environ.get("SWAN_DATA_DIR")
                                                          or "data"))
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="processed-graph cache (default: env SWAN_CACHE_DIR, else cache/)")
    p.add_argument("--limit", type=positive_int, default=None,
                   help="only the first K raw rows (peptides) / graphs per split (VOC)")
    p.add_argument("--no-verify-md5", action="store_true", help="accept unofficial raw files")
    p.add_argument("--no-download", action="store_true")
    p.add_argument("--allow-more-params", action="store_true",
                   help="lift LRGB's 500k parameter budget")
    p.set_defaults(seeds=(0, 1, 2), results_dir=Path("results/lrgb"),
                   checkpoint_dir=Path("checkpoints/lrgb"), epochs=TRAINING["epochs"],
                   batch_size=TRAINING["batch_size"], patience=TRAINING["patience"])
    args = p.parse_args(argv)
    if not args.all and args.dataset is None:
        p.error("name a --dataset or pass --all")
    args.datasets = tuple(TASKS) if args.all else args.dataset
    args.variants = args.variant or RUN_VARIANTS
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    table = args.results_dir / "table.md"
    try:
        results = ResultsFile(args.results_dir / "results.json", overwrite=args.overwrite,
                              resume=args.resume)
    except FileExistsError as err:
        raise SystemExit(str(err)) from None
    skipped: list[str] = []
    for dataset in args.datasets:
        todo = [v for v in args.variants
                if not (args.resume and results.done(cell_key(args, dataset, v)))]
        for v in set(args.variants) - set(todo):
            print(f"{dataset} / {v}: already in {results.path}, skipped (--resume)")
        if not todo:
            continue
        try:
            splits = load_splits(args, dataset)
        except (FileNotFoundError, DownloadError) as err:
            if not args.all:
                raise SystemExit(f"{dataset}: {err}") from None
            skipped.append(f"{dataset} ({err})")
            print(f"NOTE: skipping {dataset}: {err}")
            continue
        for variant in todo:
            record = run_cell(args, dataset, variant, splits)
            results.add({**cell_key(args, dataset, variant), **record})
            write_table(table, results.records, skipped)
    write_table(table, results.records, skipped)
    print(f"results: {results.path}\ntable: {table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
