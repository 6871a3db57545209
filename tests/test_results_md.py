"""RESULTS.md from reproductions/: collect (copy, refuse to clobber) and render (every
cell, verdicts, "not run" rows, missing files) on small synthetic sweep results."""

from __future__ import annotations

import itertools
import json
import re
import shutil
from pathlib import Path

import pytest

from reproduce.campaign import carry
from reproduce.results import (
    CollectRefused,
    ReproductionsError,
    collect,
    compare,
    render,
)
from reproduce.results import __main__ as results_cli

REPO = Path(__file__).resolve().parents[1]
# After the authors' init and V', Z' form (`sections.AUTHORS_FORM_SINCE`): rows carry no
# note of it unless a test dates its records before.
MACHINE = {"machine": "Linux-test", "processor": "", "device": "cpu:0", "jax": "0.10.2",
           "date": "2027-01-01 00:00:00"}


# ============================================================= synthetic sweep results


def summary(axes: dict, test: float, *, test_std: float = 0.0, val: float | None = None,
            metric: str = "mse", best: dict | None = None, seeds=(0, 1, 2, 3),
            epochs: int = 100) -> dict:
    """A cell summary as `sweep.summarise_cells` writes it."""
    val = test if val is None else val
    return {**axes, "metric": metric, "best_hparams": best or {"learning_rate": 0.001},
            "val_mean": val, "val_std": 0.0, "test_mean": test, "test_std": test_std,
            "seeds": list(seeds),
            "per_seed": [{"seed": s, "val_at_best": val, "test": test, "best_epoch": 1,
                          "epochs_run": epochs, "diverged": False} for s in seeds],
            "epochs_run": [epochs] * len(seeds), "diverged": [False] * len(seeds),
            "epochs_completed": epochs, "params": 1234, "seconds_per_epoch": 0.5,
            "wall_time": 10.0, "grid_points": 1, "programs": 1, "paper": None}


def record(axes: dict, points: list[dict], *, seeds=(0, 1), epochs: int = 100,
           folder: Path | None = None, metric: str = "mse", ident: str = "abc") -> dict:
    """A program record as `sweep.program_record` writes it (runs: points x seeds)."""
    name = "/".join(str(v) for v in axes.values()) + "/program"
    runs = [{"seed": s, "hparams": p, "best_val": 0.1, "val_at_best": 0.1, "best_epoch": 1,
             "test": 0.1, "diverged": False, "epochs_run": epochs}
            for p in points for s in seeds]
    return {"program": ident, "epochs": epochs, "name": name, **axes, "static": {},
            "runs": runs, "metric": metric, "num_params": 1234, "epochs_completed": epochs,
            "first_epoch_seconds": 3.0, "seconds_per_epoch": 0.5, "train_seconds": 50.0,
            "wall_time": 60.0, "checkpoint_dir": str(folder or ""), "machine": MACHINE}


def config(**changes) -> dict:
    base = {"grid": {"learning_rate": [0.001]}, "seeds": [0, 1, 2, 3], "epochs": 100,
            "patience": 100, "batch_size": 512, "optimizer": "adam", "solver": "euler",
            "data_options": {}}
    return {**base, **changes}


def write_results(folder: Path, experiment: str, cfg: dict, cells: list, records: list,
                  **extra) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(
        {"experiment": experiment, "machine": MACHINE, "config": cfg, "cells": cells,
         "records": records, "not_run": [], **extra}))
    (folder / "config.toml").write_text(f'experiment = "{experiment}"\nepochs = '
                                        f'{cfg["epochs"]}\n')
    return folder


def write_history(folder: Path, epochs: int, runs: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [{"epoch": e, "train_loss": [1.0 / (e + 1) + r for r in range(runs)],
              "val": [0.5 + 0.01 * e + r for r in range(runs)],
              "test": [0.4 + 0.01 * e + r for r in range(runs)], "lr": [1e-3] * runs,
              "seconds": 1.0, "train_seconds": 0.75 if e else 9.0,
              "eval_seconds": 0.25 if e else 3.0, "steps": 4} for e in range(epochs)]
    (folder / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in lines))


@pytest.fixture
def repro(tmp_path) -> Path:
    """An empty reproductions/ with the committed reference files."""
    root = tmp_path / "reproductions"
    root.mkdir(parents=True)
    shutil.copy(REPO / "reproductions" / "paper_values.json", root)
    return root


def rendered(root: Path) -> str:
    out = root.parent / "RESULTS.md"
    render(root, out)
    return out.read_text()


def row(text: str, *cells: str) -> str:
    """The one table row that starts with `cells` (fails when none or several)."""
    prefix = "| " + " | ".join(cells) + " |"
    rows = [line for line in text.splitlines() if line.startswith(prefix)]
    assert len(rows) == 1, f"{len(rows)} rows start with {prefix!r}"
    return rows[0]


def section(text: str, title: str, level: str = "##") -> str:
    """From the heading `title` to the next heading of its level or above."""
    start = text.index(f"\n{level} {title}")
    ends = [text.find(f"\n{lv} ", start + 1) for lv in ("##", "###")[:len(level) - 1]]
    ends = [e for e in ends if e > 0]
    return text[start:min(ends) if ends else None]


# ================================================================== the comparisons


