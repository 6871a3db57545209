"""The reproduction campaign: the plan, the budget stop, resume bundles, collection.

Tiny sizes on the CPU (16 training graphs, width 8, a few epochs): each test trains at
most a few seconds after compiling.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from reproduce.campaign import bundle, gather, loop, measure, plan
from reproduce.campaign.defaults import (
    FULL_GRID_MODELS,
    GRAPHPROP_MODELS,
    HEADER,
    SCREEN_EPOCHS,
    default_entries,
    graphprop_cost,
)
from reproduce.campaign.runner import Deadline, cell_config

REPO = Path(__file__).resolve().parents[1]
TINY = {"sizes": [16, 8, 8], "hidden": 8, "seeds": [0, 1], "epochs": 6, "patience": "none",
        "grid": {"epsilon": [0.5], "beta": [1.0], "adjacency": ["sym"]}}


def _entry(model: str = "swan", *, distance: int = 3, **config) -> plan.Entry:
    """A tiny transfer cell; `distance=1` (one layer) where a test's claim does not depend
    on the depth: its programs compile faster."""
    return plan.Entry(id=f"transfer/line/{distance}/{model}", experiment="transfer",
                      table="Fig. 3", priority=1, status="runnable",
                      config={"topologies": ["line"], "distances": [distance],
                              "models": [model], **TINY, **config},
                      cost_minutes={"cpu-2core": 1.0})


def _setup(tmp_path: Path, entries: list[plan.Entry], name: str) -> loop.Options:
    root = tmp_path / name / "reproductions"
    root.mkdir(parents=True)
    shutil.copy(REPO / "reproductions" / "paper_values.json", root)
    plan_file = root / "campaign" / "plan.toml"
    plan_file.parent.mkdir(parents=True)
    plan_file.write_text(plan.dump_plan(entries, "test plan"))
    return loop.Options(plan=plan_file, reproductions=root, work=tmp_path / name / "work",
                        budget_minutes=30, margin_seconds=0, render=False)


def _collected(opts: loop.Options) -> dict:
    return json.loads((opts.reproductions / "campaign-transfer" / "results.json").read_text())


# ============================================================================ the plan


def test_the_plan_file_round_trips_and_the_committed_one_covers_the_paper():
    entries = default_entries(REPO / "reproductions")
    text = plan.dump_plan(entries, HEADER)
    committed = plan.load_plan(REPO / "reproductions" / "campaign" / "plan.toml")
    assert sorted(committed, key=lambda e: e.id) == sorted(entries, key=lambda e: e.id)
    assert (REPO / "reproductions" / "campaign" / "plan.toml").read_text() == text
    transfer = [e for e in committed if e.experiment == "transfer"]
    assert len(transfer) == 84  # 3 topologies x 4 k x 7 models, GPS included
    assert {e.status for e in transfer if e.id.endswith("/gps")} == {"runnable"}
    assert [e.priority for e in committed] == sorted(e.priority for e in committed)
    for entry in committed:  # every runnable sweep cell builds a valid configuration
        if entry.runnable and not measure.is_measurement(entry):
            _, cfg = cell_config(entry, Path("unused"))
            # screens are short by design (their epochs are justified in defaults.py)
            screen = entry.id.split("/")[0].endswith("-screen")
            assert cfg.resume and cfg.epochs >= (30 if screen else 100)
            assert set(entry.cost_minutes) == set(plan.DEVICE_KINDS)


def test_a_bad_plan_is_named(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text('[[cell]]\nid = "a"\nexperiment = "transfer"\npriority = 1\n'
                    'status = "soon"\n')
    with pytest.raises(plan.PlanError, match="status 'soon'"):
        plan.load_plan(path)
    with pytest.raises(plan.PlanError, match="no such plan file"):
        plan.load_plan(tmp_path / "missing.toml")


def test_a_cell_collected_at_the_paper_protocol_counts_as_done(tmp_path):
    entries = {e.id: e for e in plan.load_plan(REPO / "reproductions/campaign/plan.toml")}
    # two committed runs alone (the campaign's own collections would mark both done)
    for run in ("transfer", "transfer-h200-line10"):  # the CPU run reduced, the H200 full
        shutil.copytree(REPO / "reproductions" / run, tmp_path / run)
    assert gather.is_done(entries["transfer/line/10/swan"], tmp_path)  # the H200 run
    assert not gather.is_done(entries["transfer/line/10/adgn"], tmp_path)  # CPU: reduced


# ============================================================== stop, bundle, resume


class FifteenSecondEpochs(Deadline):
    """A deadline on a fake clock that every epoch moves 15 s on."""

    now = 0.0

    def left(self):
        self.clock = lambda: self.now
        return super().left()

    def on_epoch_end(self, epoch, record):
        self.now += 15.0
        super().on_epoch_end(epoch, record)


def test_a_budget_stop_then_a_bundle_on_a_fresh_machine_ends_bit_identical(tmp_path):
    entry = _entry("swan", distance=1)  # where a cut run resumes does not depend on depth
    whole = _setup(tmp_path, [entry], "whole")
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    loop.run_campaign(whole)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
    cut = _setup(tmp_path, [entry], "cut")
    lines = loop.run_campaign(cut, deadline=FifteenSecondEpochs(80.0, margin=0.0))
    assert any("unfinished" in line for line in lines)
    # 80 s: 60 kept for the first epoch, then 15 s per epoch: the 4th epoch is the last
    # (saved on the way out; a loop that does not save it keeps the 3rd). (6 epochs: one
    # per call; a fused block's hook stop saves the whole block, tests/test_fused.py)
    folder = next((cut.work / entry.slug / "checkpoints").rglob("run.json")).parent
    steps = sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())
    assert steps[-1] in (3, 4)
    path = cut.bundle_path(entry)
    meta = bundle.read_meta(path)
    assert meta["programs"][0]["epoch"] == steps[-1]
    assert len(meta["programs"][0]["history"].splitlines()) == steps[-1]
    assert path.stat().st_size < bundle.MAX_MB * 2 ** 20
    assert not (cut.reproductions / "campaign-transfer").exists()
    state = json.loads((cut.folder / "state.json").read_text())
    assert state["cells"][entry.id]["status"] == "under way"
    _same_arrays_after_restore(path, folder, steps[-1], tmp_path / "fresh")
    _split_bundles_restore_the_same(cut.work / entry.slug, meta, folder, steps[-1], tmp_path)

    shutil.rmtree(cut.work)  # a new machine: only the committed files
    lines = loop.run_campaign(cut)
    assert any("finished" in line for line in lines)
    assert not path.exists()  # removed once the cell is collected
    a, b = _collected(whole), _collected(cut)
    assert a["cells"][0]["per_seed"] == b["cells"][0]["per_seed"]
    assert [r["runs"] for r in a["records"]] == [r["runs"] for r in b["records"]]
    assert gather.is_done(entry, cut.reproductions)
    assert "remaining: 0 runnable" in loop.remaining([entry], cut)[0]


def _split_bundles_restore_the_same(work: Path, meta: dict, folder: Path, epoch: int,
                                    tmp_path: Path) -> None:
    """Past `max_mb`, arrays go to parts beside the bundle (one over a part's room cut
    in pieces); each file keeps under `max_mb`; copied and restored, the arrays are the
    same; a missing part is named."""
    room = 256  # bytes of arrays per file: the larger arrays are cut in pieces
    max_mb = (len(zlib.compress(json.dumps(meta).encode())) + bundle.PART_MARGIN + room
              ) / 2 ** 20
    split = bundle.write_bundle(work, tmp_path / "small" / "b.npz", cell=meta["cell"],
                                device_kind="cpu-2core", max_mb=max_mb)
    files = bundle.bundle_files(tmp_path / "small" / "b.npz")
    assert len(files) == split["parts"] + 1 > 2 and split["pieces"]
    assert all(f.stat().st_size <= max_mb * 2 ** 20 for f in files)
    copied = tmp_path / "copied" / "c.npz"
    bundle.copy_bundle(files[0], copied)
    assert [f.name for f in bundle.bundle_files(copied)][1] == "c.part1.npz"
    _same_arrays_after_restore(copied, folder, epoch, tmp_path / "fresh-split")
    bundle.remove_bundle(copied)
    assert not list(copied.parent.iterdir())
    files[-1].unlink()
    with pytest.raises(bundle.BundleError, match=rf"{files[-1].name}: a part of bundle"):
        bundle.restore_bundle(files[0], tmp_path / "fresh-missing")


def _same_arrays_after_restore(path: Path, folder: Path, epoch: int, fresh: Path) -> None:
    """The bundle restores the checkpoint's arrays and JSON exactly."""
    before, meta_before = bundle._read_checkpoint(folder, epoch)
    meta = bundle.restore_bundle(path, fresh)
    after, meta_after = bundle._read_checkpoint(fresh / meta["programs"][0]["folder"], epoch)
    flat_a, flat_b = {}, {}
    bundle._skeleton(before, "x", flat_a)
    bundle._skeleton(after, "x", flat_b)
    assert flat_a.keys() == flat_b.keys() and len(flat_a) > 10
    for key in flat_a:
        np.testing.assert_array_equal(flat_a[key], flat_b[key])
    assert meta_before == meta_after
    with pytest.raises(bundle.BundleError, match="not a campaign bundle"):
        bundle.read_meta(fresh / meta["programs"][0]["folder"] / "run.json")


