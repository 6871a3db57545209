"""LRGB (paper Table 2): SWAN and SWAN-learn on Peptides-func, Peptides-struct, PascalVOC-SP.

    python -m swan_jax.experiments.lrgb --dataset peptides-func --variant swan-learn --seeds 0,1,2
    python -m swan_jax.experiments.lrgb --all --resume      # every cell (make reproduce-lrgb)
    python -m swan_jax.experiments.lrgb --dataset peptides-func --grid full  # the paper's grid
    python -m swan_jax.experiments.lrgb --dataset peptides-func --limit 200 --epochs 2  # a look
    python -m swan_jax.experiments.lrgb --dataset peptides-func \
        --variant swan-beta0,swan-ne,swan-learn-ne     # the ablation's rows (tab:importance)

The configuration run is data: `configs/lrgb.toml` (our pick from the paper's grid, which
the paper does not publish per cell) and `configs/lrgb-full.toml` (the paper's grid);
`--config FILE` runs your own. Raw files are read from `--data-dir` ($SWAN_DATA_DIR),
downloaded with an md5 check when absent; a missing data set stops the run before any
training unless `--skip-missing`. The test metric is read at each run's best validation
epoch; the model is held to LRGB's 500k parameters.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from swan_jax.config import TRACED_FIELDS, VARIANTS
from swan_jax.data.errors import missing_report
from swan_jax.encoders import AtomEncoder, LinearNodeEncoder
from swan_jax.experiments import command, report
from swan_jax.experiments.config import CONFIG_DIR, SweepConfig, io, load_toml, select
from swan_jax.experiments.sweep import Experiment, Task
from swan_jax.models import GraphReadout, Model, NodeReadout
from swan_jax.settings import setting


@dataclasses.dataclass(frozen=True)
class Dataset:
    loader: str  # function of swan_jax.data.lrgb
    task: Task
    outputs: int
    encoder: str  # "atom" (OGB AtomEncoder on the 9 atom codes) or "linear" (VOC's 14 floats)
    percent: bool  # the paper reports the metric x 100 (AP, F1)


DATASETS: dict[str, Dataset] = {
    "peptides-func": Dataset("load_peptides_func", Task("bce", "ap", "graph"), 10, "atom",
                             True),
    "peptides-struct": Dataset("load_peptides_struct", Task("l1", "mae", "graph"), 11, "atom",
                               False),
    "pascalvoc-sp": Dataset("load_pascalvoc_sp", Task("weighted_ce", "f1", "node"), 21,
                            "linear", True),
}
RUN_VARIANTS = ("swan", "swan-learn")  # the default; --variant takes every SWAN variant
ABLATION_VARIANTS = ("swan-beta0", "swan-ne", "swan-learn-ne")  # Table 3 (tab:importance)
VOC_FEATURES = ("raw", "standardized")

# The paper's values (mean over 3 seeds; AP and F1 in percent): Table 2 and Table 3's
# Peptides rows.
PAPER_VALUES: dict[tuple[str, str], tuple[float, float]] = {
    ("peptides-func", "swan"): (63.13, 0.46),
    ("peptides-struct", "swan"): (0.2571, 0.0018),
    ("pascalvoc-sp", "swan"): (27.96, 0.48),
    ("peptides-func", "swan-learn"): (67.51, 0.39),
    ("peptides-struct", "swan-learn"): (0.2485, 0.0009),
    ("pascalvoc-sp", "swan-learn"): (31.92, 2.50),
    # the ablation's Peptides rows (tab:importance): `--variant swan-beta0,swan-ne,...`
    ("peptides-func", "swan-beta0"): (61.95, 0.67),
    ("peptides-func", "swan-ne"): (61.19, 0.37),
    ("peptides-func", "swan-learn-ne"): (62.49, 0.51),
    ("peptides-struct", "swan-beta0"): (0.2703, 0.0023),
    ("peptides-struct", "swan-ne"): (0.2672, 0.0012),
    ("peptides-struct", "swan-learn-ne"): (0.2606, 0.0007),
}


@dataclasses.dataclass(frozen=True)
class LRGBConfig(SweepConfig):
    """LRGB's own settings besides the shared ones (see `configs/lrgb.toml`)."""

    GRID_AXES = ("learning_rate", "weight_decay", "num_layers", "hidden", *TRACED_FIELDS)

    datasets: tuple[str, ...] | None = select(None, choices=tuple(DATASETS), flag="--dataset",
                                              help="the data sets (cells)")
    variants: tuple[str, ...] = select(RUN_VARIANTS, choices=VARIANTS, flag="--variant",
                                       help="the SWAN variants (cells)")
    grid_name: str = io("paper", help="the grid's name, for the notes (--grid sets it)")
    data_dir: Path | None = io(None, help="raw files (default $SWAN_DATA_DIR, else data/)")
    download: bool = io(True, help="download missing raw files (md5-checked)")
    download_dir: Path | None = io(None, help="where missing raw files are downloaded "
                                              "(default $SWAN_DOWNLOAD_DIR, else "
                                              "~/.cache/swan-jax); the data folder is only "
                                              "read")
    verify_md5: bool = setting(True, help="check raw files against the official md5 (off: "
                                          "accept files of your own)")
    voc_features: str = setting("raw", choices=VOC_FEATURES,
                                help="PascalVOC-SP node features: raw (LRGB's baselines) or "
                                     "standardized with the training split's mean and std")
    limit: int | None = setting(None, low=1, help="only the first K raw rows (peptides) / "
                                                  "graphs per split (VOC)")
    skip_bad_rows: bool = setting(False, help="drop malformed CSV rows (each is reported) "
                                              "instead of stopping")


