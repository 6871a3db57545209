"""Where the GraphProp plateau ends: learning curves of ADGN and SWAN on the paper's "SSSP"
column (the Laplacian features, `paper` label setting, full data), reduced to the optimiser
step at which each run leaves the plateau (issue 37; the report is REPORT.md beside
this file).

The plateau: a model first fits the positive half of the targets and sits near the error
of predicting every negative target as 0, `level = log10 mean_g mean_{i in g} min(y_i, 0)^2`
(val 0.592 on the full data). A run has left it at the first epoch whose validation log10
MSE is `MARGIN` below that level (an MSE 21% lower); steps = (epoch + 1) x 10 (5,120
training graphs in batches of 512). A run that never gets there within its epochs is
reported as not leaving: the claim can fail.

    python -m reproductions.graphprop-plateau.study --program DIR [--program DIR ...] \\
        [--earlier /work/shared/measurements/2026-11-28-cpu/graphprop-budget] \\
        --cache-dir CACHE [--out FOLDER]

`--program`: a sweep's program folder (its `run.json` names each run's grid point and
seed, `history.csv` holds the curves: `--tracker csv`). `--earlier`: the 1,500-epoch
measurement of 2026-11-28 (ADGN and SWAN, 5 layers, epsilon 1 and 0.1), whose folder keeps
the CSVs without run.json (`EARLIER` describes them). `--out`: where `plateau.json`,
`curves.csv` and `curves.png` go (default: beside this file, the committed ones).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path

import numpy as np

from swan_jax.data import graphprop

OUT = Path(__file__).resolve().parent
MARGIN = 0.1  # log10 MSE below the plateau level that counts as having left it
STEPS_PER_EPOCH = 10  # 5,120 training graphs, batch 512
SCREEN_EPOCHS = (50, 100, 200, 300)  # budgets whose choice of grid point is checked
EARLIER = {  # file -> model, static point and each run's numeric point (run0, run1)
    "adgn_eps1_eps0.1_1500_history.csv": ("adgn", {"epsilon": 1.0}, {"epsilon": 0.1}),
    "swan_eps1_eps0.1_1500_history.csv": ("swan", {"epsilon": 1.0}, {"epsilon": 0.1}),
}
EARLIER_POINT = {"hidden": 30, "num_layers": 5, "adjacency": "sym", "gamma": 0.1,
                 "seed": 0}


def plateau_level(cache_dir: str | None) -> dict[str, float]:
    """Per split, log10 of the error of predicting every negative target as 0 (exact
    elsewhere), averaged as the score is (node means, then graphs)."""
    splits = graphprop.load_graphprop("sssp", labels="paper", cache_dir=cache_dir)
    out = {}
    for split in ("val", "test"):
        data = splits[split]
        y = data.node_targets[:, :1].astype(np.float64)
        per_graph = graphprop.per_graph_squared_error(np.maximum(y, 0), y, data.n_node)
        out[split] = math.log10(float(np.mean(per_graph)))
    return out


def _read_csv(path: Path) -> list[dict[str, float]]:
    with path.open() as f:
        return [{k: float(v) for k, v in row.items() if v != ""} for row in csv.DictReader(f)]


def program_runs(folder: Path, source: str) -> list[dict]:
    """One dict per run of a program folder: its point, seed and curves."""
    meta = json.loads((folder / "run.json").read_text())
    static = meta["description"].get("static", {}) if meta.get("description") else {}
    model = meta["description"]["cell"]["model"] if meta.get("description") else "?"
    rows = _read_csv(folder / "history.csv")
    runs = []
    for r in meta["runs"]:
        key = f"/run{r['run']}" if len(meta["runs"]) > 1 else ""
        runs.append({"model": model, "source": source, "earlier": False, "seed": r["seed"],
                     "point": {**static, **r["hparams"]},
                     "val": [row[f"val{key}"] for row in rows],
                     "test": [row[f"test{key}"] for row in rows]})
    return runs


def _until_stopped(values: list[float]) -> list[float]:
    """A curve without the constant tail a run stopped by patience leaves in its
    program's CSV (its best epoch's values repeated)."""
    last = len(values) - 1
    while last > 0 and values[last] == values[last - 1]:
        last -= 1
    return values[:last + 1] if last < len(values) - 2 else values


def earlier_runs(folder: Path) -> list[dict]:
    rows_of = {name: _read_csv(folder / name) for name in EARLIER if (folder / name).exists()}
    runs = []
    for name, rows in rows_of.items():
        model, *points = EARLIER[name]
        for i, point in enumerate(points):
            val = _until_stopped([row[f"val/run{i}"] for row in rows])
            runs.append({"model": model, "source": f"{folder.name}/{name}", "earlier": True,
                         "seed": EARLIER_POINT["seed"],
                         "point": {**{k: v for k, v in EARLIER_POINT.items() if k != "seed"},
                                   **point},
                         "val": val, "test": [row[f"test/run{i}"] for row in rows][:len(val)]})
    return runs


def _same_point(a: dict, b: dict) -> bool:
    keys = ("num_layers", "hidden", "adjacency", "epsilon", "gamma")
    return (a["model"], a["seed"]) == (b["model"], b["seed"]) and all(
        a["point"].get(k) == b["point"].get(k) for k in keys)


def split_repeats(runs: list[dict]) -> tuple[list[dict], list[dict]]:
    """Runs of this measurement at an earlier run's point and seed are repeats: each is
    checked against the earlier curve (same epochs, same values: the training is
    deterministic) and kept out of the curves. Returns (runs, repeat checks)."""
    earlier = [r for r in runs if r["earlier"]]
    kept, checks = [], []
    for run in runs:
        twin = next((e for e in earlier if not run["earlier"] and _same_point(run, e)),
                    None)
        if twin is None:
            kept.append(run)
            continue
        n = len(run["val"])
        diff = float(np.max(np.abs(np.asarray(run["val"]) - np.asarray(twin["val"][:n]))))
        checks.append({"model": run["model"], "point": run["point"], "epochs": n,
                       "earlier": twin["source"], "max_abs_val_difference": diff})
    return kept, checks


def exit_epoch(val: list[float], threshold: float) -> int | None:
    """The first epoch whose validation score is below `threshold` (None: never)."""
    below = np.flatnonzero(np.asarray(val) < threshold)
    return int(below[0]) if len(below) else None


def summarise(run: dict, level: dict[str, float]) -> dict:
    threshold = level["val"] - MARGIN
    epoch = exit_epoch(run["val"], threshold)
    val = np.asarray(run["val"])
    best = int(np.argmin(val))
    return {"model": run["model"], "point": run["point"], "seed": run["seed"],
            "source": run["source"], "epochs": len(val),
            "exit_epoch": epoch,
            "exit_step": None if epoch is None else (epoch + 1) * STEPS_PER_EPOCH,
            "best_val": float(val[best]), "best_epoch": best,
            "test_at_best_val": float(run["test"][best]),
            # a run stopped by patience before a budget keeps its best: val[:e] is all of it
            "best_val_within": {str(e): float(val[:e].min()) for e in SCREEN_EPOCHS}}


def ranking_checks(summaries: list[dict]) -> list[dict]:
    """Per group of runs of one model and source (one program): does the best validation
    score within a screen budget pick the point the whole runs pick? Budgets shorter than
    the longest run only."""
    groups: dict[tuple, list[dict]] = {}
    for s in summaries:
        groups.setdefault((s["model"], s["source"]), []).append(s)
    out = []
    for (model, source), members in groups.items():
        epochs = max(s["epochs"] for s in members)
        if len(members) < 2:
            continue
        final = min(members, key=lambda s: s["best_val"])
        for budget in SCREEN_EPOCHS:
            if budget >= epochs:
                continue
            chosen = min(members, key=lambda s: s["best_val_within"][str(budget)])
            out.append({"model": model, "source": source, "epochs": epochs,
                        "screen_epochs": budget, "runs": len(members),
                        "screen_picks_the_final_best": chosen is final})
    return out


def write_curves(runs: list[dict], path: Path) -> None:
    """Every run's curve; every epoch up to 300, then every 10th (the file stays small)."""
    keys = ("model", "num_layers", "hidden", "adjacency", "epsilon", "gamma", "seed")
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*keys, "source", "epoch", "step", "val_log10_mse", "test_log10_mse"])
        for run in runs:
            p = {**run["point"], "model": run["model"], "seed": run["seed"]}
            for e, (v, t) in enumerate(zip(run["val"], run["test"], strict=True)):
                if e < 300 or e % 10 == 9:
                    w.writerow([p.get(k) for k in keys] + [run["source"], e,
                                                          (e + 1) * STEPS_PER_EPOCH,
                                                          f"{v:.5f}", f"{t:.5f}"])