def test_verdict_against_paper_in_every_direction():
    assert compare.against_paper(-0.52, -0.5249, 0.0155, "log10_mse")[0] == "within"
    kind, text = compare.against_paper(-3.0, -3.2370, 0.0834, "log10_mse")
    assert kind == "worse" and "0.237" in text and "2.8 paper stds" in text
    assert compare.against_paper(0.2, 0.4094, 0.0764, "log10_mse")[0] == "better"
    assert compare.against_paper(64.0, 63.13, 0.46, "ap")[0] == "better"  # higher is better
    assert compare.against_paper(0.30, 0.2571, 0.0018, "mae")[0] == "worse"  # lower is better
    assert compare.against_paper(float("nan"), 1.0, 0.1, "mae")[0] == "n/a"


def test_transfer_verdict_counts_orders_of_magnitude():
    assert compare.orders(5.0e-4, 1.6841603e-06) == ("worse", "worse by 2.5 orders (x3e+02)")
    assert compare.orders(1.0e-6, 1.6841603e-06)[0] == "within"
    assert compare.orders(1.0e-5, 1.6e-6)[0] == "within"  # 0.8 orders
    assert compare.orders(1.0e-9, 1.6841603e-06)[1].startswith("better by 3.2 orders")
    assert compare.orders(0.0, 1e-6)[0] == "n/a"


def test_verdict_against_the_constant_predictor():
    assert compare.against_constant(-2.5, -1.45)[0] == "better"
    assert compare.against_constant(-1.40, -1.45)[0] == "floor"  # above the floor
    assert compare.against_constant(-1.455, -1.45)[0] == "floor"  # within 0.01 of it
    assert compare.against_constant(-1.47, -1.45)[0] == "better"
    assert compare.against_constant(-1.40, None)[0] == "n/a"


# ======================================================================= rendering


def runs_md(root: Path) -> str:
    return (root / "RUNS.md").read_text()


def link(run: str) -> str:
    return f"[{run}](reproductions/RUNS.md#{run})"


def test_empty_reproductions_list_every_paper_cell_as_not_run(repro):
    text = rendered(repro)
    assert section(text, "Figure 3: graph transfer").count("| not run |") == 3 * 4 * 7
    assert section(text, "Table 1: graph property").count("| not run |") == 3 * 8
    assert section(text, "Table 2: long-range").count("| not run |") == 6
    assert section(text, "Table 3: SWAN variants").count("| not run |") == 15
    assert section(text, "Scalability table").count("| not run |") == 3
    coverage = section(text, "Coverage")
    assert "| Figure 3: graph transfer | 84 | 84 | 0 | 0 | 84 | – | – |" in coverage
    assert "| Table 1: graph property prediction | 33 | 24 | 0 | 0 | 24 | GCNII, DGC" in coverage
    assert "| Table 2: LRGB | 36 | 6 | 0 | 0 | 6 | GCN, GINE" in coverage
    assert "| Table 3: SWAN variants | 15 | 15 | 0 | 0 | 15 | – | – |" in coverage
    assert "every model the paper shows" not in text
    assert "NVIDIA RTX-3090 24GB" in section(text, "Runtimes per epoch")
    assert not (repro / "figures" / "transfer.png").exists()
    assert "1.7e-06 | not run |" in row(text, "Line", "10", "SWAN")  # the references
    assert "| -0.5249 ± 0.0155 | not run |" in row(text, "SWAN", "Diameter")


def transfer_run(root: Path, name: str = "transfer") -> None:
    cells = [summary({"topology": "line", "distance": 10, "model": "swan"}, 5.0e-4,
                     test_std=1.5e-4, best={"epsilon": 0.5, "beta": 1.0}),
             summary({"topology": "line", "distance": 10, "model": "gcn"}, 3.1e-2),
             summary({"topology": "ring", "distance": 10, "model": "swan"}, 1.0e-3,
                     best={"epsilon": 0.5, "beta": 1.0}),
             summary({"topology": "crossed-ring", "distance": 3, "model": "swan"}, 1e-9)]
    cfg = config(sizes=[1000, 100, 100], epochs=300, seeds=[0, 1],
                 grid={"learning_rate": [0.001], "epsilon": [0.5], "gamma": [0.1],
                       "beta": [1.0], "adjacency": ["sym"]})
    write_results(root / name, "transfer", cfg, cells, [])


def test_transfer_cells_verdicts_departures_and_figure(repro):
    transfer_run(repro)
    text = rendered(repro)
    swan = row(text, "Line", "10", "SWAN")
    assert "| 1.7e-06 | 5.0e-04 ± 1.5e-04 | worse by 2.5 orders" in swan
    assert "| epochs 300; 2 seed(s); grid 1 of 16 points |" in swan
    assert swan.endswith(f"| CPU | {link('transfer')} |")
    gcn = row(text, "Line", "10", "GCN")  # the paper searches only the learning rate for GCN
    assert "within 1 order" in gcn and "| epochs 300; 2 seed(s) |" in gcn
    ring = row(text, "Ring", "10", "SWAN")  # vs 4.4e-3; beta cannot matter on a ring
    assert "within 1 order" in ring and "grid 1 of 4 points (beta not searched: no effect " \
                                        "on a regular graph) |" in ring
    assert "better by 2.8 orders" in row(text, "Crossed-Ring", "3", "SWAN")
    assert section(text, "Figure 3").count("| not run |") == 84 - 4
    runs = runs_md(repro)
    assert "epochs 300 (paper 2000); 2 seed(s) (paper 4)" in runs
    assert "![Figure 3: graph transfer](reproductions/figures/transfer.png)" in text
    assert (repro / "figures" / "transfer.png").stat().st_size > 10_000
    assert "| Figure 3: graph transfer | 84 | 84 | 0 | 4 | 80 | – | transfer (CPU) |" in text