def test_a_gpu_slice_merges_cell_by_cell_into_a_tree_that_moved_on(tmp_path):
    """A slice's copy of reproductions/ (as a tar) gives this tree only what it advanced:
    its finished cell into a run of its own device kind, nothing of the cell the campaign
    here finished meanwhile, and no cell that was trained on both machines."""
    import tarfile

    from reproduce.campaign.merge import merge_campaign

    swan, gcn = _entry("swan"), _entry("gcn")
    here = _setup(tmp_path, [swan, gcn], "here")
    there = dataclasses.replace(here, reproductions=tmp_path / "slice" / "reproductions",
                                work=tmp_path / "slice" / "work", device_kind="h200",
                                cells=[swan.id])
    shutil.copytree(here.reproductions, there.reproductions)  # what the slice copies
    loop.run_campaign(there)
    loop.run_campaign(dataclasses.replace(here, cells=[gcn.id]))  # here, meanwhile
    measured = there.reproductions / "runtime-h200"  # a measurement outside the plan
    measured.mkdir()
    (measured / "results.json").write_text('{"experiment": "runtime", "cells": []}')
    tar = tmp_path / "reproductions.tar"
    with tarfile.open(tar, "w") as out:
        out.add(there.reproductions, arcname="reproductions")

    trained_here = here.work / swan.slug / "program"
    trained_here.mkdir(parents=True)
    (trained_here / "run.json").write_text("{}")
    refused, copied, timed = merge_campaign(tar, here)
    assert refused.startswith(f"{swan.id}: not merged: it was trained here too")
    assert copied == "runtime-h200: measured there, copied into reproductions/runtime-h200"
    # the slice's timed program (its shape and pace) joins this tree's costs, once
    assert timed == "costs: 1 measured program(s) taken into reproductions/campaign/costs.json"
    [cost] = [c for c in json.loads((here.folder / "costs.json").read_text())["programs"]
              if c["device"] == "h200"]
    assert cost["cell"] == swan.id and cost["runs"] == 2 and cost["epochs"] >= 1
    assert (here.reproductions / "runtime-h200" / "results.json").exists()
    shutil.rmtree(trained_here)
    assert merge_campaign(tar, here) == [f"{swan.id}: finished on h200, collected into "
                                         f"reproductions/campaign-transfer-h200"]
    merged = json.loads((here.reproductions / "campaign-transfer-h200" / "results.json")
                        .read_text())
    assert [c["model"] for c in merged["cells"]] == ["swan"]
    assert {r["model"] for r in merged["records"]} == {"swan"}
    assert [c["model"] for c in _collected(here)["cells"]] == ["gcn"]
    assert all(gather.is_done(e, here.reproductions) for e in (swan, gcn))
    state = json.loads((here.folder / "state.json").read_text())["cells"]
    assert state[swan.id]["status"] == "finished" and set(state[swan.id]["seconds"]) == {"h200"}
    assert set(state[gcn.id]["seconds"]) == {"cpu-2core"}
    assert merge_campaign(tar, here) == [f"{tar}: nothing newer than this tree"]


