"""Graph transfer (paper Sec. "Graph Transfer", Appendices D.1 and E.2, Figure 3).

A value has to travel `k` hops from a source to a target node on line, ring and
crossed-ring graphs. Every model is `Linear(1 -> 64)` -> graph part -> `Linear(64 -> 1)`;
the graph part is a SWAN / ADGN block of `k` Euler steps or `k` baseline layers (tanh,
as in the authors' configuration). The protocol and grid are `configs/transfer.toml`.
All seeds and grid points of one A_hat train as ONE vmapped program.

    python -m swan_jax.experiments.transfer --topology ring --distance 10 --model swan \\
        --epsilon 0.5 --beta 1 --adjacency sym              # one cell, one grid point
    python -m swan_jax.experiments.transfer --all          # the paper's grid (Figure 3)
    python -m swan_jax.experiments.transfer --all --distances 3,5 --epochs 50 \\
        --patience 20 --train-size 200 --seeds 0,1       # a reduced CPU sweep

Writes `results/transfer/results.json`, `table.md` and `transfer.png` (test MSE against
distance); every program checkpoints each epoch and `--resume` continues it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import flax.linen as nn

from swan_jax.config import NO_PSI_VARIANTS, TRACED_FIELDS, VARIANTS
from swan_jax.data.positional import with_positional_encodings
from swan_jax.data.transfer import TOPOLOGIES, beta_matters, hops, load_transfer, transfer_graph
from swan_jax.data.transfer import VARIANTS as DATA_VARIANTS
from swan_jax.experiments import command, report
from swan_jax.experiments.config import SweepConfig, select
from swan_jax.experiments.sweep import Experiment, Task
from swan_jax.gps import GPSEncoder, GPSStack, gps_feature_width
from swan_jax.models import BASELINE_LAYERS, INITS, LinearEncoder, Model, MPNNStack, NodeReadout
from swan_jax.models.gpsconv import GPSConvStack, WithoutFlag
from swan_jax.settings import setting

BASELINES: tuple[str, ...] = tuple(BASELINE_LAYERS)
# Trained like the baselines (a learning-rate grid). GPS is the authors' `GPS_Model`
# (`swan_jax.models.gpsconv`, docs/gps.md): PyG's GPSConv with GCN inside, 2 heads, tanh,
# attention and LayerNorm over the whole batch as their code calls it; its input carries
# the real-node flag. GRAPHGPS, on request: GraphGPS (`swan_jax.gps`) with GIN inside, 4
# heads, LapPE k = 8 in 16 channels, ReLU (the model Figure 3's earlier GPS rows ran with,
# relabelled graphgps in reproductions/).
GPS, GRAPHGPS = "gps", "graphgps"
GPS_MODELS: tuple[str, ...] = (GPS, GRAPHGPS)
MODELS: tuple[str, ...] = VARIANTS + BASELINES + GPS_MODELS
PAPER_MODELS: tuple[str, ...] = ("swan", "adgn", "gcn", "gin", "sage", "gat", GPS)
GPS_HEADS, GPS_GROUP = 2, "batch"
GRAPHGPS_HEADS, GRAPHGPS_LAP_K, GRAPHGPS_PE_DIM = 4, 8, 16
PAPER_DISTANCES: tuple[int, ...] = (3, 5, 10, 50)
# Cells up to this distance train both A_hat in one program (`Transfer.static_axes_of`).
MERGED_MAX_DISTANCE = 10
# The values the authors plot as Figure 3, with their source (the paper prints no table).
AUTHORS_FIGURE3: Path = Path(__file__).parent / "references" / "transfer_figure3.json"


@functools.cache
def authors_figure3() -> dict:
    """`AUTHORS_FIGURE3` read: `values[topology][str(k)][model] = {"mean", "std"}` (test
    MSE; `std` is None where the authors recorded no spread), `source`, the axes."""
    return json.loads(AUTHORS_FIGURE3.read_text())


@dataclasses.dataclass(frozen=True)
class TransferConfig(SweepConfig):
    """Transfer's own settings besides the shared ones (see `configs/transfer.toml`)."""

    # the optimiser's and the SWAN settings a grid may trace (the layers are the distance)
    GRID_AXES = ("learning_rate", "weight_decay", *TRACED_FIELDS)

    topologies: tuple[str, ...] | None = select(None, choices=TOPOLOGIES, flag="--topology",
                                                aliases=("--topologies",),
                                                help="graph topologies (cells)")
    distances: tuple[int, ...] | None = select(None, low=1, flag="--distance",
                                               aliases=("--distances",),
                                               help="source-target hops = SWAN steps = "
                                                    "baseline layers (cells)")
    models: tuple[str, ...] | None = select(None, choices=MODELS, flag="--model",
                                            aliases=("--models",), help="models (cells)")
    hidden: int = setting(64, low=1, help="channels of the encoder, the graph part and the "
                                          "readout")
    sizes: tuple[int, int, int] = setting((1000, 100, 100), low=1,
                                          parts=("train", "val", "test"),
                                          help="graphs per split: train,val,test")
    data_variant: str = setting("paper", choices=DATA_VARIANTS,
                                help="paper: the paper's text; authors: the authors' "
                                     "released sets (copied label, features in [0, 1), k-1 "
                                     "hops)")
    init: str = setting("torch", choices=INITS,
                        help="encoder / readout init: torch (nn.Linear's default, as the "
                             "authors' code) or flax (LeCun normal, zero bias)")

    def __post_init__(self) -> None:
        if self.data_variant not in DATA_VARIANTS:
            raise ValueError(f"data_variant must be one of {DATA_VARIANTS}, got "
                             f"{self.data_variant!r} (CLI: --data-variant)")
        if self.init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {self.init!r} (CLI: --init)")
        if GPS in (self.models or ()) and self.hidden % GPS_HEADS:
            raise ValueError(f"GPS needs hidden divisible by its {GPS_HEADS} heads, got "
                             f"{self.hidden} (CLI: --hidden)")
        if GRAPHGPS in (self.models or ()) and (self.hidden % GRAPHGPS_HEADS
                                                or self.hidden <= GRAPHGPS_PE_DIM):
            raise ValueError(f"GraphGPS needs hidden divisible by its {GRAPHGPS_HEADS} heads "
                             f"and above its {GRAPHGPS_PE_DIM} LapPE channels, got "
                             f"{self.hidden} (CLI: --hidden)")
        super().__post_init__()