def full_transfer_cell(model="adgn", test=2e-6, val=None, points=4):
    cell = summary({"topology": "line", "distance": 10, "model": model}, test, val=val,
                   epochs=2000, best={"epsilon": 0.5, "adjacency": "sym"})
    cell["grid_points"], cell["wall_time"] = points, 180.0
    return cell


FULL_TRANSFER = dict(sizes=[1000, 100, 100], epochs=2000, hidden=64, grid={
    "learning_rate": [0.001], "epsilon": [0.5, 0.1], "gamma": [0.1],
    "beta": [1.0, 0.1, 0.01, -1.0], "adjacency": ["adj", "sym"]})


def test_a_cell_at_the_full_protocol_still_improving_with_its_device(repro):
    cell = full_transfer_cell()
    cell["per_seed"][0].update(best_epoch=1950)  # ran to the cap, best in the last 10%
    cell["per_seed"][1].update(epochs_run=1500, best_epoch=1399)  # early stopped
    gpu = {**MACHINE, "device": "cuda:0", "device_kind": "NVIDIA H200"}
    rec = {**record({"topology": "line", "distance": 10, "model": "adgn"}, [{}],
                    epochs=2000), "machine": gpu}
    write_results(repro / "transfer-gpu", "transfer", config(**FULL_TRANSFER), [cell], [rec])
    text = rendered(repro)
    assert row(text, "Line", "10", "ADGN").endswith(
        f"| none | still improving (1 of 4 seeds) | NVIDIA H200 | {link('transfer-gpu')} |")
    assert "| Figure 3: graph transfer | 84 | 84 | 1 | 0 | 83 |" in text


def test_swan_and_adgn_rows_trained_before_the_authors_init_say_so(repro):
    before = {**MACHINE, "date": "2026-11-28 23:00:00"}
    for model in ("adgn", "swan", "gcn"):
        cell = full_transfer_cell(model=model, points=16 if model == "swan" else 4)
        rec = {**record({"topology": "line", "distance": 10, "model": model}, [{}],
                        epochs=2000), "machine": before}
        write_results(repro / f"old-{model}", "transfer", config(**FULL_TRANSFER), [cell],
                      [rec])
    text = rendered(repro)
    report = "(reproductions/authors-init-formation/REPORT.md)"
    assert f"| none ([before the authors' init]{report}) |" in row(text, "Line", "10", "ADGN")
    assert (f"| none ([before the authors' init and V', Z']{report}) |"
            in row(text, "Line", "10", "SWAN"))
    assert "| none | " in row(text, "Line", "10", "GCN")  # no SWAN block: nothing to say


def test_each_cell_shows_its_best_evidence_and_runs_md_every_row(repro):
    """Full protocol first (even at a worse validation score), else the best validation
    score, never the test score; the others are in RUNS.md as superseded."""
    transfer_run(repro)  # reduced: line 10 swan, ring 10 swan
    write_results(repro / "transfer-full", "transfer", config(**FULL_TRANSFER),
                  [full_transfer_cell("swan", test=9e-3, val=9e-3, points=16)], [])
    better_val = summary({"topology": "ring", "distance": 10, "model": "swan"}, 5e-2,
                         val=1e-4)  # worse test, better validation: it is chosen
    write_results(repro / "transfer-other", "transfer", config(sizes=[1000, 100, 100]),
                  [better_val], [])
    text = rendered(repro)
    assert "| 9.0e-03 ± 0.0e+00 |" in row(text, "Line", "10", "SWAN")
    assert link("transfer-other") in row(text, "Ring", "10", "SWAN")
    runs = runs_md(repro)
    assert row(runs, "Line", "10", "SWAN", "9.0e-03 ± 0.0e+00").endswith("| shown |")
    assert row(runs, "Line", "10", "SWAN", "5.0e-04 ± 1.5e-04").endswith("| superseded |")
    assert row(runs, "Ring", "10", "SWAN", "1.0e-03 ± 0.0e+00").endswith("| superseded |")


def test_results_md_has_one_row_per_paper_cell_when_runs_overlap(repro):
    transfer_run(repro)
    transfer_run(repro, "transfer-again")
    text = rendered(repro)
    assert_one_row_per_cell(text, json.loads((repro / "paper_values.json").read_text()))


LAPLACIAN = "SSSP"  # the paper's "SSSP" column (the Laplacian features)


def graphprop_cell(task, labels, model, test, **kw):
    return summary({"task": task, "labels": labels, "model": model}, test,
                   metric="log10_mse", **kw)


def test_a_graphprop_model_at_the_constant_floor_is_never_better_than_the_paper(repro):
    cells = [graphprop_cell("sssp", "paper", "gcn", 0.9330)]  # paper 0.9499: "better"?
    write_results(repro / "graphprop", "graphprop", config(per_size=[512, 128, 256]),
                  cells, [], constant_predictor=[{"task": "sssp", "labels": "paper",
                                                  "test": 0.9330}])
    text = rendered(repro)
    gcn = row(text, "GCN", LAPLACIAN)
    assert "at the constant predictor's level" in gcn and "better" not in gcn
    assert "grid 1 of 12 points" in gcn  # GCN's grid: width x depth, not SWAN's 864
    assert "Constant predictor" in text and "SSSP 0.9330" in text
    assert "| Constant" not in text  # never a model row