def test_a_merged_cell_is_named_after_the_device_that_advanced_it_there():
    from reproduce.campaign.merge import device_kind

    # h200 came first in the dict (an earlier slice), the CPU advanced it this time
    mine = {"seconds": {"h200": 40.0, "cpu-2core": 100.0}}
    assert device_kind(mine, {"seconds": {"h200": 40.0, "cpu-2core": 900.0}}) == "cpu-2core"
    assert device_kind(mine, {"seconds": {"h200": 90.0, "cpu-2core": 100.0}}) == "h200"
    assert device_kind({}, {"seconds": {"h100": 5.0}}) == "h100"


def test_no_cell_starts_when_no_program_could(tmp_path):
    """With less left than a program's first epoch, the campaign stops at once: no cell
    is visited only to report "no time for another program"."""
    opts = _setup(tmp_path, [_entry("swan"), _entry("gcn")], "short")
    lines = loop.run_campaign(opts, deadline=Deadline(time.monotonic() + 30.0, margin=0.0))
    assert not [line for line in lines if "no time for another program" in line]
    assert not opts.work.exists() or not any(opts.work.iterdir())
    assert any(line.startswith("remaining: 2 runnable") for line in lines)
    assert any("less than a program's first epoch (60 s): no further cell starts" in line
               for line in lines)


