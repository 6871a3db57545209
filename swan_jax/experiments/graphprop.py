"""Graph property prediction, the paper's Table 1: diameter, "SSSP", "Eccentricity".

Appendix D.2 / E.3 and the hyper-parameter table give the protocol.

What the columns are: in the `paper` label setting (what produced Table 1) the task flags
keep the paper's names, but both authors' loaders read PNA's node columns shifted
(`swan_jax.data.graphprop`, module docstring): `--task sssp` trains the Laplacian
features `(D - A) x` (a one-hop target), `--task eccentricity` the single-source
distances, `--task diameter` the diameter. The `faithful` setting trains what the names
say.

Model: `Linear(2 -> hidden)` -> SWAN ODE block (or a baseline MPNN stack) -> the ADGN /
SWAN reference head (node tasks: `Linear(d, d//2) - LeakyReLU - Linear(d//2, 1) -
LeakyReLU`; diameter: the same on the concatenated sum / max / mean poolings, `d = 3
hidden`). Protocol and grid: `configs/graphprop.toml`. One program per static point
(hidden, layers); the numeric grid (A_hat x epsilon x gamma x beta) times the seeds
trains as ONE vmapped program. Every run is also scored the authors' way
(`batch_averaged_log10_mse`: log10 of the mean of per-batch losses), beside the pooled
score.

    python -m swan_jax.experiments.graphprop --task sssp --variant swan --hidden 20 \\
        --layers 5 --adjacency sym --epsilon 0.1 --gamma 0.1 --beta 1   # one grid point
    python -m swan_jax.experiments.graphprop --task diameter --models swan,adgn --hidden 20 \\
        --layers 5 --epsilon 0.1 --gamma 0.1 --beta 1 --adjacency sym --epochs 200
    python -m swan_jax.experiments.graphprop --all --resume     # the whole paper sweep
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from swan_jax.config import NO_PSI_VARIANTS, TRACED_FIELDS
from swan_jax.data import graphprop
from swan_jax.data.batching import budget_for, iterate_batches
from swan_jax.experiments import command
from swan_jax.experiments.config import SweepConfig, select
from swan_jax.experiments.sweep import Experiment, Task
from swan_jax.models import (
    MLP,
    GraphCONBlock,
    LinearEncoder,
    Model,
    MPNNStack,
    pool_nodes,
)
from swan_jax.settings import setting
from swan_jax.train import in_blocks, stack_hparams

TASKS = ("diameter", "sssp", "eccentricity")
TASK_LEVEL = {"diameter": "graph", "sssp": "node", "eccentricity": "node"}
LABEL_SETTINGS = tuple(graphprop.LABEL_SETTINGS)  # paper, faithful, swan-code
# Message passing baselines (`models.BASELINE_LAYERS`): `num_layers` layers of `hidden`
# channels. One name here (and its row in PAPER) adds a model.
BASELINES = ("gcn", "gin", "sage", "gat")

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
# GraphCON (Rusch et al. 2022), a Table 1 baseline: name -> its coupling F_theta. The grid's
# epsilon is its step dt, gamma its restoring force; alpha (damping) = 1, GraphCON's own
# default; it has no A_hat or beta axis.
GRAPHCON: dict[str, str] = {"graphcon": "gcn"}
GRAPHCON_READS = ("epsilon", "gamma")  # the SWAN axes GraphCON's block reads too
ALL_MODELS = tuple(MODELS) + BASELINES + tuple(GRAPHCON)

# Paper values (Table 1, Appendix G's layer-dependent rows, Table 3's ablation): test
# log10(MSE) mean and std over 4 seeds, in the order diameter, "SSSP" (the Laplacian
# features), "Eccentricity" (the single-source distances). They come from ADGN's data
# pipeline, i.e. the `paper` label setting of `swan_jax.data.graphprop`.
PAPER: dict[str, tuple[tuple[float, float], ...]] = {
    "swan": ((-0.5249, 0.0155), (-3.2370, 0.0834), (0.4094, 0.0764)),
    "swan-learn": ((-0.5981, 0.1145), (-3.5425, 0.0830), (-0.0739, 0.2190)),
    "swan-ld": ((-0.6381, 0.0358), (-3.9342, 0.1993), (-0.2706, 0.0948)),
    "swan-learn-ld": ((-0.5905, 0.0372), (-3.8258, 0.0950), (-0.2245, 0.0840)),
    "swan-beta0": ((-0.3882, 0.0610), (-3.2061, 0.0416), (0.5573, 0.0247)),
    "swan-ne": ((-0.5497, 0.0766), (-3.1913, 0.0762), (0.3792, 0.1514)),
    "swan-learn-ne": ((-0.5631, 0.0694), (-3.5296, 0.0831), (0.1317, 0.1253)),
    "adgn": ((-0.5188, 0.1812), (-3.2417, 0.0751), (0.4296, 0.1003)),
    "gcn": ((0.7424, 0.0466), (0.9499, 9.18e-05), (0.8468, 0.0028)),
    "gat": ((0.8221, 0.0752), (0.6951, 0.1499), (0.7909, 0.0222)),
    "sage": ((0.8645, 0.0401), (0.2863, 0.1843), (0.7863, 0.0207)),
    "gin": ((0.6131, 0.0990), (-0.5408, 0.4193), (0.9504, 0.0007)),
    "graphcon": ((0.0964, 0.0620), (-1.3836, 0.0092), (0.6833, 0.0074)),
}
# The authors' score (`run_scores`): per run, at its best-validation parameters.
AUTHORS_SCORES = ("authors_val", "authors_test")


@dataclasses.dataclass(frozen=True)
class GraphPropConfig(SweepConfig):
    """Graph-property settings besides the shared ones (see `configs/graphprop.toml`)."""

    tasks: tuple[str, ...] = select(("sssp",), choices=TASKS, flag="--task",
                                    help="tasks (cells), the paper's column names; in the "
                                         "paper and swan-code label settings sssp trains "
                                         "the Laplacian features (D - A) x and "
                                         "eccentricity the single-source distances (both "
                                         "authors' loaders read those columns), diameter "
                                         "the diameter; faithful trains what the names say")
    labels: tuple[str, ...] = select(("paper",), choices=LABEL_SETTINGS,
                                     help="label settings (cells): paper (raw labels, ADGN's "
                                          "columns: what produced the paper's Table 1), "
                                          "faithful (each task its own column, normalised), "
                                          "swan-code (the authors' released loader)")
    models: tuple[str, ...] = select(("swan",), choices=ALL_MODELS,
                                     help="models (cells): the SWAN variants, adgn, and the "
                                          "message-passing baselines " + ", ".join(BASELINES))
    final_leaky_relu: bool = setting(True, help="the reference head ends in a LeakyReLU")
    per_size: tuple[int, int, int] | None = setting(
        None, low=1, parts=("train", "val", "test"),
        help="graphs per node count for train,val,test (paper: 512,128,256)")
    node_counts: tuple[int, ...] | None = setting(
        None, low=1, help="node counts of every split (paper: train 25-34, val/test 25-29)")
    data_seed: int = setting(graphprop.DEFAULT_SEED, help="seed of the graph generator")

    def loader_sizes(self) -> dict[str, Any]:
        sizes: dict[str, Any] = {}
        if self.per_size is not None:
            sizes["per_size"] = dict(zip(graphprop.SPLITS, self.per_size, strict=True))
        if self.node_counts is not None:
            sizes["nodes"] = {split: tuple(self.node_counts) for split in graphprop.SPLITS}
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


class GraphProp(Experiment[GraphPropConfig]):
    name, title = "graphprop", "Graph property prediction"
    paper_ref = "the paper's Table 1 (test log10 MSE)"
    run_score_names = AUTHORS_SCORES
    Config = GraphPropConfig
    cell_axes = ("task", "labels", "model")
    # Not a static axis, the adjacency: a grid with both `A_hat` trains
    # them in one program (the paper grid's screen: 12 programs of 72 runs, not 24 of 36),
    # half the compilations and, on a GPU, where these small epochs are kernel launches,
    # half the device calls; a grid with one keeps it static, with the program as before.
    static_axes = ("hidden", "num_layers")
    table_sections = ("labels", "Label setting")

    def cells(self, cfg: GraphPropConfig):
        return [{"task": t, "labels": lc, "model": m} for t in cfg.tasks
                for lc in cfg.labels for m in cfg.models]

    def data_key(self, cfg, cell):
        return cell["task"], cell["labels"]

    def load_data(self, cfg: GraphPropConfig, cell):
        return graphprop.load_graphprop(cell["task"], labels=cell["labels"],
                                        cache_dir=cfg.cache_dir, seed=cfg.data_seed,
                                        **cfg.loader_sizes(), **cfg.data_options)

    def task_for(self, cfg, cell) -> Task:
        """Node tasks: the setting's loss and score (ADGN's per-graph node means, then the
        mean over graphs); the diameter, one row per graph: plain MSE."""
        level = TASK_LEVEL[cell["task"]]
        if level == "graph":
            return Task("mse", "log10_mse", level)
        setting = graphprop.LABEL_SETTINGS[cell["labels"]]
        return Task(setting.loss, setting.metric, level)

    def grid(self, cfg: GraphPropConfig, cell):
        """The configured grid; beta collapses to 0 where the variant has no Psi; the
        baselines keep the optimiser's axes only, GraphCON those and epsilon, gamma."""
        axes = dict(cfg.grid)
        if cell["model"] in BASELINES:
            return {k: v for k, v in axes.items() if k in ("learning_rate", "weight_decay",
                                                           "hidden", "num_layers")}
        if cell["model"] in GRAPHCON:  # of SWAN's only epsilon, gamma: others would repeat runs
            return {k: v for k, v in axes.items()
                    if k not in TRACED_FIELDS or k in GRAPHCON_READS}
        if MODELS[cell["model"]][0] in NO_PSI_VARIANTS:
            axes["beta"] = (0.0,)
        return axes

    def notes(self, cfg: GraphPropConfig) -> list[str]:
        """The label settings and the batch size the runs used: `batch_size`, or the
        training graphs where there are fewer (train caps it there)."""
        sizes = cfg.loader_sizes()
        nodes, per_size = graphprop._resolve(sizes.get("nodes"), sizes.get("per_size"))
        train = len(nodes["train"]) * per_size["train"]
        used = min(cfg.batch_size, train)
        capped = (f" (batch_size {cfg.batch_size} capped at the {train} training graphs)"
                  if used < cfg.batch_size else "")
        return [f"label settings {', '.join(cfg.labels)} (swan_jax.data.graphprop); batch "
                f"size {used} for every setting{capped}"]

    def extra_results(self, cfg: GraphPropConfig) -> dict[str, Any]:
        """`constant_predictor`: the best constant's log10 MSE per (task, label setting),
        scored as the cells are (graph means; `<split>_authors`: batch-averaged), the
        reference row of every table."""
        rows = []
        for task in cfg.tasks:
            for labels in cfg.labels:
                splits = self.load_data(cfg, {"task": task, "labels": labels})
                batch = graphprop.LABEL_SETTINGS[labels].batch_size
                rows.append({"task": task, "labels": labels,
                             **graphprop.constant_predictor_scores(splits, task,
                                                                   batch_size=batch)})
        return {"constant_predictor": rows}

    def run_scores(self, cfg: GraphPropConfig, program, result, splits):
        """Per run, the authors' score of its best-validation parameters on val and test
        (`AUTHORS_SCORES`; `graphprop.batch_averaged_log10_mse` with the setting's batch
        size: at test 512 + 512 + 256 graphs). The epoch is the one the pooled validation
        score chose, ties to the earlier (the authors choose by their batch-averaged one,
        ties to the later)."""
        if result.best_params is None:
            return None
        level = TASK_LEVEL[program.cell["task"]]
        batch_size = graphprop.LABEL_SETTINGS[program.cell["labels"]].batch_size
        model_fn = self.model_fn(cfg, program.cell, program.static)
        _, hp = stack_hparams(program.grid, cfg.seeds, cfg.train)
        predict = jax.jit(in_blocks(jax.vmap(lambda p, h, g: model_fn(h).apply(p, g),
                                             in_axes=(0, 0, None)),
                                    (True, True, False)))  # training's layout
        scores: list[dict[str, float]] = [{} for _ in result.runs]
        for split, name in zip(("val", "test"), AUTHORS_SCORES, strict=True):
            data = splits[split]
            pred = _predict_runs(predict, result.best_params, hp, data, level, batch_size)
            target = data.node_targets if level == "node" else data.graph_targets
            n_node = data.n_node if level == "node" else np.ones(len(data), np.int64)
            for r, score in enumerate(scores):
                finite = np.all(np.isfinite(pred[r]))
                score[name] = (graphprop.batch_averaged_log10_mse(
                    pred[r], target, n_node, batch_size=batch_size) if finite else math.nan)
        return scores

    def model_fn(self, cfg: GraphPropConfig, cell, static):
        level = TASK_LEVEL[cell["task"]]
        if cell["model"] in BASELINES:
            def baseline_fn(hp: Mapping[str, Any]) -> nn.Module:
                return Model(LinearEncoder(int(static["hidden"])),
                             MPNNStack(cell["model"], int(static["hidden"]),
                                       int(static["num_layers"]), activation=nn.tanh),
                             PropReadout(level, cfg.final_leaky_relu))

            return baseline_fn
        if cell["model"] in GRAPHCON:
            def graphcon_fn(hp: Mapping[str, Any]) -> nn.Module:
                block = GraphCONBlock(int(static["num_layers"]), epsilon=hp["epsilon"],
                                      gamma=hp["gamma"], coupling=GRAPHCON[cell["model"]])
                return Model(LinearEncoder(int(static["hidden"])), block,
                             PropReadout(level, cfg.final_leaky_relu))

            return graphcon_fn
        variant, sharing = MODELS[cell["model"]]

        def model_fn(hp: Mapping[str, Any]) -> nn.Module:
            block = self.swan_block(cfg, static, hp, variant=variant, weight_sharing=sharing)
            return Model(LinearEncoder(int(static["hidden"])), block,
                         PropReadout(level, cfg.final_leaky_relu))

        return model_fn

    def ode_batch(self, cfg: GraphPropConfig, cell, static):
        """The batch a SWAN / ADGN block integrates: graphs of up to the largest node count
        of any split (evaluation batches too), `hidden` channels."""
        if cell["model"] in BASELINES or cell["model"] in GRAPHCON:
            return None
        sizes = cfg.loader_sizes()
        nodes, per_size = graphprop._resolve(sizes.get("nodes"), sizes.get("per_size"))
        train = len(nodes["train"]) * per_size["train"]
        largest = max(max(counts) for counts in nodes.values())
        return min(cfg.batch_size, train), largest, int(static["hidden"])

    def paper(self, cell):
        if cell["labels"] != "paper" or cell["model"] not in PAPER:
            return None
        return PAPER[cell["model"]][TASKS.index(cell["task"])]

    # ---------------------------------------------------------------- command line
    def add_arguments(self, p) -> None:
        p.add_argument("--layer-dependent", action="store_true",
                       help="with --variant: layer-dependent weights (no weight sharing)")
        p.add_argument("--all", action="store_true",
                       help="every task x model in every label setting, not narrowed by "
                            "--task / --labels / --models (make reproduce-graphprop)")

    def check_arguments(self, args, error) -> None:
        if args.per_size is not None and len(args.per_size) != 3:
            error(f"--per-size takes three numbers: train,val,test (got {len(args.per_size)})")
        if args.models is not None and (args.variant or args.layer_dependent):
            error("give either --models or --variant [--layer-dependent], not both")

    def apply_arguments(self, args, cfg: GraphPropConfig, error) -> GraphPropConfig:
        changes: dict[str, Any] = {}
        if args.variant is not None:
            models = tuple(v + ("-ld" if args.layer_dependent else "") for v in args.variant)
            bad = [m for m in models if m not in MODELS]
            if bad:
                error(f"--layer-dependent is available for swan, swan-learn; not {bad}")
            changes["models"] = models
        if args.all:
            every = {"tasks": TASKS, "labels": LABEL_SETTINGS, "models": ALL_MODELS}
            changes.update({k: v for k, v in every.items()
                            if getattr(args, k) is None and k not in changes})
        return dataclasses.replace(cfg, **changes)


def _predict_runs(predict, params, hp, data, level: str, batch_size: int) -> np.ndarray:
    """`[runs, rows, T]` predictions of every run over `data`, in its order (real rows)."""
    budget = budget_for(data, batch_size)
    parts = []
    for batch in iterate_batches(data, batch_size, budget):
        out = np.asarray(predict(params, hp, jax.tree_util.tree_map(jnp.asarray,
                                                                     batch.graph)))
        parts.append(out[:, batch.node_mask if level == "node" else batch.graph_mask])
    return np.concatenate(parts, axis=1)


EXPERIMENT = GraphProp()


def parse_config(argv: Sequence[str] | None = None) -> GraphPropConfig:
    return command.parse_config(EXPERIMENT, argv)


def main(argv: Sequence[str] | None = None) -> int:
    return command.main(EXPERIMENT, argv)


if __name__ == "__main__":  # run the package's module, so run.json names an importable class
    from swan_jax.experiments.graphprop import main as package_main

    sys.exit(package_main())
