"""Graph property prediction: diameter, SSSP, eccentricity (paper Sec. "Graph Property
Prediction", Appendix D.2 / E.3, hyper-parameter table).

Protocol (E.3): Adam, lr 0.003, weight decay 1e-6, up to 1500 epochs, early stopping with
patience 100 on the validation MSE; model selection by the mean validation log10(MSE) over
4 seeds, reported as the test log10(MSE) of that configuration (mean / std over seeds).
Model: `Linear(2 -> hidden)` -> SWAN ODE block -> the ADGN / SWAN reference head
(node tasks: `Linear(d, d//2) - LeakyReLU - Linear(d//2, 1) - LeakyReLU`; diameter: the same
on the concatenated sum / max / mean poolings, `d = 3 hidden`). Batch size 128 as in the
reference code.

One `train` call per static point (model, hidden, layers, A_hat): the numeric grid
(epsilon x gamma x beta) times the seeds trains as ONE vmapped program. Every finished
static point is appended to `results.json` (`ResultsFile`), every epoch is checkpointed in
its own directory, so `--resume` continues a cut sweep where it stopped.

    python experiments/graphprop.py --task sssp --variant swan --seeds 0,1,2,3
    python experiments/graphprop.py --task diameter --models swan,adgn --hidden 20 \
        --layers 5 --epsilon 0.1 --gamma 0.1 --beta 1 --adjacency sym --epochs 200
    python experiments/graphprop.py --all --resume      # the whole paper sweep
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
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
    summarise_runs,
)
from swan_jax.config import NO_PSI_VARIANTS, SWANConfig
from swan_jax.data import graphprop
from swan_jax.models import MLP, LinearEncoder, Model, SWANBlock, pool_nodes
from swan_jax.train import TrainConfig, save_json_atomic, train

TASKS = ("diameter", "sssp", "eccentricity")
TASK_LEVEL = {"diameter": "graph", "sssp": "node", "eccentricity": "node"}
LABEL_SETTINGS = ("paper", "adgn")

# name -> (SWAN variant, weight sharing); "-ld" = layer-dependent weights (Appendix G).
MODELS: dict[str, tuple[str, bool]] = {
    "swan": ("swan", True),
    "swan-learn": ("swan-learn", True),
    "swan-ld": ("swan", False),
    "swan-learn-ld": ("swan-learn", False),
    "swan-beta0": ("swan-beta0", True),
    "swan-ne": ("swan-ne", True),
    "swan-learn-ne": ("swan-learn-ne", True),
    "adgn": ("adgn", True),
}
ALL_MODELS = tuple(MODELS)

# Paper values (the graph-property table, Appendix G's layer-dependent rows, the ablation
# table): test log10(MSE) mean and std over 4 seeds, in the order diameter, SSSP,
# eccentricity. They come from ADGN's data pipeline, i.e. the "adgn" label columns of
# `swan_jax.data.graphprop`.
PAPER: dict[str, tuple[tuple[float, float], ...]] = {
    "swan": ((-0.5249, 0.0155), (-3.2370, 0.0834), (0.4094, 0.0764)),
    "swan-learn": ((-0.5981, 0.1145), (-3.5425, 0.0830), (-0.0739, 0.2190)),
    "swan-ld": ((-0.6381, 0.0358), (-3.9342, 0.1993), (-0.2706, 0.0948)),
    "swan-learn-ld": ((-0.5905, 0.0372), (-3.8258, 0.0950), (-0.2245, 0.0840)),
    "swan-beta0": ((-0.3882, 0.0610), (-3.2061, 0.0416), (0.5573, 0.0247)),
    "swan-ne": ((-0.5497, 0.0766), (-3.1913, 0.0762), (0.3792, 0.1514)),
    "swan-learn-ne": ((-0.5631, 0.0694), (-3.5296, 0.0831), (0.1317, 0.1253)),
    "adgn": ((-0.5188, 0.1812), (-3.2417, 0.0751), (0.4296, 0.1003)),
}
MODEL_LABELS = {
    "swan": "SWAN", "swan-learn": "SWAN-learn", "swan-ld": "SWAN (layer-dependent)",
    "swan-learn-ld": "SWAN-learn (layer-dependent)", "swan-beta0": "SWAN beta=0",
    "swan-ne": "SWAN-ne", "swan-learn-ne": "SWAN-learn-ne", "adgn": "ADGN",
}


@dataclasses.dataclass(frozen=True)
class GraphPropConfig:
    """One invocation: which cells (task x label setting x model) and which grid."""

    tasks: tuple[str, ...] = ("sssp",)
    label_columns: tuple[str, ...] = ("paper",)
    models: tuple[str, ...] = ("swan",)
    hidden: tuple[int, ...] = (10, 20, 30)
    layers: tuple[int, ...] = (1, 5, 10, 20)
    epsilon: tuple[float, ...] = (1.0, 0.1, 0.01)
    gamma: tuple[float, ...] = (1.0, 0.1)
    beta: tuple[float, ...] = (2.0, 1.0, 0.5, 0.1, -0.5, -1.0)
    adjacency: tuple[str, ...] = ("adj", "sym")
    learning_rate: tuple[float, ...] = (0.003,)
    weight_decay: float = 1e-6
    epochs: int = 1500
    patience: int | None = 100
    batch_size: int = 128
    seeds: tuple[int, ...] = (0, 1, 2, 3)
    solver: str = "euler"
    rtol: float = 1e-3
    atol: float = 1e-6
    adjoint: str = "recursive"
    final_leaky_relu: bool = True  # the reference head ends in a LeakyReLU
    per_size: tuple[int, int, int] | None = None  # graphs per node count: train, val, test
    node_counts: tuple[int, ...] | None = None  # node counts of every split (default 25-34)
    data_seed: int = graphprop.DEFAULT_SEED
    cache_dir: Path | None = None
    results_dir: Path = Path("results/graphprop")
    checkpoint_dir: Path | None = None  # default results_dir / "checkpoints"
    checkpoints: bool = True
    resume: bool = False
    overwrite: bool = False
    progress: bool = True
    data_parallel: bool = False

    def protocol(self) -> dict[str, Any]:
        """Everything besides the grid that makes two results comparable."""
        out = {"epochs": self.epochs, "patience": self.patience, "batch_size": self.batch_size,
               "weight_decay": self.weight_decay, "seeds": list(self.seeds),
               "solver": self.solver, "final_leaky_relu": self.final_leaky_relu,
               "per_size": None if self.per_size is None else list(self.per_size),
               "node_counts": None if self.node_counts is None else list(self.node_counts),
               "data_seed": self.data_seed}
        if self.solver != "euler":
            out.update(rtol=self.rtol, atol=self.atol, adjoint=self.adjoint)
        return out

    def numeric_grid(self, model: str) -> list[dict[str, float]]:
        """epsilon x gamma x beta x lr; beta collapses to 0 where the variant has no Psi."""
        beta = (0.0,) if MODELS[model][0] in NO_PSI_VARIANTS else self.beta
        return grid_points(epsilon=self.epsilon, gamma=self.gamma, beta=beta,
                           learning_rate=self.learning_rate)

    def loader_sizes(self) -> dict[str, Any]:
        sizes: dict[str, Any] = {}
        if self.per_size is not None:
            sizes["per_size"] = dict(zip(graphprop.SPLITS, self.per_size, strict=True))
        if self.node_counts is not None:
            sizes["nodes"] = {split: self.node_counts for split in graphprop.SPLITS}
        return sizes


class PropReadout(nn.Module):
    """The ADGN / SWAN graph-property head (poolings first for graph-level tasks)."""

    level: str
    final_leaky_relu: bool = True

    @nn.compact
    def __call__(self, graph, x):
        if self.level == "graph":
            x = pool_nodes(graph, x, ("sum", "max", "mean"))
        y = MLP((max(x.shape[-1] // 2, 1), 1), activation=nn.leaky_relu)(x)
        return nn.leaky_relu(y) if self.final_leaky_relu else y


def make_model_fn(cfg: GraphPropConfig, model: str, hidden: int, layers: int,
                  adjacency: str, level: str):
    variant, sharing = MODELS[model]

    def model_fn(hp: Mapping[str, Any]) -> nn.Module:
        swan = SWANConfig(variant=variant, adjacency=adjacency, beta=hp["beta"],
                          gamma=hp["gamma"], epsilon=hp["epsilon"], num_layers=layers,
                          weight_sharing=sharing)
        block = SWANBlock(swan, cfg.solver, rtol=cfg.rtol, atol=cfg.atol, adjoint=cfg.adjoint)
        return Model(LinearEncoder(hidden), block, PropReadout(level, cfg.final_leaky_relu))

    return model_fn


def _digest(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:10]


def run_point(cfg: GraphPropConfig, results: ResultsFile, splits, task: str, labels: str,
              model: str, hidden: int, layers: int, adjacency: str) -> None:
    """Train one static point (all numeric grid points x seeds) unless already recorded."""
    grid = cfg.numeric_grid(model)
    key = {"task": task, "label_columns": labels, "model": model, "hidden": hidden,
           "layers": layers, "adjacency": adjacency, "protocol": cfg.protocol(), "grid": grid}
    if results.done(key):
        return
    ckpt = None
    if cfg.checkpoints:
        root = cfg.checkpoint_dir or cfg.results_dir / "checkpoints"
        ckpt = root / task / labels / model / f"h{hidden}_l{layers}_{adjacency}_{_digest(key)}"
        if cfg.overwrite and not cfg.resume and ckpt.exists():
            shutil.rmtree(ckpt)
    train_cfg = TrainConfig(
        epochs=cfg.epochs, patience=cfg.patience, batch_size=cfg.batch_size, optimizer="adam",
        weight_decay=cfg.weight_decay, loss="mse", metric="log10_mse",
        task_level=TASK_LEVEL[task], seeds=cfg.seeds, checkpoint_dir=None if ckpt is None
        else str(ckpt), resume=cfg.resume, on_divergence="stop_run", progress=cfg.progress,
        data_parallel=cfg.data_parallel,
        description=f"{task}/{labels}/{model} h{hidden} L{layers} {adjacency}")
    model_fn = make_model_fn(cfg, model, hidden, layers, adjacency, TASK_LEVEL[task])
    out = train(model_fn, splits, train_cfg, grid, fingerprint_extra=key)
    static = {"hidden": hidden, "layers": layers, "adjacency": adjacency}
    runs = [{**r, "hparams": {**r["hparams"], **static}} for r in out.runs]
    results.add({**key, "runs": runs, "num_params": out.num_params,
                 "wall_time": out.wall_time, "epochs_completed": out.epochs_completed})


def summarise_cells(records: Sequence[Mapping[str, Any]], protocol: Mapping[str, Any]
                    ) -> list[dict[str, Any]]:
    """Per (task, label setting, model): the best mean-validation point over every static
    point recorded under `protocol` (later records replace earlier runs of the same point)."""
    cells: dict[tuple[str, str, str], dict[str, Any]] = {}
    for rec in records:
        if rec.get("protocol") != protocol:
            continue
        cell = cells.setdefault((rec["task"], rec["label_columns"], rec["model"]),
                                {"runs": {}, "wall_time": 0.0, "static_points": 0})
        for run in rec["runs"]:
            cell["runs"][(json.dumps(run["hparams"], sort_keys=True), run["seed"])] = run
        cell["wall_time"] += rec["wall_time"]
        cell["static_points"] += 1
    out = []
    for (task, labels, model), cell in cells.items():
        summary = summarise_runs(list(cell["runs"].values()), mode="min")
        best = summary["best"]
        out.append({"task": task, "label_columns": labels, "model": model,
                    "test_mean": best["test_mean"], "test_std": best["test_std"],
                    "val_mean": best["val_mean"], "best_hparams": best["hparams"],
                    "best_epochs_run": best["epochs_run"], "best_diverged": best["diverged"],
                    "grid_points": len(summary["points"]),
                    "static_points": cell["static_points"], "wall_time": cell["wall_time"],
                    "paper": PAPER[model][TASKS.index(task)]})
    return sorted(out, key=lambda c: (LABEL_SETTINGS.index(c["label_columns"]),
                                      ALL_MODELS.index(c["model"]), TASKS.index(c["task"])))


def render_table(cells: Sequence[Mapping[str, Any]], protocol: Mapping[str, Any]) -> str:
    """Markdown: per label setting, ours (mean ± std) beside the paper's value."""
    found = {(c["label_columns"], c["model"], c["task"]): c for c in cells}
    lines = ["# Graph property prediction: test log10(MSE), mean ± std over seeds", "",
             "Best configuration by mean validation log10(MSE). Paper values (main table, the "
             "layer-dependent rows of Appendix G, the ablation table) come from ADGN's data "
             "pipeline, i.e. the `adgn` label setting; `paper` gives every task its own "
             "label column.", "", f"Protocol: `{json.dumps(protocol, sort_keys=True)}`", ""]
    header = "| Model | " + " | ".join(f"{t} | paper" for t in TASKS) + " |"
    for labels in LABEL_SETTINGS:
        models = [m for m in ALL_MODELS if any((labels, m, t) in found for t in TASKS)]
        if not models:
            continue
        lines += [f"## Label setting `{labels}`", "", header,
                  "|---" * (1 + 2 * len(TASKS)) + "|"]
        for m in models:
            row = [MODEL_LABELS[m]]
            for t, (p_mean, p_std) in zip(TASKS, PAPER[m], strict=True):
                c = found.get((labels, m, t))
                row += ["—" if c is None else f"{c['test_mean']:.4f} ± {c['test_std']:.4f}",
                        f"{p_mean:.4f} ± {p_std:.4f}"]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    lines += ["## Selected configurations", "",
              "| Label setting | Model | Task | best hparams | epochs run | grid points | "
              "wall (s) |", "|---|---|---|---|---|---|---|"]
    for c in cells:
        lines.append(f"| {c['label_columns']} | {c['model']} | {c['task']} | "
                     f"`{json.dumps(c['best_hparams'], sort_keys=True)}` | "
                     f"{c['best_epochs_run']} | {c['grid_points']} | {c['wall_time']:.0f} |")
    return "\n".join(lines) + "\n"