def test_a_cell_waiting_for_its_screening_runs_at_the_point_it_selected(tmp_path):
    from swan_jax.experiments.config import to_dict

    entries = {e.id: e for e in plan.load_plan(REPO / "reproductions/campaign/plan.toml")}
    screen, full = entries["graphprop-screen/sssp/swan"], entries["graphprop/sssp/swan"]
    assert full.status == "after graphprop-screen/sssp/swan" and not full.runnable
    assert gather.resolve(full, entries, []) is full  # nothing screened yet
    _, cfg = cell_config(screen, tmp_path)
    best = {"hidden": 30, "num_layers": 20, "adjacency": "adj", "epsilon": 0.1, "gamma": 0.1,
            "beta": 1.0, "learning_rate": 0.003, "weight_decay": 1e-6}
    screened = {"experiment": "graphprop", "config": json.loads(json.dumps(
        to_dict(cfg), default=str)), "cells": [{"task": "sssp", "labels": "paper",
                                               "model": "swan", "test_mean": 0.5,
                                               "best_hparams": best}]}
    ready = gather.resolve(full, entries, [screened])
    assert ready.runnable and ready.config["grid"] == {k: [v] for k, v in best.items()}
    _, full_cfg = cell_config(ready, tmp_path)
    assert full_cfg.epochs == 1500 and dict(full_cfg.grid)["hidden"] == (30,)
    other = {**screened, "config": {**screened["config"], "epochs": 50}}  # another protocol
    assert not gather.resolve(full, entries, [other]).runnable


def test_graphprop_cells_cover_table_1_and_its_controls_come_first(tmp_path):
    entries = {e.id: e for e in plan.load_plan(REPO / "reproductions/campaign/plan.toml")}
    assert {"gin", "sage", "gat"} <= set(GRAPHPROP_MODELS)
    for task in ("diameter", "sssp", "eccentricity"):
        for model in GRAPHPROP_MODELS:
            full = entries[f"graphprop/{task}/{model}"]
            if model in FULL_GRID_MODELS:  # the protocol on the whole grid, no screen
                assert full.runnable and f"graphprop-screen/{task}/{model}" not in entries
                _, cfg = cell_config(full, tmp_path)
                assert (cfg.epochs, cfg.patience, len(cfg.seeds)) == (1500, 100, 4)
                continue
            screen = entries[f"graphprop-screen/{task}/{model}"]
            assert screen.runnable and screen.config["epochs"] == SCREEN_EPOCHS
            assert full.status == f"after {screen.id}"
    controls = [entries["graphprop-control/sssp/adgn"], entries["graphprop/sssp/gcn"]]
    assert sorted(e.id for e in entries.values() if e.id.startswith("graphprop-control/")) \
        == ["graphprop-control/sssp/adgn"]
    first_screen = min(e.priority for e in entries.values()
                       if e.id.startswith("graphprop-screen/"))
    assert all(e.runnable and e.priority < first_screen for e in controls)
    _, cfg = cell_config(entries["graphprop-control/sssp/adgn"], tmp_path)
    assert (cfg.tasks, cfg.labels, cfg.models) == (("sssp",), ("paper",), ("adgn",))
    assert (cfg.epochs, cfg.patience, len(cfg.seeds)) == (1500, 100, 4)  # the protocol
    assert dict(cfg.grid)["epsilon"] == (1.0, 0.1)