def test_graphprop_paper_setting_beside_the_paper_others_in_runs_md(repro):
    cells = [graphprop_cell("diameter", "paper", "swan", -0.52, test_std=0.01),
             graphprop_cell("sssp", "paper", "swan", -3.0),
             graphprop_cell("eccentricity", "paper", "swan", 0.2),
             graphprop_cell("sssp", "faithful", "swan", -2.5)]
    write_results(repro / "graphprop", "graphprop", config(per_size=[512, 128, 256]),
                  cells, [])
    text = rendered(repro)
    assert "within the paper's std" in row(text, "SWAN", "Diameter")
    assert "worse by 0.237" in row(text, "SWAN", LAPLACIAN)
    assert "better by 0.2094" in row(text, "SWAN", "Eccentricity")
    assert "faithful" not in section(text, "Table 1").split("- Columns")[0]
    other = section(runs_md(repro), "Cells of no paper table")
    assert "| sssp / faithful / swan | log10_mse | -2.5000 ± 0.0000 |" in other


def test_graphprop_judges_the_authors_score_where_recorded(repro):
    adgn = {**graphprop_cell("sssp", "paper", "adgn", -1.0), "authors_test_mean": -3.2,
            "authors_test_std": 0.05}
    write_results(repro / "graphprop", "graphprop", config(per_size=[512, 128, 256]),
                  [adgn, graphprop_cell("sssp", "paper", "gin", -0.5)], [])
    text = rendered(repro)
    adgn_row = row(text, "ADGN", LAPLACIAN)  # pooled -1.0 would be worse by 2.2
    assert "| -3.2417 ± 0.0751 | -3.2000 ± 0.0500 | within the paper's std" in adgn_row
    assert "| -0.5408 ± 0.4193 | -0.5000 ± 0.0000 (pooled) |" in row(text, "GIN", LAPLACIAN)
    assert "| 0.7863 ± 0.0207 | not run |" in row(text, "GraphSAGE", "Eccentricity")
    notes = section(text, "Table 1")
    assert "Laplacian features (D - A) x" in notes and "A plateau, not a floor" in notes
    assert "get_adj(normalization='sym')" in notes and "BoundedNaiveAggr" in notes


def test_a_newly_collected_full_protocol_graphprop_cell_is_shown_as_full(repro):
    """The campaign's GCN "SSSP" control at the paper's protocol beside a screen."""
    write_results(repro / "graphprop", "graphprop", config(per_size=[512, 128, 256]),
                  [graphprop_cell("sssp", "paper", "gcn", 0.96, val=0.5)], [])
    full = graphprop_cell("sssp", "paper", "gcn", 0.9500, val=0.99)
    full["grid_points"] = 12
    write_results(repro / "campaign-graphprop", "graphprop", config(
        sizes=[5120, 640, 1280], epochs=1500, grid={"learning_rate": [0.003],
                                                      "weight_decay": [1e-6],
                                                      "hidden": [10, 20, 30],
                                                      "num_layers": [1, 5, 10, 20]}),
                  [full], [])
    gcn = row(rendered(repro), "GCN", LAPLACIAN)
    assert f"| none | yes | CPU | {link('campaign-graphprop')} |" in gcn
    assert "| Table 1: graph property prediction | 33 | 24 | 1 | 0 | 23 |" in rendered(repro)


def test_lrgb_percent_verdicts(repro):
    cells = [summary({"dataset": "peptides-func", "variant": "swan"}, 0.6313, test_std=0.004,
                     metric="ap", seeds=(0,), epochs=300),
             summary({"dataset": "peptides-struct", "variant": "swan"}, 0.30, metric="mae")]
    write_results(repro / "lrgb", "lrgb", config(epochs=300, patience=None, seeds=[0],
                                                  optimizer="adamw"), cells, [])
    text = rendered(repro)
    func = row(text, "SWAN", "Peptides-func")
    assert "| 63.13 ± 0.46 | 63.13 ± 0.40 | within the paper's std" in func
    assert "1 seed(s)" in func
    assert "worse by 0.0429" in row(text, "SWAN", "Peptides-struct")
    assert "| 31.92 ± 2.50 | not run |" in row(text, "SWAN-learn", "PascalVOC-sp")
    assert (repro / "figures" / "table2.png").exists()


def test_node_classification_scores_and_times_beside_the_paper(repro):
    cells = [{**summary({"dataset": "tolokers", "model": "swan"}, 0.8401, test_std=0.005,
                        metric="roc_auc"), "train_ms_per_epoch": 2000.0,
              "eval_ms_per_epoch": 300.0}]
    write_results(repro / "node_classification", "node_classification", config(), cells, [])
    text = rendered(repro)
    swan = row(text, "SWAN", "Tolokers")
    assert "| 84.01 ± 0.54; 142.6 / 82.1 ms | 84.01 ± 0.50; 2000.0 / 300.0 ms | within" in swan
    assert "NVIDIA A100" in section(text, "Scalability table")
    assert "| 83.64 ± 0.67; 142.0 / 81.9 ms | not run |" in row(text, "GCN", "Tolokers")
    assert "ogbn-arxiv and Questions" in section(text, "Coverage")