def plot(runs: list[dict], level: dict[str, float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, model in zip(axes, ("adgn", "swan"), strict=True):
        for run in (r for r in runs if r["model"] == model):
            p = run["point"]
            steps = (np.arange(len(run["val"])) + 1) * STEPS_PER_EPOCH
            ax.plot(steps, run["val"], lw=1,
                    label=f"L{p.get('num_layers')} eps {p.get('epsilon'):g} "
                          f"gamma {p.get('gamma'):g}"
                          + (" (earlier)" if run["earlier"] else ""))
        ax.axhline(level["val"], color="gray", ls="--", lw=1,
                   label="plateau: negatives predicted as 0")
        ax.axhline(level["val"] - MARGIN, color="gray", ls=":", lw=1,
                   label=f"left the plateau ({MARGIN} below)")
        ax.set_xscale("log")
        ax.set_title(f"{model.upper()}, 'SSSP' (Laplacian features), hidden 30, A_hat sym")
        ax.set_xlabel("optimiser steps (batch 512)")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("validation log10 MSE (graph means)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m reproductions.{OUT.name}.study",
                                description=__doc__.splitlines()[0])
    p.add_argument("--program", action="append", type=Path, default=[])
    p.add_argument("--earlier", type=Path, default=None)
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    runs = [r for folder in args.program for r in program_runs(folder, folder.name)]
    if args.earlier is not None:
        runs += earlier_runs(args.earlier)
    if not runs:
        p.error("no runs: pass --program folders (with run.json and history.csv)")
    runs, repeats = split_repeats(runs)
    level = plateau_level(args.cache_dir)
    args.out.mkdir(parents=True, exist_ok=True)
    summaries = [summarise(r, level) for r in runs]
    payload = {"plateau_level": level, "margin": MARGIN, "steps_per_epoch": STEPS_PER_EPOCH,
               "runs": summaries, "ranking": ranking_checks(summaries), "repeats": repeats}
    (args.out / "plateau.json").write_text(json.dumps(payload, indent=1) + "\n")
    write_curves(runs, args.out / "curves.csv")
    plot(runs, level, args.out / "curves.png")
    for s in summaries:
        print(f"{s['model']:5} L{s['point'].get('num_layers')} eps {s['point']['epsilon']:g} "
              f"gamma {s['point']['gamma']:g}: left at step {s['exit_step']} "
              f"(epoch {s['exit_epoch']} of {s['epochs']}); best val {s['best_val']:.3f} "
              f"(epoch {s['best_epoch']}), test {s['test_at_best_val']:.3f}")
    for r in payload["ranking"] + repeats:
        print(r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