class Transfer(Experiment[TransferConfig]):
    name, title, paper_ref = "transfer", "Graph transfer", "the paper's Figure 3"
    Config = TransferConfig
    cell_axes = ("topology", "distance", "model")
    task = Task("mse", "mse", "node")

    def cells(self, cfg: TransferConfig):
        return [{"topology": t, "distance": k, "model": m} for t in cfg.topologies or ()
                for k in cfg.distances or () for m in cfg.models or ()]

    def data_key(self, cfg, cell):
        return cell["topology"], cell["distance"], _lap_k(cell["model"])

    def load_data(self, cfg: TransferConfig, cell):
        """The cell's splits; GPS's with the real-node flag appended, GraphGPS's with
        LapPE (`GRAPHGPS_LAP_K` eigenvectors) and the flag."""
        splits = load_transfer(cell["topology"], cell["distance"], cache_dir=cfg.cache_dir,
                               sizes=cast(tuple[int, int, int], tuple(cfg.sizes)),
                               variant=cfg.data_variant,
                               **cfg.data_options)
        lap_k = _lap_k(cell["model"])
        if lap_k is None:
            return splits
        return {name: with_positional_encodings(data, lap_k=lap_k)
                for name, data in splits.items()}

    def static_axes_of(self, cfg: TransferConfig, cell) -> tuple[str, ...]:
        """Both A_hat in one program up to `MERGED_MAX_DISTANCE` hops, one program each
        beyond: a GPU's short epochs there are kernel launches, which twice the runs per
        call barely lengthen; at k = 50 the step is memory-bound and 64 runs would need
        60 GiB (line) to 118 GiB (crossed ring) by the step's estimate, past an H100."""
        return () if cell["distance"] <= MERGED_MAX_DISTANCE else ("adjacency",)

    def grid(self, cfg: TransferConfig, cell):
        """SWAN / ADGN: the whole grid, both A_hat included, in one program up to 10 hops
        (`static_axes_of`), one per A_hat beyond; baselines: lr only. Beta is left out
        where it cannot matter: variants without Psi, and regular graphs (rings), where
        Psi vanishes and beta-only grid points would train identically (`beta_matters`);
        there the first beta stands for all."""
        if cell["model"] in BASELINES + GPS_MODELS:
            return {"learning_rate": cfg.grid["learning_rate"]}
        axes = dict(cfg.grid)
        if cell["model"] in NO_PSI_VARIANTS:
            axes.pop("beta", None)
        elif "beta" in axes and not beta_matters(cell["topology"], cell["distance"],
                                                 variant=cfg.data_variant):
            axes["beta"] = tuple(axes["beta"])[:1]
        return axes

    def notes(self, cfg: TransferConfig) -> list[str]:
        source = {"paper": "as the paper's text describes them",
                  "authors": "as the authors' released sets"}[cfg.data_variant]
        return [f"data: the {cfg.data_variant} variant ({source})",
                f"encoder / readout initialisation: {cfg.init}"]

    def model_fn(self, cfg: TransferConfig, cell, static):
        """hp -> Linear encoder, `distance` SWAN steps or baseline layers, Linear readout.

        The SWAN block is built from the (traced) hyper-parameters (`swan_block`), so grid
        points that differ in epsilon, gamma, beta, the learning rate or the adjacency
        (where the grid has both, up to `MERGED_MAX_DISTANCE`) share one program: on a
        GPU, where a transfer epoch is
        latency-bound, twice the runs per call cost little more than one program's; on 2
        CPU cores the epoch of both costs 4.5% more than two programs' (one compile
        fewer).
        """
        model, distance = cell["model"], cell["distance"]
        if model == GPS:
            return self._gps_fn(cfg, cell)
        if model == GRAPHGPS:
            return self._graphgps_fn(cfg, cell)

        def model_fn(hp):
            if model in BASELINES:
                processor = MPNNStack(model, cfg.hidden, distance, activation=nn.tanh,
                                      weight_init=cfg.init)
            else:
                processor = self.swan_block(cfg, static, hp, variant=model,
                                            num_layers=distance)
            return Model(LinearEncoder(cfg.hidden, weight_init=cfg.init), processor,
                         NodeReadout((1,), weight_init=cfg.init))

        return model_fn

    def _gps_fn(self, cfg: TransferConfig, cell):
        """hp -> the authors' GPS: a Linear encoder of the features (not the flag),
        `distance` GPSConv layers with tanh after each, a Linear readout."""
        model = Model(WithoutFlag(LinearEncoder(cfg.hidden, weight_init=cfg.init)),
                      GPSConvStack(cell["distance"], heads=GPS_HEADS, group=GPS_GROUP,
                                   weight_init=cfg.init),
                      NodeReadout((1,), weight_init=cfg.init))
        return lambda hp: model

    def _graphgps_fn(self, cfg: TransferConfig, cell):
        """hp -> GraphGPS (`GRAPHGPS_*` settings): LapPE beside a Linear encoder,
        `distance` GPS layers with GIN inside, Linear readout; attention over each
        graph's nodes."""
        graph = transfer_graph(cell["topology"], hops(cell["topology"], cell["distance"],
                                                      cfg.data_variant))
        width = gps_feature_width(cfg.hidden, GRAPHGPS_LAP_K, 0, GRAPHGPS_PE_DIM)
        model = Model(GPSEncoder(LinearEncoder(width, weight_init=cfg.init), GRAPHGPS_LAP_K,
                                 pe_dim=GRAPHGPS_PE_DIM),
                      GPSStack(cfg.hidden, cell["distance"], graph.number_of_nodes(),
                               num_heads=GRAPHGPS_HEADS, local="gine"),
                      NodeReadout((1,), weight_init=cfg.init))
        return lambda hp: model

    def ode_batch(self, cfg: TransferConfig, cell, static):
        """The batch an ODE block integrates: every graph of a cell has the same nodes."""
        if cell["model"] in BASELINES or cell["model"] == GPS:
            return None
        nodes = transfer_graph(cell["topology"], hops(cell["topology"], cell["distance"],
                                                      cfg.data_variant)).number_of_nodes()
        return min(cfg.batch_size, cfg.sizes[0]), nodes, cfg.hidden

    def paper(self, cell):
        """The authors' Figure 3 value (mean, std or None) of the cell, if they plot it."""
        value = authors_figure3()["values"].get(cell["topology"], {}).get(
            str(cell["distance"]), {}).get(cell["model"])
        return None if value is None else (value["mean"], value["std"])

    def plot(self, cells, path: Path) -> bool:
        return plot_distances(cells, path)

    # ---------------------------------------------------------------- command line
    def add_arguments(self, p) -> None:
        p.add_argument("--all", action="store_true",
                       help="the paper's grid: every topology, distance and model not "
                            "narrowed by --topology / --distance / --model")
        for split in ("train", "val", "test"):
            p.add_argument(f"--{split}-size", type=positive_int, default=None,
                           help=f"graphs in the {split} split (a shortcut for one of --sizes)")

    def apply_arguments(self, args, cfg: TransferConfig, error) -> TransferConfig:
        changes: dict[str, Any] = {}
        if args.variant:
            changes["models"] = tuple(dict.fromkeys((args.models or ()) + args.variant))
        if args.all:
            paper = {"topologies": TOPOLOGIES, "distances": PAPER_DISTANCES,
                     "models": PAPER_MODELS}
            changes.update({k: v for k, v in paper.items()
                            if not (changes.get(k) or getattr(cfg, k))})
        cfg = dataclasses.replace(cfg, **changes)
        if not all((cfg.topologies, cfg.distances, cfg.models)):
            error("give --topology, --distance and --model (or --variant), or --all")
        sizes = tuple(new or old for new, old in zip(
            (args.train_size, args.val_size, args.test_size), cfg.sizes, strict=True))
        return dataclasses.replace(cfg, sizes=cast(tuple[int, int, int], sizes))


