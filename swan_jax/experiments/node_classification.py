"""Node classification on one large graph: GCN, SWAN, SWAN-learn on Tolokers and others.

The paper's scalability table (Appendix "Additional runtimes"): Tolokers, Questions or
ogbn-arxiv.

    python -m swan_jax.experiments.node_classification --dataset tolokers --resume
    python -m swan_jax.experiments.node_classification --dataset tolokers --splits 0,1 \\
        --models swan --epochs 5                  # a look: two splits, one model
    python -m swan_jax.experiments.node_classification --dataset questions --data-dir DIR

Full-batch training on the one graph; every official split is a cell (Tolokers and
Questions have 10, ogbn-arxiv one), pooled in the summary: test metric at each run's best
validation epoch, mean ± std over the splits (ROC AUC of the one logit, trained with
binary cross-entropy, for Tolokers and Questions; accuracy and cross-entropy for
ogbn-arxiv). Model: `Linear(F -> hidden)` -> SWAN ODE block (`num_layers` Euler steps)
or `num_layers` GCN layers with ReLU -> `Linear(hidden -> outputs)`. The protocol is
`configs/node_classification.toml` (the paper publishes none for this table). Besides the
metric, `table.md` shows the median training and evaluation milliseconds per epoch
(compiling epoch excluded) beside the paper's. Tolokers is downloaded (md5 checked) where
a network allows; Questions and ogbn-arxiv must be fetched by hand (the refusal says
where to put them).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from swan_jax.config import TRACED_FIELDS
from swan_jax.data import node_classification as nc
from swan_jax.data.errors import missing_report
from swan_jax.data.positional import with_positional_encodings
from swan_jax.experiments import command, report
from swan_jax.experiments.config import SweepConfig, io, select
from swan_jax.experiments.records import machine_info
from swan_jax.experiments.sweep import Experiment, Task
from swan_jax.gps import GPSEncoder, GPSStack, gps_feature_width
from swan_jax.models import LinearEncoder, Model, MPNNStack, NodeReadout
from swan_jax.settings import setting
from swan_jax.train import SPLIT_AXIS, NodeSplit

MODELS: tuple[str, ...] = ("gcn", "swan", "swan-learn")  # run by default
# GraphGPS (`swan_jax.gps`), on request (`--models gps`): attention over the whole graph,
# which the paper reports out of memory on ogbn-arxiv and Questions (A100 40 GB).
GPS = "gps"
ALL_MODELS: tuple[str, ...] = MODELS + (GPS,)
# GPS here: GIN inside, 4 heads, LapPE of the k = 8 lowest eigenvectors (scipy's eigsh,
# once per data set) in hidden / 4 channels (no GraphGPS configuration exists for these
# sets; the LRGB one's 16 of 96, narrowed to the protocol's width).
GPS_HEADS, GPS_LAP_K = 4, 8
TOGETHER = "together"  # the cell's split when its splits train as one program
OFFICIAL_SPLITS: dict[str, int] = {"tolokers": 10, "questions": 10, "ogbn-arxiv": 1}
SWAN_AXES = TRACED_FIELDS  # axes GCN has no use for

# The paper's scalability table: metric (percent; "Acc" in the paper, ROC AUC for
# Tolokers and Questions), then training and inference milliseconds per epoch.
PAPER: dict[tuple[str, str], tuple[float, float, float, float]] = {
    ("ogbn-arxiv", "gcn"): (71.74, 2.90, 219.04, 107.50),
    ("ogbn-arxiv", "swan"): (72.98, 2.60, 228.45, 116.06),
    ("ogbn-arxiv", "swan-learn"): (73.26, 2.80, 255.84, 131.48),
    ("questions", "gcn"): (76.09, 1.27, 86.04, 41.22),
    ("questions", "swan"): (77.94, 1.16, 86.19, 41.39),
    ("questions", "swan-learn"): (78.12, 1.28, 104.71, 59.80),
    ("tolokers", "gcn"): (83.64, 0.67, 141.98, 81.87),
    ("tolokers", "swan"): (84.01, 0.54, 142.60, 82.09),
    ("tolokers", "swan-learn"): (84.69, 0.63, 167.04, 97.98),
    ("tolokers", "gps"): (83.51, 0.93, 1272.15, 532.93),  # OOM on the other two
}
PAPER_DEVICE = ("an NVIDIA A100 40GB per the paper's text (an NVIDIA A10 per the "
                "reproduction issue)")


@dataclasses.dataclass(frozen=True)
class NodeConfig(SweepConfig):
    """Node-classification settings besides the shared ones (`configs/node_classification.toml`).

    `splits` None runs every official split of the data set.
    """

    dataset: str = select("tolokers", choices=tuple(OFFICIAL_SPLITS),
                          help="the data set; results go to results/<dataset> unless "
                               "--results-dir")
    models: tuple[str, ...] = select(MODELS, choices=ALL_MODELS,
                                     help="models (cells); gps on request")
    splits: tuple[int, ...] | None = select(None, low=0, distinct=True,
                                            help="official split indices (none: every split)")
    data_dir: Path | None = io(None, help="raw files (default $SWAN_DATA_DIR, else data/)")
    download: bool = io(True, help="download a missing Tolokers file (md5-checked)")
    download_dir: Path | None = io(None, help="where a missing Tolokers file is downloaded "
                                              "(default $SWAN_DOWNLOAD_DIR, else "
                                              "~/.cache/swan-jax)")
    verify_md5: bool = setting(True, help="check raw files against the official md5 (off: "
                                          "accept a tolokers.npz of your own)")
    splits_together: bool = setting(False, since_default=True,
                                    help="train a model's splits as one vmapped program "
                                         "(one graph, one mask column per split, a run per "
                                         "split; cut to fit --program-memory-gib when "
                                         "given) instead of one program per split")

    def __post_init__(self) -> None:
        super().__post_init__()
        count = OFFICIAL_SPLITS[self.dataset]
        bad = [s for s in self.splits or () if not 0 <= s < count]
        if bad:
            raise ValueError(f"splits {bad}: {self.dataset} has the official splits "
                             f"0..{count - 1}")
        odd = [h for h in self.grid.get("hidden", ()) if h % GPS_HEADS or h < GPS_HEADS]
        if GPS in self.models and odd:
            raise ValueError(f"GPS needs hidden divisible by its {GPS_HEADS} heads, got "
                             f"{odd[0]} (CLI: --hidden)")

    def split_indices(self) -> tuple[int, ...]:
        return self.splits if self.splits is not None else tuple(
            range(OFFICIAL_SPLITS[self.dataset]))


class NodeClassification(Experiment[NodeConfig]):
    name, title = "node_classification", "Node classification"
    paper_ref = "the paper's scalability table"
    Config = NodeConfig
    cell_axes = ("dataset", "model", "split")
    pooled_axes = ("split",)
    static_axes = ("hidden", "num_layers", "adjacency")
    display_scale = 100.0
    track_test = False  # an epoch evaluates the validation split only: one forward pass

    def __init__(self) -> None:
        self._loaded: dict[tuple, Any] = {}  # a data set, or the raw files it misses

    def cells(self, cfg: NodeConfig):
        """Split-major (every model of split 0, then of split 1, ...): a run stopped early
        has every model on the same splits. `splits_together`: one cell per model, its
        splits a vmapped grid axis (`grid`), the cell's `split` the label "together"."""
        if cfg.splits_together:
            return [{"dataset": cfg.dataset, "model": m, "split": TOGETHER}
                    for m in cfg.models]
        return [{"dataset": cfg.dataset, "model": m, "split": s}
                for s in cfg.split_indices() for m in cfg.models]

    def _options(self, cfg: NodeConfig) -> dict:
        return {"download_dir": cfg.download_dir, "download": cfg.download,
                "verify_md5": cfg.verify_md5}

    def missing_data(self, cfg: NodeConfig, cell) -> str | None:
        key = ("missing", cell["dataset"], cfg.data_dir, *self._options(cfg).values())
        if key not in self._loaded:  # checked (and downloaded) once per data set
            self._loaded[key] = nc.ensure_available(
                [cell["dataset"]], cfg.data_dir, cfg.download_dir, download=cfg.download,
                verify_md5=cfg.verify_md5)
        missing = self._loaded[key]
        return missing_report(missing) if missing else None

    def data(self, cfg: NodeConfig, dataset: str) -> nc.NodeClassificationData:
        """The data set's graph and masks, read once per experiment object."""
        key = ("data", dataset, cfg.data_dir, cfg.cache_dir, *self._options(cfg).values())
        if key not in self._loaded:
            self._loaded.clear()  # one graph in memory at a time
            self._loaded[key] = nc.load_node_dataset(dataset, cfg.data_dir, cfg.cache_dir,
                                                     **self._options(cfg),
                                                     **cfg.data_options)
        return self._loaded[key]

    def load_data(self, cfg: NodeConfig, cell) -> dict[str, NodeSplit]:
        """The cell's split; "together": every official split, a mask column each (the
        runs' `split` hyper-parameter picks theirs, `swan_jax.train._splits`)."""
        data = self.data(cfg, cell["dataset"])
        graph = self._positional(data) if cell["model"] == GPS else data.graph
        if cell["split"] != TOGETHER:
            return {name: NodeSplit(graph, mask)
                    for name, mask in data.split(cell["split"]).items()}
        per_split = [data.split(s) for s in range(OFFICIAL_SPLITS[cell["dataset"]])]
        return {name: NodeSplit(graph, np.stack([m[name] for m in per_split], axis=1))
                for name in per_split[0]}

    def _positional(self, data: nc.NodeClassificationData):
        """The graph with GPS's LapPE columns, computed once per loaded data set."""
        if getattr(self, "_pe_of", None) is not data:
            self._pe_of = data
            self._pe_graph = with_positional_encodings(data.graph, lap_k=GPS_LAP_K)
        return self._pe_graph

    def task_for(self, cfg: NodeConfig, cell) -> Task:
        binary = cell["dataset"] != "ogbn-arxiv"
        return Task("bce", "roc_auc", "node") if binary else Task("ce", "accuracy", "node")

    def grid(self, cfg: NodeConfig, cell):
        """The configured axes (GCN and GPS without SWAN's); with the splits together, the
        split axis too: the official index of each run's split (its mask column)."""
        skip = SWAN_AXES if cell["model"] in ("gcn", GPS) else ()
        axes = {k: v for k, v in cfg.grid.items() if k not in skip}
        if cell["split"] == TOGETHER:
            axes[SPLIT_AXIS] = tuple(cfg.split_indices())
        return axes

    def model_fn(self, cfg: NodeConfig, cell, static):
        """hp -> Linear(F -> hidden), SWAN block or GCN stack, Linear(hidden -> outputs)."""
        model, hidden = cell["model"], int(static["hidden"])
        layers = int(static["num_layers"])
        outputs = 1 if cell["dataset"] != "ogbn-arxiv" else nc.OGBN_ARXIV_NUM_CLASSES

        if model == GPS:
            return self._gps_fn(cfg, cell, hidden, layers, outputs)

        def model_fn(hp):
            if model == "gcn":
                processor = MPNNStack("gcn", hidden, layers)
            else:
                processor = self.swan_block(cfg, static, hp, variant=model)
            return Model(LinearEncoder(hidden), processor, NodeReadout((outputs,)))

        return model_fn

    def _gps_fn(self, cfg: NodeConfig, cell, hidden: int, layers: int, outputs: int):
        """hp -> LapPE beside `Linear(F -> hidden - hidden/4)`, `layers` GPS layers
        attending over the whole graph (one graph in the view), `Linear(hidden -> outputs)`."""
        nodes = int(self.data(cfg, cell["dataset"]).graph.n_node.max())
        pe_dim = hidden // GPS_HEADS
        model = Model(GPSEncoder(LinearEncoder(gps_feature_width(hidden, GPS_LAP_K, 0, pe_dim)),
                                 GPS_LAP_K, pe_dim=pe_dim),
                      GPSStack(hidden, layers, nodes, num_heads=GPS_HEADS, local="gine",
                               max_graphs=1),
                      NodeReadout((outputs,)))
        return lambda hp: model

    def paper(self, cell):
        values = PAPER.get((cell["dataset"], cell["model"]))
        return None if values is None else values[:2]

    def notes(self, cfg: NodeConfig) -> list[str]:
        count = OFFICIAL_SPLITS[cfg.dataset]
        ran = len(cfg.split_indices())
        return [f"{cfg.dataset}, full batch, one seed per official split; planned: {ran} of "
                f"its {count} split(s)" + ("" if ran == count else " (NOT every split)")
                + "; a row pools the splits completed (column Splits of the runtime table; "
                  "Seeds counts seeds per split)", f"paper runtimes on {PAPER_DEVICE}"]

    def table(self, cfg: NodeConfig, cells, skipped) -> str:
        return report.table(self, cfg, cells, skipped) + "\n" + runtime_table(cells)

    # ---------------------------------------------------------------- command line
    def base_config(self, args) -> NodeConfig:
        cfg = self.default_config()
        dataset = args.dataset or cfg.dataset
        return dataclasses.replace(cfg, dataset=dataset, results_dir=Path("results") / dataset)

    def check_arguments(self, args, error) -> None:
        if args.variant and args.models:
            error("give either --models or --variant")
        variants = [v for v in args.variant or () if v not in ALL_MODELS]
        if variants:
            error(f"--variant {','.join(variants)}: this experiment runs "
                  f"{', '.join(ALL_MODELS)}")

    def apply_arguments(self, args, cfg: NodeConfig, error) -> NodeConfig:
        return dataclasses.replace(cfg, models=args.variant) if args.variant else cfg


