"""The paper's Jacobian figure (fig:jacobian_over_time, Appendix I), measured here: the
relative change of the Jacobian between consecutive layers of a trained SWAN and a
trained GCN on Peptides-func, beside the paper's averages (SWAN about 0.6%, GCN 40%).

    python -m reproductions.jacobian                         # -> reproductions/jacobian-<kind>/
    python -m reproductions.jacobian --limit 1500 --epochs 5  # a reduced run (say so beside it)

Both models are the LRGB experiment's packaged point (`benchmarks.common.lrgb_model`;
`--hidden`, `--layers`, SWAN's `--epsilon`: LRGB's 1, the paper's grid also has 0.01),
trained `--epochs` epochs on the first `--limit` raw rows (default: all). On the `--graphs`
smallest test graphs (dense `[N d, N d]` Jacobians), with `swan_jax.analysis`: SWAN's field
Jacobian `J(l)` at each layer's state (the paper's `J(t)`) and its Euler layer map
`I + epsilon J(l)`, GCN's layer map; then `||J(l) - J(l-1)||_F / ||J(l-1)||_F` per layer
(`jacobian_drift`). The paper does not say which graphs, norm or training length.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import swan_jax.analysis as sa
from benchmarks.common import lrgb_model, machine
from reproduce.device import device_kind
from reproduce.results import figures
from reproduce.results.store import output_arguments, write_run
from swan_jax.data import load_peptides_func
from swan_jax.data.errors import DataError
from swan_jax.train import TrainConfig, train

EXPERIMENT = "jacobian"  # reproduce.results.store.JACOBIAN
MODELS = ("swan", "gcn")
FULL_EPOCHS = 300  # the LRGB protocol's epochs (configs/lrgb.toml): a "full" run


@dataclasses.dataclass(frozen=True)
class Setting:
    """What one measurement does (the results' `config`)."""
    epochs: int = FULL_EPOCHS
    limit: int | None = None  # only the first K raw Peptides rows (None: the whole set)
    graphs: int = 3  # the smallest test graphs the Jacobians are taken on
    hidden: int = 128
    layers: int = 5
    epsilon: float = 1.0  # SWAN's step (LRGB's packaged point; the paper's grid: 1, 0.01)
    seed: int = 0

    def problem(self) -> tuple[str, str] | None:
        for name in ("epochs", "graphs", "hidden", "layers"):
            if getattr(self, name) < 1:
                return name, f"must be at least 1 (got {getattr(self, name)})"
        if not self.epsilon > 0:
            return "epsilon", f"must be > 0 (got {self.epsilon})"
        if self.limit is not None and self.limit < 10:
            return "limit", f"must be at least 10 raw rows (got {self.limit})"
        return None


def load_splits(setting: Setting):
    return load_peptides_func(os.environ.get("SWAN_DATA_DIR"), download=False,
                              progress=False, limit=setting.limit)


def build_model(kind: str, setting: Setting):
    model = lrgb_model(kind, hidden=setting.hidden, layers=setting.layers)
    if kind != "swan":
        return model
    block = model.processor
    return model.clone(processor=block.clone(cfg=block.cfg.replace(epsilon=setting.epsilon)))


def train_model(kind: str, splits, setting: Setting, work: Path, on_epoch_end=None
                ) -> tuple[Any, dict[str, Any]]:
    """(variables at the best validation epoch, its report); resumes from `work/<kind>`."""
    model = build_model(kind, setting)
    cfg = TrainConfig(batch_size=64, optimizer="adamw", learning_rate=1e-3, loss="bce",
                      metric="ap", task_level="graph", epochs=setting.epochs, patience=None,
                      seeds=(setting.seed,), progress=False, quiet=True,
                      checkpoint_dir=str(work / kind), resume=True,
                      on_epoch_end=on_epoch_end)
    result = train(lambda hp: model, splits, cfg, ({},))
    run = result.runs[0]
    variables = jax.tree_util.tree_map(lambda leaf: leaf[0], result.best_params)
    return variables, {"epochs": result.epochs_completed, "val_ap": run.get("val_at_best"),
                       "test_ap": run.get("test"), "best_epoch": run.get("best_epoch"),
                       "params": result.num_params, "wall_s": result.wall_time}


def relative_changes(kind: str, model, variables: Mapping[str, Any], graph
                     ) -> dict[str, list[float]]:
    """Per layer l = 1..L-1, the relative change of SWAN's `field` and `layer_map`
    Jacobians, or GCN's `layer_map`, on one graph."""
    x0 = sa.encoded_input(model, variables, graph)
    if kind == "gcn":
        maps = sa.mpnn_layer_maps(model.processor, variables["params"]["processor"], graph)
        return {"layer_map": _floats(sa.jacobian_drift(sa.layer_map_jacobians(maps, x0)))}
    params, cfg = sa.swan_field_params(variables), model.processor.cfg
    field = sa.swan_layer_jacobians(params, graph, x0, cfg)
    # `swan_layer_jacobians(..., layer_map=True)` is this very sum: one solve, not two
    layer_map = jnp.eye(field.shape[-1], dtype=field.dtype) + cfg.epsilon * field
    return {"field": _floats(sa.jacobian_drift(field)),
            "layer_map": _floats(sa.jacobian_drift(layer_map))}


def _floats(values) -> list[float]:
    return [float(v) for v in np.asarray(values)]


def _summary(per_graph: Sequence[Mapping[str, list[float]]]) -> dict[str, Any]:
    out = {}
    for key in per_graph[0]:
        table = np.asarray([g[key] for g in per_graph])  # [graphs, L - 1]
        out[key] = {"per_layer": _floats(table.mean(axis=0)), "mean": float(table.mean()),
                    "per_graph": table.tolist()}
    return out


def measure(setting: Setting, work: Path, *, splits=None, on_epoch_end=None
            ) -> dict[str, Any]:
    started = time.time()
    splits = splits if splits is not None else load_splits(setting)
    order = np.argsort(np.asarray(splits["test"].n_node), kind="stable")
    chosen = [int(i) for i in order[:setting.graphs]]  # the smallest test graphs
    models: dict[str, Any] = {}
    for kind in MODELS:
        print(f"jacobian: training {kind} for {setting.epochs} epoch(s) ...", flush=True)
        variables, trained = train_model(kind, splits, setting, work, on_epoch_end)
        model = build_model(kind, setting)
        print(f"jacobian: {kind}: Jacobians on {len(chosen)} graph(s) ...", flush=True)
        per_graph = [relative_changes(kind, model, variables, splits["test"][i])
                     for i in chosen]
        models[kind] = {"training": trained, **_summary(per_graph)}
    return {"experiment": EXPERIMENT, "cells": [], "machine": machine(),
            "config": dataclasses.asdict(setting),
            "graphs": {"train": len(splits["train"]), "val": len(splits["val"]),
                       "test": len(splits["test"]), "measured": chosen,
                       "measured_nodes": [int(splits["test"].n_node[i]) for i in chosen]},
            "models": models, "load_average": os.getloadavg(), "wall_s": time.time() - started}


def draw(record: Mapping[str, Any], path: Path) -> Path:
    """Per layer, each model's relative change, on linear and log scales (as the paper)."""
    fig, axes = figures.subplots(2, 4.5, 3.4)
    lines = [("gcn", "layer_map", "GCN (layer map)"), ("swan", "field", "SWAN (field J(t))"),
             ("swan", "layer_map", "SWAN (Euler layer map)")]
    for ax, scale in zip(axes[0], ("linear", "log"), strict=True):
        for kind, key, label in lines:
            values = record["models"].get(kind, {}).get(key)
            if values:
                layers = np.arange(1, len(values["per_layer"]) + 1)
                ax.plot(layers, values["per_layer"], marker="o", label=label)
                ax.set_xticks(layers)
        ax.set(yscale=scale, xlabel="layer l", ylabel="||J(l) - J(l-1)|| / ||J(l-1)||",
               title=f"{'Arithmetic' if scale == 'linear' else 'Logarithmic'} scale")
    if axes[0][0].lines:
        axes[0][0].legend(fontsize=8)
    config = record.get("config") or {}
    fig.suptitle(f"Peptides-func, SWAN epsilon {config.get('epsilon', 1.0):g}, "
                 f"{config.get('epochs', '?')} epochs"
                 + (f" on the first {config['limit']} raw rows" if config.get("limit") else "")
                 + f", {len(record.get('graphs', {}).get('measured', []))} test graphs",
                 fontsize=9)
    fig.tight_layout()
    figures.save(fig, path)
    return path


FIGURE = "jacobian.png"


def write(out: Path, record: dict[str, Any], source: str) -> None:
    write_run(out, record, source)
    draw(record, out / FIGURE)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reproductions.jacobian", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    for field in dataclasses.fields(Setting):  # --epochs, --limit, ... (Setting's comments)
        p.add_argument("--" + field.name.replace("_", "-"), default=field.default,
                       type=int if field.name == "limit" else type(field.default),
                       help=f"default {field.default}")
    output_arguments(p, EXPERIMENT)
    p.add_argument("--work", type=Path, default=None,
                   help="checkpoints of the training (default: a temporary folder)")
    args = p.parse_args(argv)
    setting = Setting(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Setting)})
    problem = setting.problem()
    if problem:
        p.error(f"--{problem[0].replace('_', '-')} {problem[1]}")
    out = args.out or args.reproductions / f"{EXPERIMENT}-{device_kind()}"
    try:
        splits = load_splits(setting)
    except DataError as err:  # a missing or bad raw file: its own one line
        p.exit(2, f"python -m reproductions.jacobian: {str(err).splitlines()[0]}\n")
    with tempfile.TemporaryDirectory() as tmp:
        record = measure(setting, args.work or Path(tmp), splits=splits)
    if args.note:
        record["note"] = args.note
    write(out, record, "python -m reproductions.jacobian " + " ".join(argv or sys.argv[1:]))
    means = ", ".join(f"{k} {100 * v[key]['mean']:.3g}%" for k, v in record["models"].items()
                      for key in v if key != "training")
    print(f"jacobian: wrote {out / 'results.json'} and {out / FIGURE} (mean relative "
          f"change: {means})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