def run(cfg: GraphPropConfig) -> list[dict[str, Any]]:
    """Train every missing static point of every cell, then write results.json, table.md."""
    results = ResultsFile(cfg.results_dir / "results.json", overwrite=cfg.overwrite,
                          resume=cfg.resume)
    for task, labels in itertools.product(cfg.tasks, cfg.label_columns):
        splits = graphprop.load_graphprop(task, label_columns=labels, cache_dir=cfg.cache_dir,
                                          seed=cfg.data_seed, **cfg.loader_sizes())
        for model, hidden, layers, adjacency in itertools.product(
                cfg.models, cfg.hidden, cfg.layers, cfg.adjacency):
            run_point(cfg, results, splits, task, labels, model, hidden, layers, adjacency)
    cells = summarise_cells(results.records, cfg.protocol())
    save_json_atomic(results.path, {"machine": machine_info(), "protocol": cfg.protocol(),
                                    "cells": cells, "records": results.records}, overwrite=True)
    (cfg.results_dir / "table.md").write_text(render_table(cells, cfg.protocol()))
    return cells


def build_parser() -> argparse.ArgumentParser:
    p = base_parser("SWAN graph property prediction (diameter, SSSP, eccentricity)")
    p.add_argument("--task", type=parse_str_list(TASKS), default=None,
                   help=f"comma-separated tasks: {', '.join(TASKS)} (default sssp)")
    p.add_argument("--label-columns", type=parse_str_list(LABEL_SETTINGS), default=None,
                   help="paper: each task its own column; adgn: ADGN's loader (default paper)")
    p.add_argument("--models", type=parse_str_list(ALL_MODELS), default=None,
                   help=f"comma-separated models: {', '.join(ALL_MODELS)}")
    p.add_argument("--layer-dependent", action="store_true",
                   help="with --variant: layer-dependent weights (no weight sharing)")
    p.add_argument("--hidden", type=parse_positive_int_list, default=None)
    p.add_argument("--layers", type=parse_positive_int_list, default=None)
    p.add_argument("--per-size", type=parse_positive_int_list, default=None,
                   help="graphs per node count for train,val,test (paper: 512,128,256)")
    p.add_argument("--node-counts", type=parse_positive_int_list, default=None,
                   help="node counts of every split (paper: train 25-34, val/test 25-29)")
    p.add_argument("--data-seed", type=int, default=graphprop.DEFAULT_SEED)
    p.add_argument("--cache-dir", type=Path, default=None)
    p.add_argument("--no-checkpoints", action="store_true", help="do not checkpoint epochs")
    p.add_argument("--all", action="store_true",
                   help="every task x model in both label settings (make reproduce-graphprop)")
    return p


