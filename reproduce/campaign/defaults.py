"""The default plan (`plan --write`): the paper's cells, their sweeps and their costs.

Costs are wall minutes of a cell's full protocol with every program run to its epoch cap
(early stopping only shortens it). Where a figure was measured, the entry's `basis` says
where; the rest follow the model below, from these measurements:

* cpu-2core: the CPU transfer run (`reproductions/transfer/collected.json`: median
  seconds per epoch of a 2-run program per topology, k and model, 2 quiet cores); a
  program of R runs costs t2 x (0.25 + 0.75 R / 2) per epoch (a quarter fixed, the rest
  linear in the runs vmapped together); k = 50 costs 13x k = 10 (5x the nodes and 5x the
  layers, less fixed costs; measured by the campaign on the same CPU, seconds per epoch
  of 4 runs: line GCN 7.8 at k = 50 against 0.74 at k = 10, line GIN 9.5 against 0.59;
  the model had 5x, a third of what line k = 50 GCN took); GIN and SAGE 1.3x GCN, GAT
  2x GCN (not measured); GPS 3x GCN up to k = 10 (one epoch of one run, line k = 3, took
  0.15 s on the CPU at load 13, against GCN's quiet 0.044 s for two) and 6x at k = 50,
  where its attention grows with the square of the graph (modelled).
* h200: the paper-protocol transfer cell line / 10 / SWAN on one H200 (0.0404 s per
  epoch for 32 runs, `reproductions/transfer-h200-line10`); other cells scale with the
  square root of their CPU cost (the GPU is mostly latency-bound at these sizes).
* h100: 1.2x h200 (not measured).

Every other experiment's figures are stated in its `basis`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reproduce.campaign.plan import Entry

TRANSFER_MODELS = ("swan", "adgn", "gcn", "gin", "sage", "gat", "gps")
TOPOLOGIES = ("line", "ring", "crossed-ring")
DISTANCES = (3, 5, 10, 50)
H200_REF = 0.0404  # s / epoch, line / 10 / swan, 32 runs (reproductions/transfer-h200-line10)
H100_OVER_H200 = 1.2
K50_OVER_K10 = 13.0  # CPU seconds per epoch, k = 50 over k = 10 (module docstring)
HEADER = """\
The reproduction campaign's plan: the paper's cells in scope, at the paper's protocol.
Read by `python -m reproduce.campaign` (make campaign); regenerate with
`python -m reproduce.campaign plan --write` (reproduce/campaign/defaults.py says how
each cost is measured or modelled). Fields: reproduce/campaign/plan.py. cost_minutes:
wall minutes of the full protocol on each device kind, every program to its epoch cap.
"""


def _cpu_reference(root: Path) -> dict[str, float]:
    path = root / "transfer" / "collected.json"
    programs = json.loads(path.read_text())["programs"] if path.exists() else {}
    return {"/".join(name.split("/")[:3]): t["seconds_median"]
            for name, t in programs.items() if "seconds_median" in t}


def _two_run_seconds(ref: dict[str, float], topology: str, k: int, model: str) -> float:
    scale, k_ref = (K50_OVER_K10, 10) if k == 50 else (1.0, k)
    base = {"gin": ("gcn", 1.3), "sage": ("gcn", 1.3), "gat": ("gcn", 2.0),
            "gps": ("gcn", 6.0 if k == 50 else 3.0)}.get(model, (model, 1.0))
    return scale * base[1] * ref.get(f"{topology}/{k_ref}/{base[0]}", math.nan)


def _transfer_programs(topology: str, k: int, model: str) -> list[int]:
    """Runs per program of the cell at the paper's protocol (the experiment's own plan)."""
    from swan_jax.experiments.transfer import EXPERIMENT

    cfg = EXPERIMENT.default_config(topologies=(topology,), distances=(k,), models=(model,))
    return [len(p.grid) * len(cfg.seeds) for p in EXPERIMENT.plan(cfg)]


def transfer_cost(ref: dict[str, float], topology: str, k: int, model: str,
                  epochs: int = 2000) -> dict[str, float]:
    runs = _transfer_programs(topology, k, model)
    t2 = _two_run_seconds(ref, topology, k, model)
    cpu = sum(epochs * t2 * (0.25 + 0.75 * r / 2) + 20 for r in runs) / 60
    ref_cpu = ref.get("line/10/swan", math.nan) * (0.25 + 0.75 * 16)
    h200 = sum(epochs * H200_REF * math.sqrt(t2 * (0.25 + 0.75 * r / 2) / ref_cpu) + 10
               for r in runs) / 60
    return {"cpu-2core": round(cpu, 1), "h100": round(h200 * H100_OVER_H200, 1),
            "h200": round(h200, 1)}


def transfer_entries(root: Path) -> list[Entry]:
    ref = _cpu_reference(root)
    out = []
    for group, models in ((100, ("swan", "adgn", "gcn")),
                          (200, ("gin", "sage", "gat", "gps"))):
        for k in DISTANCES:
            for topology in TOPOLOGIES:
                for model in models:
                    measured = (topology, k, model) == ("line", 10, "swan")
                    out.append(Entry(
                        id=f"transfer/{topology}/{k}/{model}", experiment="transfer",
                        table="Figure 3 (fig:graph_transfer_res)", priority=group + k,
                        status="runnable",
                        config={"topologies": [topology], "distances": [k],
                                "models": [model]},
                        cost_minutes=transfer_cost(ref, topology, k, model),
                        basis=("h200 measured (3.0 min, reproductions/transfer-h200-line10);"
                               " others modelled" if measured else "modelled (defaults.py)")))
    return out


# Peptides-func on one H200, the device pipeline (5 layers, 128 wide): an epoch (training
# and evaluation) of 1 run 0.42 s (BENCHMARKS.md anatomy), of 3 vmapped runs 0.80 s
# (reproductions/campaign-lrgb-h200): a fixed part and a part per run, fitted to both.
LRGB_RUN_SECONDS = (0.80 - 0.42) / 2  # s per epoch per run vmapped (5 layers, 128 wide)
LRGB_FIXED_SECONDS = 0.42 - LRGB_RUN_SECONDS
LRGB_LEARN = 1.3  # SWAN-learn's step over SWAN's (benchmark 1)

# GraphCON: a Table 1 baseline with its own grid (swan_jax.experiments.graphprop.GRAPHCON).
GRAPHPROP_MODELS = ("swan", "swan-learn", "adgn", "gcn", "gin", "sage", "gat", "graphcon")
# The message-passing baselines' grid is hidden x layers, 12 points (graphprop.BASELINES):
# their cells run the paper's protocol on the whole grid (12 programs of 4 seeds), no
# screen. A screen would select on 1 seed x 200 epochs, a departure written beside the
# number; the whole grid is the paper's protocol, at about 2.5x the screen and its best
# point together by the model below at the epoch cap (GCN: 15 against 6 H200 minutes).
# Patience shortens it less than hoped: GCN's validation error keeps falling in the fourth
# decimal for about 1,000 epochs (the CPU campaign, 2026-11-28).
FULL_GRID_MODELS = ("gcn", "gin", "sage", "gat")
# Epochs of a GraphProp screen (10 optimiser steps each at batch 512): at least 2.5 times
# the slowest plateau exit measured at the grid points most likely to win (770 steps,
# epsilon 0.1; 200-430 at epsilon 1), rounded up to 50 epochs: 2,000 steps
# (reproductions/graphprop-plateau/REPORT.md). It was 100 epochs.
SCREEN_EPOCHS = 200
SCREEN_BASIS = ("200 epochs: 2.5x the slowest plateau exit measured on the CPU "
                "(reproductions/graphprop-plateau/REPORT.md); every point of the paper's "
                "grid, 1 seed, full data")
# The control a GPU slice runs first (CELLS='graphprop-control/*'): ADGN on "SSSP" (the
# paper's -3.2417 comes from this very pipeline) at the paper's protocol on the grid
# points most likely to win. GCN's control (the paper's 0.9499) is its Table 1 cell
# `graphprop/sssp/gcn`, the whole grid at the protocol (FULL_GRID_MODELS).
CONTROL_GRID = {"hidden": [30], "num_layers": [5, 10], "adjacency": ["adj", "sym"],
                "epsilon": [1.0, 0.1], "gamma": [1.0, 0.1], "beta": [1.0],
                "learning_rate": [0.003], "weight_decay": [1e-6]}

# GraphProp's cost model (no GraphProp program has been timed on a GPU yet: the slice's
# probes replace it, program by program). One epoch of a program (10 training steps and 5
# evaluation batches of 512 graphs, 5,120 + 1,920 graphs of 25-35 nodes) of R runs at L
# layers and width h costs
#     GP_FIXED + GP_RUN x R x L / 10 x h / 20 x factor(model)   seconds,
# plus GP_COMPILE per program. GP_RUN is the H200's measured cost of one more vmapped
# Peptides-func run (LRGB_RUN_SECONDS above: 0.19 s per epoch at 5 layers, 128 wide, for
# 10.8x GraphProp's node-passes per epoch, training counted 3x) scaled by the nodes, the
# layers and the width (memory-bound at these widths); GP_FIXED is 15 launch-bound steps
# of about 2 ms (Peptides' 1-run step: 1.4 ms at 5 layers). The CPU: GP_CPU_UNIT seconds
# per run x layer x width unit, SWAN's epoch with the authors' aggregation on the full
# data (about 1.0 s at 1 run, 5 layers, 30 wide; graphprop-swan-adj-1500); factors:
# GCN measured (9.1 s per epoch for 4 runs, 20 layers, 30 wide, 2026-11-28: 0.57x
# SWAN's unit), GIN and SAGE 1.3x and GAT 2x GCN (the transfer model's ratios),
# SWAN-learn 1.3x (LRGB_LEARN), ADGN 0.8x (no Psi), GraphCON 1.5x GCN (two states),
# the ablation's variants as theirs: not measured.
GP_FIXED, GP_COMPILE = 0.03, 15.0
GP_RUN = LRGB_RUN_SECONDS / 5 / 10.8 * 10 * (20 / 128)  # per layer, / nodes, x L, x h
GP_CPU_UNIT = 1.0 / (5 * 30)
GP_FACTOR = {"swan": 1.0, "swan-ne": 1.0, "swan-beta0": 0.9, "swan-learn": LRGB_LEARN,
             "swan-learn-ne": LRGB_LEARN, "adgn": 0.8, "gcn": 0.57, "gin": 0.74, "sage": 0.74,
             "gat": 1.14, "graphcon": 0.86}
GP_BASIS = ("modelled (defaults.py, GraphProp's cost model): per program-epoch "
            f"{GP_FIXED:.2f} s + {GP_RUN * 1e3:.1f} ms per run x layers / 10 x width / 20 x "
            "the model's factor on an H200 (Peptides-func's measured per-run H200 cost "
            "scaled by nodes, layers and width), 15 s compiles; CPU from SWAN's and GCN's "
            "full-data epochs")


def graphprop_cost(config: Mapping[str, Any], model: str) -> dict[str, float]:
    """Modelled minutes of a GraphProp cell of `config` (its programs as the campaign
    builds them, every one to its epoch cap; the model above)."""
    from reproduce.campaign.shapes import cell_programs

    entry = Entry(id="graphprop/cost", experiment="graphprop", table="", priority=0,
                  status="runnable", config=config, cost_minutes={})
    programs, epochs, _ = cell_programs(entry, Path("reproductions"))
    units = sum(p.work for p in programs) / 200 * GP_FACTOR[model]  # R x L/10 x h/20
    h200 = len(programs) * (GP_COMPILE + epochs * GP_FIXED) + epochs * GP_RUN * units
    cpu = epochs * GP_CPU_UNIT * 200 * units
    return {"cpu-2core": round(cpu / 60), "h100": round(h200 * H100_OVER_H200 / 60, 1),
            "h200": round(h200 / 60, 1)}


# A cell after its screen runs one point: priced at the grid's largest (20 layers, 30 wide).
LARGEST_POINT = {"hidden": [30], "num_layers": [20], "adjacency": ["adj"], "epsilon": [0.1],
                 "gamma": [0.1], "beta": [1.0], "learning_rate": [0.003],
                 "weight_decay": [1e-6]}


def _graphprop_control() -> Entry:
    config = {"tasks": ["sssp"], "labels": ["paper"], "models": ["adgn"],
              "grid": CONTROL_GRID}
    return Entry(
        id="graphprop-control/sssp/adgn", experiment="graphprop",
        table="Table 1 (tab:results_GraphProp_complete): control", priority=350,
        status="runnable", config=config, cost_minutes=graphprop_cost(config, "adgn"),
        basis="2 programs (5 and 10 layers) x 8 grid points x 4 seeds, up to 1500 epochs, "
              "full data; " + GP_BASIS,
        note="the paper's protocol on A_hat x epsilon {1, 0.1} x gamma at hidden 30, 5 and "
             "10 layers: the points that leave the plateau first")


def _graphprop_full_grid(task: str, model: str) -> Entry:
    config = {"tasks": [task], "labels": ["paper"], "models": [model]}
    control = (task, model) == ("sssp", "gcn")
    return Entry(
        id=f"graphprop/{task}/{model}", experiment="graphprop",
        table="Table 1 (tab:results_GraphProp_complete)" + (": control" if control else ""),
        priority=350 if control else 405, status="runnable", config=config,
        cost_minutes=graphprop_cost(config, model),
        basis="the whole grid (12 points x 4 seeds), up to 1500 epochs; " + GP_BASIS,
        note=("the paper's protocol and grid, no screen (defaults.py, FULL_GRID_MODELS)"
              + ("; the control: GCN stays at the constant predictor (0.940 raw), the "
                 "paper's 0.9499" if control else "")))


def _graphprop_screened(task: str, model: str) -> list[Entry]:
    base = {"tasks": [task], "labels": ["paper"], "models": [model]}
    screen = {**base, "epochs": SCREEN_EPOCHS, "seeds": [0], "patience": 100}
    return [Entry(
        id=f"graphprop-screen/{task}/{model}", experiment="graphprop",
        table="Table 1 (tab:results_GraphProp_complete): screening", priority=400,
        status="runnable", config=screen, cost_minutes=graphprop_cost(screen, model),
        basis=SCREEN_BASIS + "; " + GP_BASIS,
        note="short runs of every grid point; its best point is the full cell's"), Entry(
        id=f"graphprop/{task}/{model}", experiment="graphprop",
        table="Table 1 (tab:results_GraphProp_complete)", priority=410,
        status=f"after graphprop-screen/{task}/{model}", config=base,
        cost_minutes=graphprop_cost({**base, "grid": LARGEST_POINT}, model),
        basis="1 grid point (priced at the largest, 20 layers x 30 wide), 4 seeds, 1500 "
              "epochs, full data; " + GP_BASIS)]


def _graphprop_entries() -> list[Entry]:
    out = [_graphprop_control()]
    for task in ("diameter", "sssp", "eccentricity"):
        for model in GRAPHPROP_MODELS:
            out += ([_graphprop_full_grid(task, model)] if model in FULL_GRID_MODELS
                    else _graphprop_screened(task, model))
        for model in ("swan-ne", "swan-learn-ne", "swan-beta0"):
            config = {"tasks": [task], "labels": ["paper"], "models": [model]}
            out.append(Entry(
                id=f"ablation/graphprop/{task}/{model}", experiment="graphprop",
                table="Table 3 (tab:importance)", priority=500,
                status=f"after graphprop-screen/{task}/swan", config=config,
                cost_minutes=graphprop_cost({**config, "grid": LARGEST_POINT}, model),
                basis="as graphprop/<task>/swan's point; " + GP_BASIS,
                note="at SWAN's screened point (the paper's ablation reuses its setting)"))
    return out


# The screen's epochs, from the committed learning curve of the packaged point (SWAN,
# reproductions/lrgb-peptides-func-cpu/history.json): validation AP 0.227 after epoch 1,
# 0.507 at epoch 20, 0.517 at 30, 0.536 at 40; best 0.612-0.621 at epochs 141-291 of 300
# (reproductions/campaign-lrgb-h200). The knee is at about epoch 20 (72% of the gain);
# after it the curve gains about 0.01-0.02 AP per 10 epochs. 30 epochs (10% of the
# protocol) put every point past its knee, where an ordering by validation AP is an
# ordering of converging curves, not of how fast the first epochs move.
LRGB_SCREEN_EPOCHS = 30
LRGB_PROGRAM_GIB = 64.0  # a screen's programs fit an H100 (80 GB, JAX's 90%: 72 GiB)
# ... and hold at most 16 runs: the longest (32 layers, 128 wide) is then about 10 modelled
# H200 minutes at the screen's epochs, one GPU window, and an unfinished one's bundle
# (parameters, two Adam moments, best parameters of 16 runs: about 25 MB) is rare.
LRGB_SCREEN_RUNS = 16
LRGB_FULL = {"learning_rate": [1e-3, 5e-4], "weight_decay": [0.0, 1e-4],
             "num_layers": [5, 8, 16, 32], "hidden": [64, 128], "epsilon": [1.0, 0.01],
             "gamma": [1.0, 0.1], "beta": [1.0, 0.1], "adjacency": ["adj", "sym"]}
LRGB_SCREENED = (f"paper grid, screened: every point x 1 seed x {LRGB_SCREEN_EPOCHS} epochs, "
                 "the best on validation then at 3 seeds x 300 epochs (not the paper's "
                 "3 seeds x 300 epochs at every point)")


def lrgb_epoch_seconds(runs: int, layers: int, hidden: int, variant: str) -> float:
    """Modelled H200 seconds per epoch of a Peptides-func program of `runs` vmapped runs:
    the fixed part, and the per-run part scaled by the layers and the width (the work)."""
    scale = (layers / 5) * (hidden / 128) * (LRGB_LEARN if variant == "swan-learn" else 1.0)
    return LRGB_FIXED_SECONDS + runs * LRGB_RUN_SECONDS * scale


def _lrgb_cost(programs: list[tuple[int, int, int]], variant: str, epochs: int
               ) -> dict[str, float]:
    """Modelled minutes of (runs, layers, hidden) programs at `epochs` (10 s compiles each);
    the CPU column: 28 s per run-epoch at 5 layers, 128 wide (lrgb-peptides-func-cpu)."""
    h200 = sum(epochs * lrgb_epoch_seconds(r, n, h, variant) + 10 for r, n, h in programs)
    factor = LRGB_LEARN if variant == "swan-learn" else 1.0
    cpu = sum(epochs * 28 * 0.9 * r * factor * (n / 5) * (h / 128) for r, n, h in programs)
    return {"cpu-2core": round(cpu / 60), "h100": round(h200 * H100_OVER_H200 / 60, 1),
            "h200": round(h200 / 60, 1)}


def _lrgb_entries() -> list[Entry]:
    out = [Entry(
        id=f"lrgb/peptides-func/{variant}", experiment="lrgb",
        table="Table 2 (tab:lrgb_results)", priority=300, status="runnable",
        config={"datasets": ["peptides-func"], "variants": [variant]},
        cost_minutes={"cpu-2core": round(300 * 3 * 28 * factor * 0.9 / 60),
                      "h100": round((300 * 0.42 * factor * 2 + 10) * H100_OVER_H200 / 60,
                                    1),
                      "h200": round((300 * 0.42 * factor * 2 + 10) / 60, 1)},
        basis="cpu: 28 s per epoch for one seed (reproductions/lrgb-peptides-func-cpu); "
              "h200: 0.42 s per epoch of training and evaluation for one seed on the device "
              "pipeline (BENCHMARKS.md, 2026-11-26 anatomy; 2.07 s before it), about 2x for "
              "3 seeds vmapped, 10 s of compiles; the packaged point, 3 seeds x 300 epochs")
        for variant, factor in (("swan", 1.0), ("swan-learn", 1.3))]
    static = [(LRGB_SCREEN_RUNS, n, h) for n in LRGB_FULL["num_layers"]
              for h in LRGB_FULL["hidden"] for _ in LRGB_FULL["adjacency"]
              for _ in range(32 // LRGB_SCREEN_RUNS)]  # 32 programs of 16 points x 1 seed
    for variant in ("swan", "swan-learn"):
        out.append(Entry(
            id=f"lrgb-screen/peptides-func/{variant}", experiment="lrgb",
            table="Table 2 (tab:lrgb_results): screening of the paper's grid", priority=310,
            status="runnable",
            config={"datasets": ["peptides-func"], "variants": [variant],
                    "grid_name": f"paper grid, screen: every point x 1 seed x "
                                 f"{LRGB_SCREEN_EPOCHS} epochs (its best point on "
                                 f"validation is then run at 3 seeds x 300 epochs)",
                    "grid": LRGB_FULL, "seeds": [0], "epochs": LRGB_SCREEN_EPOCHS,
                    "runs_per_program": LRGB_SCREEN_RUNS,
                    "program_memory_gib": LRGB_PROGRAM_GIB},
            cost_minutes=_lrgb_cost(static, variant, LRGB_SCREEN_EPOCHS),
            basis=f"modelled: 32 programs (layers x width x A_hat, each cut in 2) of "
                  f"{LRGB_SCREEN_RUNS} points x 1 seed, "
                  f"{LRGB_SCREEN_EPOCHS} epochs; per epoch {LRGB_FIXED_SECONDS:.2f} s + "
                  f"{LRGB_RUN_SECONDS:.2f} s per run x layers / 5 x width / 128 (fitted to "
                  f"the H200's 1-run 0.42 s and 3-run 0.80 s epochs at 5 layers, 128 wide; "
                  f"more runs per program may cost less per run: not measured yet)",
            note="the paper's grid (Appendix E, 512 points) does not fit the GPU time at 3 "
                 "seeds x 300 epochs per point (30x this screen's run-epochs: about 60 H200 "
                 "hours by the same model); epochs from the committed learning curve "
                 "(defaults.py, LRGB_SCREEN_EPOCHS)"))
        out.append(Entry(
            id=f"lrgb-grid/peptides-func/{variant}", experiment="lrgb",
            table="Table 2 (tab:lrgb_results)", priority=320,
            status=f"after lrgb-screen/peptides-func/{variant}",
            config={"datasets": ["peptides-func"], "variants": [variant],
                    "grid_name": LRGB_SCREENED},
            cost_minutes=_lrgb_cost([(3, 5, 128)], variant, 300),
            basis="modelled as the 5-layer, 128-wide point (the screen's point may be up to "
                  "6.4x at 32 layers): 3 seeds x 300 epochs",
            note="the best screened point on validation (never test) at the paper's protocol; "
                 "its notes say so beside every number"))
    return out


def _ablation_lrgb_entries() -> list[Entry]:
    """Table 3's Peptides rows: the LRGB experiment at its packaged point with the
    ablation's variants, collected with the Table 2 cells (group `lrgb`: one protocol).
    Peptides-struct's raw files are not in this tree's data: those cells stay runnable
    and need them (the campaign's missing-data handling applies)."""
    from swan_jax.experiments.lrgb import ABLATION_VARIANTS

    factors = {"swan-beta0": 0.9, "swan-ne": 1.0, "swan-learn-ne": 1.3}  # SWAN's cost x
    return [Entry(
        id=f"lrgb/{dataset}/{variant}", experiment="lrgb", table="Table 3 (tab:importance)",
        priority=510, status="runnable",
        config={"datasets": [dataset], "variants": [variant]},
        cost_minutes={"cpu-2core": round(300 * 3 * 28 * factors[variant] * 0.9 / 60),
                      "h100": round((300 * 0.42 * factors[variant] * 2 + 10)
                                    * H100_OVER_H200 / 60, 1),
                      "h200": round((300 * 0.42 * factors[variant] * 2 + 10) / 60, 1)},
        basis="modelled as lrgb/peptides-func/swan (swan-learn-ne as swan-learn, swan-beta0 "
              "0.9x: no Psi term); Peptides-struct's graphs are Peptides-func's",
        note="at the LRGB experiment's packaged point (configs/lrgb.toml), as its Table 2 "
             "cells") for dataset in ("peptides-func", "peptides-struct")
        for variant in ABLATION_VARIANTS]


def _measurement_entries() -> list[Entry]:
    """The runtime table and the Jacobian figure (`reproduce.campaign.measure`): each a
    run of its own per device kind."""
    return [
        Entry(id="runtime/peptides-func", experiment="runtime",
              table="Table 'runtimes' (RTX 3090)", priority=600, status="runnable",
              config={"epochs": 3, "quick": False},
              cost_minutes={"cpu-2core": 30.0, "h100": 4.0, "h200": 3.5},
              basis="modelled: 6 models x 3 full Peptides-func epochs (CPU about 60 s per "
                    "epoch with evaluation, reproductions/lrgb-peptides-func-cpu; H200 0.42 "
                    "s, BENCHMARKS.md) plus a compile each (20-40 s), and the authors' "
                    "PyTorch SWAN and SWAN-learn where torch and .gpu_ref/swan.py are there",
              note="python -m reproduce.runtime at the paper's setting (batch 64, 128 "
                   "channels, 5 layers), GPS as GraphGPS's Peptides-func configuration"),
        Entry(id="jacobian/peptides-func", experiment="jacobian",
              table="Figure 'jacobian over layers'", priority=700, status="runnable",
              config={"epochs": 300, "graphs": 3},
              cost_minutes={"cpu-2core": 420.0, "h100": 10.0, "h200": 8.0},
              basis="modelled: SWAN and GCN 300 epochs each on full Peptides-func (CPU 28 "
                    "s and about 15 s per epoch, H200 0.42 s and about 0.3 s), then dense "
                    "Jacobians on 3 test graphs (a minute)",
              note="python -m reproduce.jacobian: trains both at LRGB's packaged point, "
                   "then swan_jax.analysis on the smallest test graphs"),
    ]


def _other_entries() -> list[Entry]:
    out = _ablation_lrgb_entries() + _measurement_entries()
    for model in ("gcn", "swan", "swan-learn"):
        out.append(Entry(
            id=f"tolokers/{model}", experiment="node_classification",
            table="Table 'additional_runtimes'", priority=800, status="runnable",
            config={"dataset": "tolokers", "models": [model], "epochs": 1000,
                    "patience": "none", "grid": {"learning_rate": [3e-5], "weight_decay": [0.0],
                                               "hidden": [512], "num_layers": [5]},
                    "splits_together": True, "program_memory_gib": 64.0},
            cost_minutes=tolokers_cost(model),
            basis="modelled: 10 splits x 1000 full-batch epochs at width 512, 5 layers, the "
                  "splits vmapped in one program (SWAN-learn: two, cut to 64 GiB); h200 per "
                  "split-epoch: the device pipeline's width-16 figures "
                  "(BENCHMARKS.md: 5.6 ms training, 6.9 ms for one inference, latency-bound) "
                  "plus the edge traffic's bandwidth time at width 512 (1.04M edges x 512 x "
                  "4 B per gather, about 10 gathers per layer for training and 3 for "
                  "inference, at 4.8 TB/s), x1.3 SWAN-learn, x0.7 GCN (the runs of a program "
                  "add their traffic: bandwidth-bound); 15 s compiles per program",
            note="the heterophily benchmark's protocol (width 512, 5 layers, lr 3e-5, 1000 "
                 "steps, per its README as recorded in configs/node_classification.toml); "
                 "the width-16 CPU run stays as the reduced variant"))
    return out


TOLOKERS_EDGES, TOLOKERS_WIDTH, TOLOKERS_LAYERS = 1_040_000, 512, 5
# Programs of the 10 splits together, cut to 64 GiB by the step's estimate (measured on
# the CPU, width 512, 5 layers: GCN 0.42 GiB + 0.37 per run, SWAN 0.45 + 0.40, SWAN-learn
# 7.2 + 7.15: 8 runs fit, so two programs of 5 splits)
TOLOKERS_PROGRAMS = {"swan-learn": 2}


def tolokers_cost(model: str) -> dict[str, float]:
    """Modelled minutes of a Tolokers protocol cell (see its basis)."""
    gather_ms = TOLOKERS_EDGES * TOLOKERS_WIDTH * 4 / 4.8e12 * 1e3  # one gather at 4.8 TB/s
    epoch_ms = 5.6 + 6.9 + gather_ms * TOLOKERS_LAYERS * (10 + 3)
    factor = {"swan-learn": 1.3, "gcn": 0.7}.get(model, 1.0)
    programs = TOLOKERS_PROGRAMS.get(model, 1)
    h200 = (10 * 1000 * epoch_ms * factor / 1e3 + programs * 15) / 60
    return {"cpu-2core": round(10 * 1000 * 40 * factor / 60), "h100": round(h200 * 1.2, 1),
            "h200": round(h200, 1)}


def measured(entry: Entry, root: Path) -> Entry:
    """`entry` with its GPU columns priced program by program from the shapes measured on
    each kind (`shapes.price_programs`: a program's own shape, else a larger measured
    program of the cell as an upper bound, else its share of the model), its basis
    saying per kind "measured" (from what) or "modelled", then the model."""
    import dataclasses

    from reproduce.campaign.costs import GPU_KINDS, measured_programs
    from reproduce.campaign.measure import is_measurement
    from reproduce.campaign.shapes import cell_programs, price_programs, statement

    # A measurement cell (runtime table, Jacobian figure) is no sweep: it has no programs.
    if not entry.runnable or is_measurement(entry):
        return entry
    programs, epochs, note = cell_programs(entry, root)
    cost, said, from_figures = dict(entry.cost_minutes), [], {}
    for kind in GPU_KINDS:
        priced = price_programs(programs, epochs, entry.cost(kind),
                                measured_programs(root, kind))
        said.append(statement(kind, priced))
        if priced.own + priced.bounded:
            cost[kind] = round(priced.minutes, 1)
            from_figures[kind] = round(priced.measured_minutes, 1)
    if not from_figures:
        return dataclasses.replace(entry, basis=f"{' and '.join(GPU_KINDS)} modelled; the "
                                   f"model: " + entry.basis + (f"; {note}" if note else ""))
    return dataclasses.replace(entry, cost_minutes=cost, measured_minutes=from_figures,
                               basis="; ".join(said) + "; the model: " + entry.basis
                               + (f"; {note}" if note else ""))


def modelled_entries(root: str | Path = "reproductions") -> list[Entry]:
    """Every cell with its modelled cost (no measured figure applied)."""
    root = Path(root)
    return (transfer_entries(root) + _lrgb_entries() + _graphprop_entries()
            + _other_entries())


def default_entries(root: str | Path = "reproductions") -> list[Entry]:
    """The plan's cells, their GPU costs priced from what is measured (`measured`)."""
    return [measured(e, Path(root)) for e in modelled_entries(root)]


