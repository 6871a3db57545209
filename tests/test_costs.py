"""Measured program costs (`reproduce.campaign.costs`): recorded per call, merged from a
slice's copy, and used by the plan for the cells whose every program has a figure."""

from __future__ import annotations

import json
from pathlib import Path

from reproduce.campaign import costs
from reproduce.campaign.defaults import measured
from reproduce.campaign.plan import Entry

SHAPE = {"program": "ring/3/swan/adjacency=sym", "experiment": "transfer", "runs": 8,
         "nodes": 48, "layers": 3, "hidden": 8}


def _entry() -> Entry:
    return Entry(id="transfer/ring/3/swan", experiment="transfer", table="Fig. 3",
                 priority=1, status="runnable",
                 config={"topologies": ["ring"], "distances": [3], "models": ["swan"],
                         "grid": {"epsilon": [0.5], "beta": [1.0], "adjacency": ["sym"]},
                         "seeds": [0, 1], "epochs": 100},
                 cost_minutes={"cpu-2core": 5.0, "h100": 2.0, "h200": 1.0},
                 basis="modelled (defaults.py)")


def test_a_slice_records_its_programs_merge_takes_them_and_the_plan_uses_them(tmp_path: Path):
    slice_root, here = tmp_path / "slice", tmp_path / "here"
    entry = _entry()
    from reproduce.campaign.runner import cell_config

    exp, cfg = cell_config(entry, tmp_path / "probe")
    [program] = exp.plan(cfg)
    runs = len(program.grid) * len(cfg.seeds)
    shape = {**SHAPE, "program": program.name, "runs": runs}
    costs.record(slice_root / "campaign", "h200", entry.id,
                 [{**shape, "epochs": 1, "first_epoch_seconds": 9.0,
                   "seconds_per_epoch": None}])
    # a compiling epoch alone is no pace
    assert measured(entry, slice_root).cost_minutes == entry.cost_minutes
    assert measured(entry, slice_root).basis == ("h100 and h200 modelled; the model: "
                                                 "modelled (defaults.py)")
    costs.record(slice_root / "campaign", "h200", entry.id,
                 [{**shape, "epochs": 50, "first_epoch_seconds": 12.0,
                   "seconds_per_epoch": 0.3}])
    assert costs.merge_costs(slice_root, here) == [
        "costs: 2 measured program(s) taken into reproductions/campaign/costs.json"]
    assert costs.merge_costs(slice_root, here) == []  # once
    taken = json.loads((here / "campaign" / "costs.json").read_text())["programs"]
    assert [t["epochs"] for t in taken] == [1, 50] and taken[1]["device"] == "h200"
    planned = measured(entry, here)
    assert planned.cost_minutes["h200"] == round((12.0 + 100 * 0.3) / 60, 1)
    assert planned.cost_minutes["h100"] == 2.0  # no H100 figure: modelled as it was
    assert planned.measured_minutes == {"h200": planned.cost_minutes["h200"]}
    assert planned.basis.startswith("h100 modelled; h200 measured: 1 program(s), 1 at its "
                                    "own shape; from campaign, h200, ")
    assert f"ring/3/swan/adjacency=sym, {runs} runs (reproductions/campaign/costs.json)" in (
        planned.basis)  # an entry without a shape: matched by its program's name
    assert planned.basis.endswith("; the model: modelled (defaults.py)")


def test_memory_figures_are_kept_and_merged_once(tmp_path: Path):
    from reproduce.campaign.runner import packing_cache

    slice_file = tmp_path / "slice" / "campaign" / costs.PACKING_FILE
    with packing_cache(slice_file) as cache:
        cache["abc@64GiB"] = 18
    with packing_cache(slice_file) as cache:  # read back, nothing new: not rewritten
        assert cache == {"abc@64GiB": 18}
    assert costs.merge_packing(tmp_path / "slice", tmp_path / "here") == [
        "packing: 1 program size(s) taken into reproductions/campaign/packing.json"]
    assert costs.merge_packing(tmp_path / "slice", tmp_path / "here") == []
    assert json.loads((tmp_path / "here" / "campaign" / costs.PACKING_FILE).read_text()) == {
        "abc@64GiB": 18}