def test_graphprop_costs_follow_each_cell_s_own_programs():
    """A screen is priced from its own grid (SWAN 72 runs per program, ADGN 12, GraphCON
    6: one flat figure for every model's screen overpriced the small ones 5-20x), a cell
    after its screen as one point, and a baseline's whole grid from its 12 programs."""
    screen = {"tasks": ["sssp"], "labels": ["paper"], "epochs": SCREEN_EPOCHS, "seeds": [0]}
    cost = {m: graphprop_cost({**screen, "models": [m]}, m)["h200"]
            for m in ("swan", "adgn", "graphcon")}
    assert cost["swan"] > 2 * cost["adgn"] > 0 and cost["adgn"] > cost["graphcon"] > 0
    one = {"hidden": [30], "num_layers": [20], "adjacency": ["adj"], "epsilon": [0.1],
           "gamma": [0.1], "beta": [1.0]}
    point = graphprop_cost({"tasks": ["sssp"], "models": ["swan"], "grid": one}, "swan")
    whole = graphprop_cost({"tasks": ["sssp"], "models": ["swan"]}, "swan")
    assert 0 < point["h200"] < whole["h200"] / 20 and point["cpu-2core"] < whole["cpu-2core"]
    gcn = graphprop_cost({"tasks": ["sssp"], "models": ["gcn"]}, "gcn")
    assert gcn["h200"] > 12 * 15 / 60  # 12 programs, a compile each at least


def test_command_line_refusals_are_one_line(tmp_path, capsys):
    from reproduce.campaign.__main__ import main

    with pytest.raises(SystemExit, match="--budget-minutes must be > 0"):
        main(["run", "--budget-minutes", "0"])
    with pytest.raises(SystemExit, match="campaign: --probe-seconds must be >= 0"):
        main(["probe", "--probe-seconds", "-1"])
    with pytest.raises(SystemExit, match=r"--probe-epochs must be >= 2 \(the first compiles"):
        main(["probe", "--probe-epochs", "1"])
    with pytest.raises(SystemExit, match="campaign: run takes no files .*did you mean merge"):
        main(["run", str(tmp_path / "slice.tar")])
    with pytest.raises(SystemExit, match="campaign: merge needs the .tar"):
        main(["merge", "--no-render"])
    (tmp_path / "slice.tar").write_bytes(b"not a tar")
    with pytest.raises(SystemExit, match="campaign: .*slice.tar: not a readable tar"):
        main(["merge", str(tmp_path / "slice.tar"), "--reproductions", str(tmp_path),
              "--no-render"])
    with pytest.raises(SystemExit, match="campaign: .*missing.toml: no such plan file"):
        main(["status", "--plan", str(tmp_path / "missing.toml"), "--device-kind", "h200"])
    (tmp_path / "x.npz").write_bytes(b"not a bundle")
    with pytest.raises(SystemExit, match="campaign: .*x.npz: not a campaign bundle"):
        main(["run", "--plan", str(REPO / "reproductions/campaign/plan.toml"),
              "--reproductions", str(tmp_path), "--bundle-in", str(tmp_path / "x.npz"),
              "--device-kind", "cpu-2core", "--budget-minutes", "1", "--no-render"])


class SigtermAtEpochTwo(Deadline):
    """A generous deadline; the process sends itself SIGTERM after the 2nd epoch."""

    def on_epoch_end(self, epoch, record):
        if epoch == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        super().on_epoch_end(epoch, record)


def test_sigterm_stops_after_a_checkpoint_bundles_and_starts_nothing_else(tmp_path):
    first, second = _entry("gcn"), dataclasses.replace(_entry("gcn"), id="transfer/ring/3/gcn",
                                                       config={**_entry("gcn").config,
                                                               "topologies": ["ring"]})
    opts = _setup(tmp_path, [first, second], "a")
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    lines = loop.run_campaign(opts, deadline=SigtermAtEpochTwo(time.monotonic() + 3600))
    assert any("interrupted (stopped after a checkpoint)" in line for line in lines)
    meta = bundle.read_meta(opts.bundle_path(first))
    assert meta["programs"][0]["epoch"] in (2, 3)  # the epoch under way is saved or not run
    assert not (opts.work / second.slug).exists()  # no further cell started
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers


class MergeWhileTraining(Deadline):
    """A generous deadline; after the first epoch, another writer (a `merge` of a GPU
    slice) records a cell of its own in the state file."""

    state_file: Path | None = None

    def on_epoch_end(self, epoch, record):
        if epoch == 0:
            state = json.loads(self.state_file.read_text())
            state["cells"]["transfer/ring/3/gcn"] = {"status": "finished", "updated": "x"}
            self.state_file.write_text(json.dumps(state))
        super().on_epoch_end(epoch, record)