def test_tolokers_rows_say_which_splits_they_pool_and_what_is_still_running(repro):
    cell = summary({"dataset": "tolokers", "model": "gcn"}, 0.70, metric="roc_auc",
                   seeds=(0, 0, 0))
    for split, seed in enumerate(cell["per_seed"]):
        seed["split"] = split
    cell["epochs_run"] = [100, 68, 100]
    records = [{**record({"dataset": "tolokers", "model": "gcn", "split": s}, [{}],
                         metric="roc_auc", ident=f"p{s}"), "name": f"tolokers/gcn/{s}"}
               for s in range(3)]
    write_results(repro / "node_classification", "node_classification",
                  config(splits=None), [cell], records,
                  notes=["tolokers, 10 of its 10 official split(s) pooled"])
    (repro / "node_classification" / "collected.json").write_text(json.dumps({"in_progress": [
        {"name": "tolokers/gcn/0", "program": "p0", "epochs_done": 100, "epochs_cap": 100},
        {"name": "tolokers/gcn/3", "program": "p3", "epochs_done": 40, "epochs_cap": 100}]}))
    text, runs = rendered(repro), runs_md(repro)
    assert "3 of 10 splits" in row(text, "GCN", "Tolokers")
    assert "`tolokers/gcn/3` 40/100 epochs" in runs
    assert "`tolokers/gcn/0`" not in runs  # finished: it has a record
    assert "patience 100 (benchmark none)" in runs  # the heterophily benchmark's protocol
    assert "Departures from the benchmark's protocol (" in runs


def test_the_campaign_has_its_section_in_runs_md(repro):
    (repro / "graphprop-plateau").mkdir()  # issue 37's measurement: a section, not a run
    (repro / "graphprop-plateau" / "section.md").write_text("## Plateau\n")
    (repro / "campaign").mkdir()
    (repro / "campaign" / "plan.toml").write_text(
        '[[cell]]\nid = "transfer/line/3/gcn"\nexperiment = "transfer"\npriority = 1\n'
        'status = "runnable"\n')
    run = repro.parent / "work" / "transfer__line__3__gcn"  # an unfinished cell, carried
    (run / "checkpoints" / "p").mkdir(parents=True)
    (run / "checkpoints" / "p" / "history.jsonl").write_text("{}\n" * 7)
    carry.pack(run, repro / "campaign" / "carried", "transfer__line__3__gcn")
    lines = render(repro, repro.parent / "RESULTS.md")
    assert not any("campaign" in w or "plateau" in w for w in lines[1:])  # no warning
    assert "| transfer/line/3/gcn | 0 | 7 |" in runs_md(repro)


def test_the_runtime_table_shows_each_measured_model_beside_the_paper(repro):
    """A `benchmarks.runtime_table` run: its seconds beside the RTX 3090's, the authors' PyTorch
    measured by the same run where it was, full only for whole Peptides-func epochs."""
    folder = repro / "runtime-h200"
    folder.mkdir()
    machine = {"device": "cuda:0", "device_kind": "NVIDIA H200"}
    models = {"gcn": {"train_s": 0.31, "inference_s": 0.08},
              "swan": {"train_s": 0.33, "inference_s": 0.09}}
    reference = {"models": {"swan": {"train_s": 3.2, "inference_s": 0.7}}}
    graphs = {"train": 10873, "val": 2331, "test": 2331}
    (folder / "results.json").write_text(json.dumps(
        {"experiment": "runtime", "machine": machine, "graphs": graphs, "cells": [],
         "models": models, "reference": reference}))
    (folder / "collected.json").write_text(json.dumps({"source": "test"}))
    small = repro / "runtime-cpu"
    small.mkdir()
    (small / "results.json").write_text(json.dumps(
        {"experiment": "runtime", "machine": {"device": "cpu:0"}, "cells": [],
         "graphs": {"train": 417, "val": 101, "test": 82},
         "models": {"adgn": {"train_s": 1.8, "inference_s": 0.3}}}))
    (small / "collected.json").write_text(json.dumps({"source": "test"}))
    text = rendered(repro)
    assert "| Runtime table (tab:runtimes, RTX 3090) | 6 | 6 | 2 | 1 | 3 |" in text
    table_ = section(text, "Runtimes per epoch")
    assert row(table_, "SWAN", "0.33", "2.88", "0.09", "0.24").endswith(
        "| 3.2 / 0.7 | full | runtime-h200 (cuda:0 (NVIDIA H200)) |")
    assert "| reduced: 417 of 10873 train graphs; 101 of 2331 val graphs; 82 of 2331 test " \
           "graphs | runtime-cpu (cpu:0) |" in row(table_, "ADGN", "1.8")
    assert row(table_, "SWAN-LEARN", "not run")
    assert "A `runtime` measurement" in runs_md(repro)


def test_unknown_experiment_goes_to_runs_md(repro):
    write_results(repro / "toy", "toy", config(), [summary({"task": "swap"}, 0.25)], [])
    text = rendered(repro)
    assert "toy" not in text
    other = section(runs_md(repro), "Cells of no paper table")
    assert "| swap | mse | 2.5e-01 ± 0.0e+00 |" in other
    assert "no paper protocol to compare with" in runs_md(repro)


