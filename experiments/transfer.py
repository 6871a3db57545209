"""Graph transfer (paper Sec. "Graph Transfer", Appendices D.1 and E.2, Figure 3).

A value has to travel `k` hops from a source to a target node on line, ring and
crossed-ring graphs. Every model is `Linear(1 -> 64)` -> graph part -> `Linear(64 -> 1)`;
the graph part is a SWAN / ADGN block of `k` Euler steps or `k` baseline layers (tanh,
as in the authors' configuration). Adam, lr 1e-3, up to 2000 epochs, early stopping
after 100 epochs without a better validation MSE, 4 seeds per configuration.

Grid (paper Table "Hyperparameters", Transfer column): SWAN epsilon {0.5, 0.1},
gamma 0.1, beta {1, 0.1, 0.01, -1}, A_hat {adj, sym}; ADGN the same without beta;
baselines only the learning rate. All seeds and all grid points of one A_hat train as
ONE vmapped program (`swan_jax.train.train`). The configuration with the best mean
validation MSE is reported with the mean / std of its test MSE over the seeds.

  python experiments/transfer.py --topology ring --distance 10 --model swan
  python experiments/transfer.py --all                       # the whole paper grid
  python experiments/transfer.py --all --distances 3,5 --epochs 50 --patience 20 \\
      --train-size 200 --seeds 0,1                         # a reduced CPU sweep

Writes `results/transfer/results.json` (one record per topology, distance and model;
cells already there are skipped with --resume) and `results/transfer/transfer.png`.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import flax.linen as nn

from swan_jax.cli import (
    ResultsFile,
    base_parser,
    grid_points,
    machine_info,
    parse_positive_int_list,
    parse_str_list,
    positive_int,
    summarise_runs,
)
from swan_jax.config import NO_PSI_VARIANTS, VARIANTS, SWANConfig
from swan_jax.data.transfer import DEFAULT_SIZES, TOPOLOGIES, load_transfer
from swan_jax.models import BASELINE_LAYERS, LinearEncoder, Model, MPNNStack, NodeReadout, SWANBlock
from swan_jax.train import TrainConfig, TrainResult, train

BASELINES: tuple[str, ...] = tuple(BASELINE_LAYERS)
MODELS: tuple[str, ...] = VARIANTS + BASELINES
PAPER_MODELS: tuple[str, ...] = ("swan", "adgn", "gcn", "gin", "sage", "gat")
PAPER_DISTANCES: tuple[int, ...] = (3, 5, 10, 50)


@dataclasses.dataclass(frozen=True)
class TransferConfig:
    """One sweep over topologies x distances x models (defaults: the paper's protocol)."""

    topologies: tuple[str, ...] = TOPOLOGIES
    distances: tuple[int, ...] = PAPER_DISTANCES
    models: tuple[str, ...] = PAPER_MODELS
    seeds: tuple[int, ...] = (0, 1, 2, 3)
    epochs: int = 2000
    patience: int | None = 100
    batch_size: int = 512  # the authors' run_all.py; 1000 training graphs = 2 steps
    lr: tuple[float, ...] = (1e-3,)
    epsilon: tuple[float, ...] = (0.5, 0.1)
    gamma: tuple[float, ...] = (0.1,)
    beta: tuple[float, ...] = (1.0, 0.1, 0.01, -1.0)
    adjacency: tuple[str, ...] = ("adj", "sym")
    hidden: int = 64
    solver: str = "euler"
    rtol: float = 1e-3
    atol: float = 1e-6
    adjoint: str = "recursive"
    sizes: tuple[int, int, int] = DEFAULT_SIZES  # train, val, test graphs
    cache_dir: Path | None = None
    results_dir: Path = Path("results/transfer")
    checkpoint_dir: Path | None = None
    resume: bool = False
    overwrite: bool = False
    progress: bool = True
    data_parallel: bool = False

    def __post_init__(self) -> None:
        bad = [m for m in self.models if m not in MODELS]
        if bad:
            raise ValueError(f"unknown models {bad}; valid: {', '.join(MODELS)}")


@dataclasses.dataclass
class CellResult:
    """One (topology, distance, model) cell: its JSON record and the raw train results."""

    record: dict[str, Any]
    results: dict[str, TrainResult]  # by adjacency ("-" for the baselines)


def make_model_fn(model: str, distance: int, adjacency: str | None, cfg: TransferConfig):
    """hp -> `Model`: Linear encoder, `distance` SWAN steps or baseline layers, Linear readout.

    `SWANConfig` is built from the (traced) hyper-parameters, so grid points that differ
    only in epsilon, gamma, beta or the learning rate share one compiled program.
    """

    def model_fn(hp):
        if model in BASELINES:
            processor = MPNNStack(model, cfg.hidden, distance, activation=nn.tanh)
        else:
            extra = {"beta": hp["beta"]} if "beta" in hp else {}
            swan = SWANConfig(variant=model, adjacency=adjacency, gamma=hp["gamma"],
                              epsilon=hp["epsilon"], num_layers=distance, **extra)
            processor = SWANBlock(swan, cfg.solver, cfg.rtol, cfg.atol, cfg.adjoint)
        return Model(LinearEncoder(cfg.hidden), processor, NodeReadout((1,)))

    return model_fn


def model_grids(model: str, cfg: TransferConfig) -> list[tuple[str | None, list[dict]]]:
    """(A_hat, grid points) per program: one program per A_hat (static), one for baselines."""
    if model in BASELINES:
        return [(None, grid_points(learning_rate=cfg.lr))]
    axes = {"learning_rate": cfg.lr, "epsilon": cfg.epsilon, "gamma": cfg.gamma}
    if model not in NO_PSI_VARIANTS:
        axes["beta"] = cfg.beta
    return [(adj, grid_points(**axes)) for adj in cfg.adjacency]


def cell_name(topology: str, distance: int, model: str) -> str:
    return f"{topology}_k{distance}_{model}"


def run_cell(cfg: TransferConfig, topology: str, distance: int, model: str) -> CellResult:
    """Train every program of one cell and summarise its best configuration."""
    splits = load_transfer(topology, distance, cache_dir=cfg.cache_dir, sizes=cfg.sizes)
    start = time.perf_counter()
    runs, results = [], {}
    for adjacency, grid in model_grids(model, cfg):
        tag = adjacency or "-"
        ckpt = None
        if cfg.checkpoint_dir is not None:
            ckpt = str(Path(cfg.checkpoint_dir) / cell_name(topology, distance, model) / tag)
        train_cfg = TrainConfig(
            epochs=cfg.epochs, patience=cfg.patience, batch_size=cfg.batch_size,
            optimizer="adam", learning_rate=cfg.lr[0], loss="mse", metric="mse",
            task_level="node", seeds=cfg.seeds, checkpoint_dir=ckpt, resume=cfg.resume,
            on_divergence="stop_run", progress=cfg.progress, data_parallel=cfg.data_parallel,
            description=f"{topology} k={distance} {model} {tag}")
        extra = {"experiment": "transfer", "topology": topology, "distance": distance,
                 "model": model, "adjacency": tag, "hidden": cfg.hidden, "solver": cfg.solver,
                 "rtol": cfg.rtol, "atol": cfg.atol, "adjoint": cfg.adjoint,
                 "sizes": list(cfg.sizes)}
        result = train(make_model_fn(model, distance, adjacency, cfg), splits, train_cfg, grid,
                       fingerprint_extra=extra)
        for run in result.runs:
            runs.append({**run, "hparams": {**run["hparams"], "adjacency": tag}})
        results[tag] = result
    summary = summarise_runs(runs, "min")
    best = summary["best"]
    record = {
        "topology": topology, "distance": distance, "model": model,
        "best_config": best["hparams"],
        "test_mse_mean": best["test_mean"], "test_mse_std": best["test_std"],
        "val_mse_mean": best["val_mean"], "val_mse_std": best["val_std"],
        "seeds": best["seeds"], "epochs_run": best["epochs_run"],
        "diverged": best["diverged"],
        "epochs_completed": max(r.epochs_completed for r in results.values()),
        "num_params": next(iter(results.values())).num_params,
        "wall_time_s": time.perf_counter() - start,
        # per-epoch time summed over every program, across resumed sessions
        "train_seconds": sum(h["seconds"] for r in results.values() for h in r.history),
        "protocol": {"epochs": cfg.epochs, "patience": cfg.patience,
                     "batch_size": cfg.batch_size, "sizes": list(cfg.sizes),
                     "hidden": cfg.hidden, "solver": cfg.solver, "num_layers": distance},
        "points": summary["points"],
        "machine": machine_info(),
    }
    return CellResult(record=record, results=results)


def plot(records: Sequence[dict[str, Any]], path: Path) -> None:
    """Test MSE against distance (log y), one panel per topology, one line per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    topologies = [t for t in TOPOLOGIES if any(r["topology"] == t for r in records)]
    if not topologies:
        return
    models = list(dict.fromkeys(r["model"] for r in records))
    fig, axes = plt.subplots(1, len(topologies), figsize=(4.5 * len(topologies), 3.6),
                             squeeze=False, sharey=True)
    for ax, topology in zip(axes[0], topologies, strict=True):
        for model in models:
            rows = sorted((r["distance"], r["test_mse_mean"], r["test_mse_std"])
                          for r in records if r["topology"] == topology and r["model"] == model
                          and math.isfinite(r["test_mse_mean"]))
            if not rows:
                continue
            k, mean, std = zip(*rows, strict=True)
            line, = ax.plot(k, mean, marker="o", label=model.upper())
            low = [max(m - s, m * 1e-2) for m, s in zip(mean, std, strict=True)]
            high = [m + s for m, s in zip(mean, std, strict=True)]
            ax.fill_between(k, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
        ax.set_yscale("log")
        ax.set_xscale("log")
        distances = sorted({r["distance"] for r in records})
        ax.set_xticks(distances, [str(d) for d in distances])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_title(topology.replace("-", " ").title())
        ax.set_xlabel("distance k (hops)")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("test MSE")
    axes[0][-1].legend(fontsize=8, loc="best")
    fig.suptitle("Graph transfer: test MSE vs source-target distance")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    plt.close(fig)


def sweep(cfg: TransferConfig) -> list[dict[str, Any]]:
    """Every cell not yet in results.json; the file and the figure are updated per cell."""
    results = ResultsFile(Path(cfg.results_dir) / "results.json", overwrite=cfg.overwrite,
                          resume=cfg.resume)
    cells = [(t, k, m) for t in cfg.topologies for k in cfg.distances for m in cfg.models]
    for i, (topology, distance, model) in enumerate(cells, 1):
        key = {"topology": topology, "distance": distance, "model": model}
        if results.done(key):
            print(f"[{i}/{len(cells)}] {cell_name(topology, distance, model)}: done, skipped")
            continue
        print(f"[{i}/{len(cells)}] {cell_name(topology, distance, model)}", flush=True)
        record = run_cell(cfg, topology, distance, model).record
        results.add(record)
        plot(results.records, Path(cfg.results_dir) / "transfer.png")
        print(f"    test MSE {record['test_mse_mean']:.3g} +- {record['test_mse_std']:.2g} "
              f"({record['best_config']}, {record['wall_time_s']:.0f} s)", flush=True)
    plot(results.records, Path(cfg.results_dir) / "transfer.png")
    return results.records


def parse_args(argv: Sequence[str] | None = None) -> TransferConfig:
    p = base_parser(__doc__.splitlines()[0])
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--all", action="store_true",
                   help="the paper's grid: every topology, distance and model not narrowed "
                        "by --topology / --distance / --model")
    p.add_argument("--topology", "--topologies", dest="topologies", default=None,
                   type=parse_str_list(TOPOLOGIES), help=f"any of {', '.join(TOPOLOGIES)}")
    p.add_argument("--distance", "--distances", dest="distances", type=parse_positive_int_list,
                   default=None, help="source-target hops = SWAN steps = baseline layers")
    p.add_argument("--model", "--models", dest="models", type=parse_str_list(MODELS),
                   default=None, help=f"any of {', '.join(MODELS)}")
    p.add_argument("--hidden", type=positive_int, default=64)
    p.add_argument("--train-size", type=positive_int, default=DEFAULT_SIZES[0])
    p.add_argument("--val-size", type=positive_int, default=DEFAULT_SIZES[1])
    p.add_argument("--test-size", type=positive_int, default=DEFAULT_SIZES[2])
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="data cache (default $SWAN_CACHE_DIR, else cache/)")
    args = p.parse_args(argv)
    models = tuple(args.models or ()) + tuple(args.variant or ())
    if not args.all and not (args.topologies and args.distances and models):
        p.error("give --topology, --distance and --model (or --variant), or --all")
    defaults = TransferConfig()
    chosen = {
        "topologies": args.topologies, "distances": args.distances,
        "models": tuple(dict.fromkeys(models)) or None, "seeds": args.seeds,
        "epochs": args.epochs, "patience": args.patience, "batch_size": args.batch_size,
        "lr": args.lr, "epsilon": args.epsilon, "gamma": args.gamma, "beta": args.beta,
        "adjacency": args.adjacency, "results_dir": args.results_dir,
        "checkpoint_dir": args.checkpoint_dir,
    }
    return dataclasses.replace(
        defaults, **{k: v for k, v in chosen.items() if v is not None},
        hidden=args.hidden, solver=args.solver, rtol=args.rtol, atol=args.atol,
        adjoint=args.adjoint, sizes=(args.train_size, args.val_size, args.test_size),
        cache_dir=args.cache_dir, resume=args.resume, overwrite=args.overwrite,
        progress=not args.no_progress, data_parallel=args.data_parallel)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    try:
        records = sweep(cfg)
    except FileExistsError as err:  # an existing results file: say so, no traceback
        raise SystemExit(str(err)) from None
    print(f"{'topology':<13}{'k':>4}  {'model':<14}{'test MSE':>11}{'std':>10}{'seconds':>9}")
    for r in records:
        print(f"{r['topology']:<13}{r['distance']:>4}  {r['model']:<14}"
              f"{r['test_mse_mean']:>11.3g}{r['test_mse_std']:>10.2g}{r['wall_time_s']:>9.0f}")
    print(f"wrote {Path(cfg.results_dir) / 'results.json'} and "
          f"{Path(cfg.results_dir) / 'transfer.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