def runtime_table(cells: Sequence[Mapping]) -> str:
    """Milliseconds per epoch, ours beside the paper's: the training step, and inference
    (the epoch's evaluation: one full-graph forward pass and the validation metric)."""
    lines = ["## Runtime per epoch (ms)", "",
             "Median over epochs 2 onwards (epoch 1 compiles) of the program's per-epoch "
             "timings, then the median over the pooled splits. Training: the optimiser steps "
             "of one epoch (one full-batch step; the batch is assembled on the host and sent "
             "to the device). Inference: the epoch's evaluation, one full-graph forward pass "
             "and the validation metric (the test split is scored once, at the best "
             "validation epoch). Ours on the machine that "
             f"wrote this table, `{machine_info()['device']}` (each program's machine is in "
             f"results.json, `records[].machine`); the paper's on {PAPER_DEVICE}.", "",
             "| dataset | model | Splits | Train (ours) | Inference (ours) | Train (paper) | "
             "Inference (paper) |", "|" + " --- |" * 7]
    for c in cells:
        paper = PAPER.get((c["dataset"], c["model"]))
        lines.append(
            f"| {c['dataset']} | {c['model']} | {len({r['split'] for r in c['per_seed']})} | "
            f"{_ms(c.get('train_ms_per_epoch'))} | "
            f"{_ms(c.get('eval_ms_per_epoch'))} | "
            f"{_ms(paper and paper[2])} | {_ms(paper and paper[3])} |")
    return "\n".join(lines) + "\n"


def _ms(value) -> str:
    return "–" if value is None else f"{value:.2f}"


EXPERIMENT = NodeClassification()


def parse_config(argv: Sequence[str] | None = None) -> NodeConfig:
    return command.parse_config(EXPERIMENT, argv)


def main(argv: Sequence[str] | None = None) -> int:
    return command.main(EXPERIMENT, argv)


if __name__ == "__main__":  # run the package's module, so run.json names an importable class
    from swan_jax.experiments.node_classification import main as package_main

    sys.exit(package_main())