def _axes(grid) -> dict[str, tuple]:
    """A grid's axes, each as a tuple of its values (comparable however they were read)."""
    return {k: tuple(v) for k, v in grid.items()}


def readout_features(hidden: int, outputs: int) -> tuple[int, ...]:
    return (hidden, hidden // 2, outputs)


class LRGB(Experiment[LRGBConfig]):
    name, title, paper_ref = "lrgb", "LRGB", "the paper's Table 2"
    Config = LRGBConfig
    cell_axes = ("dataset", "variant")
    static_axes = ("num_layers", "hidden", "adjacency")
    max_params = 500_000  # LRGB's rule; --allow-more-params lifts it

    def cells(self, cfg: LRGBConfig):
        return [{"dataset": d, "variant": v} for d in cfg.datasets or () for v in cfg.variants]

    def data_key(self, cfg, cell):
        return cell["dataset"]

    def task_for(self, cfg, cell) -> Task:
        return DATASETS[cell["dataset"]].task

    def missing_data(self, cfg: LRGBConfig, cell) -> str | None:
        """Every raw file the cell needs, downloaded when allowed, checked before training."""
        from swan_jax.data import lrgb as data

        missing = data.ensure_available([cell["dataset"]], cfg.data_dir, cfg.download_dir,
                                        download=cfg.download, verify_md5=cfg.verify_md5)
        if not missing:
            return None
        return missing_report(missing)  # the full text; `short` and `details` for a sweep

    def load_data(self, cfg: LRGBConfig, cell):
        from swan_jax.data import lrgb as data

        kwargs: dict[str, Any] = {"data_dir": cfg.data_dir, "cache_dir": cfg.cache_dir,
                                  "download_dir": cfg.download_dir, "limit": cfg.limit,
                                  "progress": cfg.progress, "verify_md5": cfg.verify_md5,
                                  "download": cfg.download, **cfg.data_options}
        if cell["dataset"] == "pascalvoc-sp":
            kwargs["standardize"] = cfg.voc_features == "standardized"
        else:
            kwargs["skip_bad_rows"] = cfg.skip_bad_rows
        return getattr(data, DATASETS[cell["dataset"]].loader)(**kwargs)

    def model_fn(self, cfg: LRGBConfig, cell, static):
        """hp (numeric, possibly traced) -> encoder -> SWAN ODE block -> readout."""
        dataset = DATASETS[cell["dataset"]]
        hidden = int(static["hidden"])

        def model_fn(hp):
            encoder = (AtomEncoder(hidden) if dataset.encoder == "atom"
                       else LinearNodeEncoder(hidden))
            head = readout_features(hidden, dataset.outputs)
            readout = (GraphReadout(head, pooling=("mean",)) if dataset.task.level == "graph"
                       else NodeReadout(head))
            return Model(encoder, self.swan_block(cfg, static, hp, variant=cell["variant"]),
                         readout)

        return model_fn

    def paper(self, cell):
        return PAPER_VALUES.get((cell["dataset"], cell["variant"]))

    def scale(self, cell) -> float:
        return 100.0 if DATASETS[cell["dataset"]].percent else 1.0

    def departures(self, cfg: LRGBConfig) -> list[str]:
        """How `cfg` departs from the paper's protocol (as `configs/lrgb.toml` runs it:
        the whole data sets, 300 epochs, 3 seeds, batch 64, its grid point or the
        paper's grid of `lrgb-full.toml`), in a few words each."""
        paper, out = self.default_config(), []
        if cfg.limit:
            voc = "pascalvoc-sp" in (cfg.datasets or ())
            out.append(f"only the first {cfg.limit:,} molecules, split as officially"
                       + (f" (PascalVOC-SP: {cfg.limit:,} graphs per split)" if voc else ""))
        if cfg.epochs != paper.epochs:
            out.append(f"{cfg.epochs} epoch(s), not {paper.epochs}")
        if len(cfg.seeds) < len(paper.seeds):
            out.append(f"{len(cfg.seeds)} seed(s), not {len(paper.seeds)}")
        if cfg.batch_size != paper.batch_size:
            out.append(f"batch {cfg.batch_size}, not {paper.batch_size}")
        grids = [_axes(paper.grid), _axes(load_toml(LRGBConfig, CONFIG_DIR / "lrgb-full.toml")
                                          .grid)]
        if _axes(cfg.grid) not in grids:
            changed = {k: v for k, v in _axes(cfg.grid).items() if grids[0].get(k) != v}
            out.append("grid " + ", ".join(f"{k} {list(v)}" for k, v in changed.items()))
        return out

    def notes(self, cfg: LRGBConfig) -> list[str]:
        notes = [f"grid {cfg.grid_name}"]
        if cfg.datasets and "pascalvoc-sp" in cfg.datasets:
            notes.append(f"PascalVOC-SP node features: {cfg.voc_features}")
        departures = self.departures(cfg)
        return notes + ([f"NOT the paper's protocol: {', '.join(departures)}"]
                        if departures else [])

    def extra_results(self, cfg: LRGBConfig) -> dict[str, Any]:
        """Whether the numbers follow the paper's protocol, and how they do not."""
        departures = self.departures(cfg)
        return {"protocol": {"paper": not departures, "departures": departures}}

    def table(self, cfg: LRGBConfig, cells, skipped) -> str:
        """The shared table; a run off the paper's protocol says so beside each number."""
        departures = self.departures(cfg)
        beside = (f"(**not the paper's protocol**: {', '.join(departures)})"
                  if departures else "")
        return report.table(self, cfg, cells, skipped, beside=beside)

    # ---------------------------------------------------------------- command line
    def add_arguments(self, p) -> None:
        # the grid's name follows --grid (and a TOML file's grid_name): not a flag to show
        p._option_string_actions["--grid-name"].help = argparse.SUPPRESS
        p.add_argument("--all", action="store_true",
                       help="every data set (narrowed by --dataset when given)")
        p.add_argument("--grid", choices=("paper", "full"), default=None,
                       help="paper: configs/lrgb.toml (the selected point); full: "
                            "configs/lrgb-full.toml (the paper's grid)")

    def base_config(self, args) -> LRGBConfig:
        if args.grid == "full":
            return load_toml(LRGBConfig, CONFIG_DIR / "lrgb-full.toml")
        return self.default_config()

    def apply_arguments(self, args, cfg: LRGBConfig, error) -> LRGBConfig:
        if args.all and args.datasets is None:
            cfg = dataclasses.replace(cfg, datasets=tuple(DATASETS))
        if not cfg.datasets:
            error("name a --dataset or pass --all")
        return cfg


EXPERIMENT = LRGB()


def parse_config(argv=None) -> LRGBConfig:
    return command.parse_config(EXPERIMENT, argv)


def main(argv=None) -> int:
    return command.main(EXPERIMENT, argv)


if __name__ == "__main__":  # run the package's module, so run.json names an importable class
    from swan_jax.experiments.lrgb import main as package_main

    sys.exit(package_main())