def config_from_args(args: argparse.Namespace) -> GraphPropConfig:
    """The `GraphPropConfig` of parsed flags; inconsistent flags exit as argparse does (2)."""
    fail = build_parser().error
    if args.per_size is not None and len(args.per_size) != 3:
        fail(f"--per-size takes three numbers: train,val,test (got {len(args.per_size)})")
    if args.models is not None and (args.variant or args.layer_dependent):
        fail("give either --models or --variant [--layer-dependent], not both")
    models = args.models
    if models is None and args.variant is not None:
        models = tuple(v + ("-ld" if args.layer_dependent else "") for v in args.variant)
        bad = [m for m in models if m not in MODELS]
        if bad:
            fail(f"--layer-dependent is available for swan, swan-learn; not {bad}")
    default = GraphPropConfig()
    given = {
        "tasks": TASKS if args.all and args.task is None else args.task,
        "label_columns": LABEL_SETTINGS if args.all and args.label_columns is None
        else args.label_columns,
        "models": ALL_MODELS if args.all and models is None else models,
        "hidden": args.hidden, "layers": args.layers, "epsilon": args.epsilon,
        "gamma": args.gamma, "beta": args.beta, "adjacency": args.adjacency,
        "learning_rate": args.lr, "epochs": args.epochs, "patience": args.patience,
        "batch_size": args.batch_size, "per_size": args.per_size,
        "node_counts": args.node_counts, "cache_dir": args.cache_dir,
        "results_dir": args.results_dir, "checkpoint_dir": args.checkpoint_dir,
    }
    return dataclasses.replace(
        default, **{k: v for k, v in given.items() if v is not None}, seeds=args.seeds,
        solver=args.solver, rtol=args.rtol, atol=args.atol, adjoint=args.adjoint,
        data_seed=args.data_seed, checkpoints=not args.no_checkpoints, resume=args.resume,
        overwrite=args.overwrite, progress=not args.no_progress,
        data_parallel=args.data_parallel)


def main(argv: Sequence[str] | None = None) -> None:
    cfg = config_from_args(build_parser().parse_args(argv))
    try:
        run(cfg)
    except FileExistsError as err:  # an existing results file: say so, no traceback
        raise SystemExit(str(err)) from None
    sys.stdout.write((cfg.results_dir / "table.md").read_text())


if __name__ == "__main__":
    main()