def test_a_merge_while_the_campaign_trains_keeps_its_cells(tmp_path):
    entry = _entry("gcn")
    opts = _setup(tmp_path, [entry], "a")
    state_file = opts.folder / loop.STATE_FILE
    state_file.write_text(json.dumps({"cells": {}}))
    deadline = MergeWhileTraining(time.monotonic() + 3600)
    deadline.state_file = state_file
    loop.run_campaign(opts, deadline=deadline)
    cells = json.loads(state_file.read_text())["cells"]
    assert cells["transfer/ring/3/gcn"] == {"status": "finished", "updated": "x"}
    assert cells[entry.id]["status"] == "finished"


# ======================================================================== missing data


def test_missing_data_leaves_an_under_way_cell_as_it_was_in_one_line(tmp_path, monkeypatch):
    """A cell whose data is missing (here: none on disk, and the campaign downloads
    nothing unless told) is skipped before any compile: one line naming what is missing,
    and its state (under way, its progress) is not replaced by a failure (issue 41: a
    campaign outside make recorded `failed: SweepRefused: missing data, nothing was
    trained:` over an under-way cell; issue 36: a GPU slice spent its time on
    lrgb/peptides-struct/*, whose files it does not have)."""
    def no_training(*args, **kwargs):
        raise AssertionError("a cell without its data reached training")

    monkeypatch.setattr(loop, "run_cell", no_training)
    empty = tmp_path / "empty"
    empty.mkdir()
    entry = plan.Entry(id="lrgb/peptides-struct/swan", experiment="lrgb", table="Table 3",
                       priority=1, status="runnable",
                       config={"datasets": ["peptides-struct"], "variants": ["swan"],
                               "data_dir": str(empty)},
                       cost_minutes={"cpu-2core": 1.0})
    opts = _setup(tmp_path, [entry], "missing")
    under_way = {"cells": {entry.id: {"status": "under way", "programs": "0 of 1",
                                      "fraction": 0.15, "epochs": {"cpu-2core": 44}}}}
    (opts.folder / loop.STATE_FILE).write_text(json.dumps(under_way))
    lines = loop.run_campaign(opts)
    [line] = [line for line in lines if line.startswith(entry.id)]
    assert line.startswith(f"{entry.id}: data not here (missing raw file(s): "
                           f"peptides-struct: ")
    assert line.endswith("; and 1 more file(s); or pass --download), skipped")
    assert f"put it at {empty}" in line and "\n" not in line
    assert json.loads((opts.folder / loop.STATE_FILE).read_text()) == under_way


def test_the_campaign_finds_the_repository_data_as_the_makefile_does(tmp_path, monkeypatch):
    """Outside make: the plan's data_dir, else $SWAN_DATA_DIR (read by the experiment),
    else the repository's ../shared/data (here a stand-in folder)."""
    from reproduce.campaign import runner

    entry = plan.Entry(id="lrgb/peptides-func/swan", experiment="lrgb", table="Table 3",
                       priority=1, status="runnable", config={"datasets": ["peptides-func"]},
                       cost_minutes={"cpu-2core": 1.0})
    monkeypatch.setattr(runner, "REPO_DATA", tmp_path)
    monkeypatch.delenv("SWAN_DATA_DIR", raising=False)
    assert cell_config(entry, tmp_path / "w")[1].data_dir == tmp_path
    mine = dataclasses.replace(entry, config={**entry.config, "data_dir": "/else"})
    assert cell_config(mine, tmp_path / "w")[1].data_dir == Path("/else")
    monkeypatch.setenv("SWAN_DATA_DIR", "/from/env")
    assert cell_config(entry, tmp_path / "w")[1].data_dir is None  # the loader reads the env
    monkeypatch.delenv("SWAN_DATA_DIR")
    monkeypatch.setattr(runner, "REPO_DATA", tmp_path / "absent")
    assert cell_config(entry, tmp_path / "w")[1].data_dir is None


def test_the_campaign_renders_results_md_with_the_tree_s_code_not_the_code_it_loaded(
        tmp_path, monkeypatch):
    """A campaign runs for hours while the renderer's text changes in the tree: its
    closing render must not write the text of the code it loaded at its start (it did,
    once, and a commit failed the check that RESULTS.md is rendered from the tree)."""
    from reproduce.results import sections

    opts = dataclasses.replace(_setup(tmp_path, [_entry()], "fresh"), render=True)
    monkeypatch.setattr(sections, "PLATEAU_NOTE", "STALE NOTE OF AN OLDER RENDERER")
    lines = loop.closing(opts, [_entry()])
    text = (opts.reproductions.parent / "RESULTS.md").read_text()
    assert lines[0].startswith("wrote ") and "A plateau, not a floor" in text
    assert "STALE NOTE" not in text