def test_partial_run_cells_without_a_test_value_are_not_run(repro):
    cell = summary({"topology": "line", "distance": 3, "model": "swan"}, 1e-6)
    del cell["test_mean"]
    write_results(repro / "transfer", "transfer", config(sizes=[1000, 100, 100]), [cell], [])
    assert "| not run |" in row(rendered(repro), "Line", "3", "SWAN")


# ====================================================================== missing files


def test_missing_or_broken_files_are_named(repro):
    (repro / "paper_values.json").unlink()
    with pytest.raises(ReproductionsError, match="paper_values.json: missing"):
        rendered(repro)


def test_an_old_paper_values_file_is_named(repro):
    paper = json.loads((repro / "paper_values.json").read_text())
    del paper["devices"]
    (repro / "paper_values.json").write_text(json.dumps(paper))
    with pytest.raises(ReproductionsError, match="paper_values.json: no devices"):
        rendered(repro)


def test_broken_results_file_is_named(repro):
    (repro / "lrgb").mkdir()
    (repro / "lrgb" / "results.json").write_text("{ not json")
    with pytest.raises(ReproductionsError, match=r"lrgb/results.json: not valid JSON"):
        rendered(repro)


def test_run_without_its_side_files_and_a_half_collected_folder(repro, capsys):
    transfer_run(repro)
    (repro / "transfer" / "config.toml").unlink()
    (repro / "graphprop").mkdir()
    (repro / "graphprop" / "config.toml").write_text("epochs = 1\n")
    (repro / "__pycache__").mkdir()  # the studies' bytecode is not a run
    (repro / "__pycache__" / "_differential.cpython-311.pyc").write_bytes(b"\0")
    out = repro.parent / "RESULTS.md"
    assert results_cli.main(["render", "--reproductions", str(repro), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "warning:" in printed and "no results.json" in printed
    runs = runs_md(repro)
    assert "- Problem: no collected.json (source and notes unknown)" in runs
    assert "- Problem: no config.toml" in runs
    assert "- Files: `reproductions/transfer/` (results.json), collected" in runs
    assert "- Incomplete: " in out.read_text() and "graphprop: no results.json" in out.read_text()
    assert "__pycache__" not in out.read_text() + printed


def test_render_without_a_reproductions_folder_says_so(tmp_path):
    with pytest.raises(SystemExit, match="no such folder"):
        results_cli.main(["render", "--reproductions", str(tmp_path / "nothing")])


# ============================================================================ collect


def lrgb_results(root: Path, *, epochs: int = 300, seeds=(0, 1), moved: bool = True) -> Path:
    """A results folder as `python -m swan_jax.experiments.lrgb` leaves it: one finished
    program of 2 grid points x 2 seeds (the second point selected), with its history."""
    folder = root / "program-abc"
    ckpt = root / "checkpoints" / "peptides-func" / "swan" / folder.name
    recorded = Path("/elsewhere/results/lrgb/checkpoints/peptides-func/swan") / folder.name
    write_history(ckpt, 3, 4)
    (ckpt / "3").mkdir()
    (ckpt / "3" / "state.bin").write_bytes(b"\0" * 4096)  # a checkpoint: never copied
    points = [{"learning_rate": 0.001}, {"learning_rate": 0.0005}]
    axes = {"dataset": "peptides-func", "variant": "swan"}
    rec = record(axes, points, seeds=seeds, epochs=epochs,
                 folder=recorded if moved else ckpt, metric="ap")
    cell = summary(axes, 0.6, metric="ap", best=points[1], seeds=seeds, epochs=epochs)
    cfg = config(epochs=epochs, seeds=list(seeds), patience=None, optimizer="adamw",
                 limit=None, grid={"learning_rate": [0.001, 0.0005]})
    write_results(root, "lrgb", cfg, [cell], [rec], notes=["grid paper", "first 40 graphs only"])
    return root


def test_collect_copies_the_small_files_and_notes(tmp_path):
    source = lrgb_results(tmp_path / "results" / "lrgb")
    lines = collect(source, tmp_path / "reproductions")
    dest = tmp_path / "reproductions" / "lrgb"
    assert sorted(p.name for p in dest.iterdir()) == ["collected.json", "config.toml",
                                                     "results.json"]
    assert (dest / "results.json").read_bytes() == (source / "results.json").read_bytes()
    assert "1 finished program(s), 0 in progress" in lines[-1]
    collected = json.loads((dest / "collected.json").read_text())
    assert collected["notes"] == ["grid paper", "first 40 graphs only"]


def test_collect_keeps_programs_in_progress_and_render_shows_them(tmp_path, repro):
    source = lrgb_results(tmp_path / "results" / "lrgb")
    running = source / "checkpoints" / "peptides-struct" / "swan" / "program-zzz"
    write_history(running, 2, 1)
    cfg = json.loads((source / "results.json").read_text())["config"]
    (running / "run.json").write_text(json.dumps({
        "train": {"epochs": 300}, "runs": [{"run": 0, "seed": 0, "hparams": {}}],
        "description": {"program": "zzz", "config": cfg,
                        "cell": {"dataset": "peptides-struct", "variant": "swan"},
                        "static": {}}}))
    collect(source, repro)
    collected = json.loads((repro / "lrgb" / "collected.json").read_text())
    assert [(p["name"], p["epochs_done"], p["epochs_cap"]) for p in collected["in_progress"]
            ] == [("peptides-struct/swan/program-zzz", 2, 300)]
    text = rendered(repro)
    assert "In progress when collected (not in the tables): `peptides-struct/swan/" \
           "program-zzz` 2/300 epochs" in runs_md(repro)
    assert "| 0.2571 ± 0.0018 | not run |" in row(text, "SWAN", "Peptides-struct")


def test_collect_refuses_to_clobber_with_a_smaller_run(tmp_path, capsys):
    repro = tmp_path / "reproductions"
    collect(lrgb_results(tmp_path / "full"), repro)
    committed = (repro / "lrgb" / "results.json").read_bytes()
    quick = lrgb_results(tmp_path / "quick", epochs=1, seeds=(0,))
    with pytest.raises(CollectRefused, match=r"epochs 1 < 300; seeds 1 < 2"):
        collect(quick, repro)
    assert (repro / "lrgb" / "results.json").read_bytes() == committed
    with pytest.raises(SystemExit, match="results collect: refusing to replace"):
        results_cli.main(["collect", str(quick), "--reproductions", str(repro)])
    collect(quick, repro, name="lrgb-quick")  # beside, under another name
    assert (repro / "lrgb" / "results.json").read_bytes() == committed
    assert (repro / "lrgb-quick" / "results.json").exists()
    lines = collect(quick, repro, force=True)
    assert lines[0].startswith(f"replaced {repro / 'lrgb'} (smaller: epochs 1 < 300")
    assert (repro / "lrgb" / "results.json").read_bytes() != committed


def test_collect_accepts_a_run_that_grew_and_refuses_another_experiment(tmp_path):
    repro = tmp_path / "reproductions"
    collect(lrgb_results(tmp_path / "a"), repro)
    grown = lrgb_results(tmp_path / "b")
    results = json.loads((grown / "results.json").read_text())
    results["cells"].append(summary({"dataset": "peptides-struct", "variant": "swan"}, 0.3,
                                    metric="mae", epochs=300))
    (grown / "results.json").write_text(json.dumps(results))
    assert collect(grown, repro)[0].startswith(f"replaced {repro / 'lrgb'}")
    other = write_results(tmp_path / "t", "transfer", config(sizes=[10, 5, 5]), [], [])
    with pytest.raises(CollectRefused, match="holds a lrgb run, this is transfer"):
        collect(other, repro, name="lrgb")


def test_collect_names_what_is_missing_or_too_large(tmp_path):
    with pytest.raises(ReproductionsError, match=r"nothing/results.json: no such file"):
        collect(tmp_path / "nothing", tmp_path / "reproductions")
    source = lrgb_results(tmp_path / "lrgb")
    with pytest.raises(CollectRefused, match="over --max-mb 0.001"):
        collect(source, tmp_path / "reproductions", max_mb=0.001)
    (source / "results.json").write_text("[]")
    with pytest.raises(ReproductionsError, match="not a sweep's results file"):
        collect(source, tmp_path / "reproductions")


# ============================================================= the committed references


def test_committed_references_agree_with_the_experiments_and_the_issue():
    from swan_jax.experiments import graphprop, lrgb, transfer

    paper = json.loads((REPO / "reproductions" / "paper_values.json").read_text())
    for (dataset, variant), value in lrgb.PAPER_VALUES.items():  # Table 2, the ablation's
        source = (paper["ablation"]["lrgb"] if variant in lrgb.ABLATION_VARIANTS
                  else paper["lrgb"]["values"])
        assert tuple(source[dataset][variant]) == value
    tasks = paper["graphprop"]["tasks"]
    for model, values in graphprop.PAPER.items():
        assert [tuple(paper["graphprop"]["values"][model][t]) for t in tasks] == list(values)
    authors = transfer.authors_figure3()
    quoted = {"swan": (1.7e-6, 4.4e-3, 1.5e-6), "adgn": (1.6e-6, 4.1e-3, 3.2e-5),
              "gcn": (1.2e-2, 4.4e-2, 3.4e-2)}  # issue 15, k = 10, two digits
    for model, values in quoted.items():
        ours = [authors["values"][t]["10"][model]["mean"] for t in authors["topologies"]]
        assert [float(f"{v:.2g}") for v in ours] == list(values)
    assert re.fullmatch(r"[0-9a-f]{40}", authors["source"]["commit"])


def test_two_reduced_runs_of_one_cell_show_one_row_each_in_runs_md(repro):
    transfer_run(repro)
    cells = [summary({"topology": "line", "distance": 10, "model": "swan"}, 2.0e-6,
                     val=1e-6)]
    write_results(repro / "transfer-authors-data", "transfer",
                  config(sizes=[1000, 100, 100], data_options={"variant": "authors"}),
                  cells, [])
    swan = row(rendered(repro), "Line", "10", "SWAN")  # the better validation score
    assert "within 1 order" in swan and "variant=authors" in swan
    assert link("transfer-authors-data") in swan
    rows = [r for r in runs_md(repro).splitlines() if r.startswith("| Line | 10 | SWAN |")]
    assert len(rows) == 2 and rows[0].endswith("| superseded |")


def paper_cells(paper: dict) -> dict[str, set[tuple[str, ...]]]:
    """The row labels of each main table, from paper_values.json alone."""
    from reproduce.results.sections import NAMES

    def n(key):
        return NAMES.get(str(key), str(key))

    t, g, lr, ab, nc = (paper[k] for k in ("transfer", "graphprop", "lrgb", "ablation",
                                            "node_classification"))
    return {
        "Figure 3": {(n(a), str(b), n(c)) for a, b, c in itertools.product(
            *t["expected"].values())},
        "Table 1": {(n(m), n(task)) for m in g["expected"]["model"] for task in g["tasks"]},
        "Table 2": {(n(m), n(d)) for m in lr["expected"]["variant"]
                    for d in lr["expected"]["dataset"]},
        "Table 3": {(n(task), n(m)) for task in g["tasks"] for m in ab["graphprop_models"]}
        | {(n(d), n(m)) for d, variants in ab["lrgb"].items() for m in variants},
        "Scalability table": {(n(m), n(d)) for m in nc["expected"]["model"]
                              for d in nc["expected"]["dataset"]}}


def table_rows(text: str, title: str) -> list[list[str]]:
    """The cells of the first markdown table under the heading `title`."""
    lines = section(text, title).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| "))
    body = itertools.takewhile(lambda line: line.startswith("|"), lines[start + 2:])
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in body]


def assert_one_row_per_cell(text: str, paper: dict) -> None:
    for title, cells in paper_cells(paper).items():
        rows = table_rows(text, title)
        width = len(next(iter(cells)))
        labels = [tuple(r[:width]) for r in rows]
        assert len(labels) == len(set(labels)) == len(cells), title
        assert set(labels) == cells, title
        for r in rows:  # the paper's value beside each, as paper_values.json has it
            assert r[width] != "–" or title == "Figure 3", (title, r)


def test_the_committed_results_md_has_one_row_per_paper_cell_and_its_figures():
    text = (REPO / "RESULTS.md").read_text()
    assert_one_row_per_cell(text, json.loads((REPO / "reproductions" /
                                              "paper_values.json").read_text()))
    for figure in ("transfer", "table1", "table2", "table3"):
        assert (REPO / "reproductions" / "figures" / f"{figure}.png").stat().st_size > 10_000
        assert f"(reproductions/figures/{figure}.png)" in text
    assert (REPO / "reproductions" / "RUNS.md").exists()


def test_the_committed_results_md_is_rendered_from_the_committed_reproductions(tmp_path):
    shutil.copytree(REPO / "reproductions", tmp_path / "reproductions")
    assert render(tmp_path / "reproductions", tmp_path / "RESULTS.md")[0].startswith("wrote")
    assert (tmp_path / "RESULTS.md").read_text() == (REPO / "RESULTS.md").read_text(), (
        "RESULTS.md is stale: run `make results` and commit it")
    assert (tmp_path / "reproductions" / "RUNS.md").read_text() == (
        REPO / "reproductions" / "RUNS.md").read_text(), "RUNS.md is stale: `make results`"


def test_collect_of_a_run_none_of_whose_programs_has_finished_is_refused(tmp_path, repro):
    """No results.json yet (an unfinished campaign cell is carried as its run folder)."""
    source = tmp_path / "results" / "lrgb"
    (source / "checkpoints" / "peptides-func").mkdir(parents=True)
    with pytest.raises(ReproductionsError, match="results.json: no such file; give a results "
                                                 "folder whose sweep finished a program"):
        collect(source, repro)
    assert not (repro / "lrgb").exists()


def test_a_cell_without_its_axes_is_named(repro):
    write_results(repro / "transfer", "transfer", config(), [summary({"model": "swan"}, 1.0)],
                  [])
    with pytest.raises(ReproductionsError, match="a cell of transfer has no 'topology'"):
        rendered(repro)


def test_a_cell_whose_programs_ran_on_two_devices_names_both(repro):
    gpu = {**MACHINE, "device": "cuda:0", "device_kind": "NVIDIA H200"}
    ring = {"topology": "ring", "distance": 5, "model": "adgn"}
    write_results(repro / "campaign-transfer", "transfer",
                  config(sizes=[1000, 100, 100], epochs=2000),
                  [summary(ring, 3e-7, epochs=2000)],
                  [{**record(ring, [{}], epochs=2000, ident="a"), "machine": gpu},
                   {**record(ring, [{}], epochs=2000, ident="b"), "machine": MACHINE}])
    text = rendered(repro)
    assert row(text, "Ring", "5", "ADGN").endswith(
        f"| NVIDIA H200, CPU | {link('campaign-transfer')} |")


def test_every_committed_cell_summary_is_its_per_seed_records():
    """The numbers RESULTS.md shows trace to the per-seed records: each committed cell's
    mean ± population std (test, validation, the authors' score) recomputed from them."""
    import math
    import statistics

    checked = 0
    for path in sorted((REPO / "reproductions").glob("*/results.json")):
        for cell in json.loads(path.read_text()).get("cells") or []:
            seeds = [s for s in cell.get("per_seed") or [] if not s.get("diverged")]
            if not compare.finite(cell.get("test_mean")) or not seeds:
                continue
            for key, field in (("test", "test"), ("val", "val_at_best"),
                               ("authors_test", "authors_test")):
                if cell.get(f"{key}_mean") is None:
                    continue
                values = [s[field] for s in seeds]
                assert math.isclose(statistics.fmean(values), cell[f"{key}_mean"],
                                    rel_tol=1e-6, abs_tol=1e-12), (path, cell, key)
                assert math.isclose(statistics.pstdev(values), cell.get(f"{key}_std") or 0.0,
                                    rel_tol=1e-5, abs_tol=1e-9), (path, cell, key)
            checked += 1
    assert checked >= 100  # the committed runs' cells (116 when written)