def _lap_k(model: str) -> int | None:
    """LapPE eigenvectors the model's data carry: None for plain data, 0 for the
    real-node flag alone (GPS), `GRAPHGPS_LAP_K` for GraphGPS."""
    return {GPS: 0, GRAPHGPS: GRAPHGPS_LAP_K}.get(model)


def positive_int(text: str) -> int:
    """A split size: an integer >= 1 (argparse `type=`)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def plot_distances(cells: Sequence[dict], path: Path) -> bool:
    """Test MSE against distance (log y), one panel per topology, one line per model
    (dashed beside it: the authors' Figure 3 value, where the cells carry it)."""
    from matplotlib.ticker import NullLocator

    topologies = [t for t in TOPOLOGIES if any(c["topology"] == t for c in cells)]
    if not topologies:
        return False
    models = list(dict.fromkeys(c["model"] for c in cells))
    fig = report.figure(figsize=(4.5 * len(topologies), 3.6))  # no pyplot state
    axes = fig.subplots(1, len(topologies), squeeze=False, sharey=True)
    for ax, topology in zip(axes[0], topologies, strict=True):
        for model in models:
            rows = sorted((c["distance"], c["test_mean"], c["test_std"]) for c in cells
                          if c["topology"] == topology and c["model"] == model
                          and math.isfinite(c["test_mean"]))
            if not rows:
                continue
            k, mean, std = zip(*rows, strict=True)
            line, = ax.plot(k, mean, marker="o", label=model.upper())
            low = [max(m - s, m * 1e-2) for m, s in zip(mean, std, strict=True)]
            high = [m + s for m, s in zip(mean, std, strict=True)]
            ax.fill_between(k, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
            theirs = sorted((c["distance"], c["paper"][0]) for c in cells
                            if c["topology"] == topology and c["model"] == model
                            and c.get("paper"))
            if theirs:
                ax.plot(*zip(*theirs, strict=True), linestyle="--", marker="s", markersize=3,
                        color=line.get_color(), alpha=0.7)
        ax.set_yscale("log")
        ax.set_xscale("log")
        distances = sorted({c["distance"] for c in cells})
        ax.set_xticks(distances, [str(d) for d in distances])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_title(topology.replace("-", " ").title())
        ax.set_xlabel("distance k (hops)")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("test MSE")
    if axes[0][-1].get_legend_handles_labels()[0]:  # none where every cell diverged
        axes[0][-1].legend(fontsize=8, loc="best")
    fig.suptitle("Graph transfer: test MSE vs distance\n(squares, dashed: the authors' "
                 "Figure 3)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    return True


EXPERIMENT = Transfer()


def parse_config(argv: Sequence[str] | None = None) -> TransferConfig:
    return command.parse_config(EXPERIMENT, argv)


def main(argv: Sequence[str] | None = None) -> int:
    return command.main(EXPERIMENT, argv)


if __name__ == "__main__":  # run the package's module, so run.json names an importable class
    from swan_jax.experiments.transfer import main as package_main

    sys.exit(package_main())
