"""The reproduction campaign: the cells file, carried run folders, the deadline, merge.

Tiny cells on the CPU (16 training graphs, width 8, one layer, a few epochs): each run
of an experiment's command compiles for seconds and trains for less.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import random
import shutil
import tarfile
import time
from pathlib import Path

import pytest

from reproduce.campaign import carry, cells, gather, loop
from reproduce.campaign.__main__ import deadline, main
from reproduce.campaign.merge import merge_window

REPO = Path(__file__).resolve().parents[1]
PLAN = REPO / "reproductions" / "campaign" / "plan.toml"
TINY = {"topologies": ["line"], "distances": [1], "models": ["swan"], "sizes": [16, 8, 8],
        "hidden": 8, "seeds": [0, 1], "patience": "none",
        "grid": {"epsilon": [0.5], "beta": [1.0], "adjacency": ["sym"]}}


def setup(tmp_path: Path, name: str, other: bool = False, **config) -> loop.Options:
    """A tree with one tiny transfer cell (`config` on top of TINY); `other`: and its
    GCN twin."""
    root = tmp_path / name / "reproductions"
    (root / "campaign").mkdir(parents=True)
    shutil.copy(REPO / "reproductions" / "paper_values.json", root)
    (root / "campaign" / "plan.toml").write_text("".join(
        f'[[cell]]\nid = "transfer/line/1/{m}"\nexperiment = "transfer"\npriority = 1\n'
        f"config = {cells.toml_value({**TINY, 'models': [m], **config})}\n"
        for m in ("swan", "gcn")[:1 + other]))
    return loop.Options(plan=root / "campaign" / "plan.toml", reproductions=root,
                        work=tmp_path / name / "work", render=False, kind="cpu-2core",
                        min_start=0.0, grace=60.0)


def collected_runs(opts: loop.Options) -> list:
    path = opts.reproductions / "campaign-transfer" / "results.json"
    return [r["runs"] for r in json.loads(path.read_text())["records"]]


# ====================================================================== the cells file


def test_the_committed_cells_put_the_paper_s_claims_first_and_each_builds_its_config():
    plan = cells.load_cells(PLAN)
    assert len({c.id for c in plan}) == len(plan) == 147
    assert [c.priority for c in plan] == sorted(c.priority for c in plan)
    first = {c.id for c in plan[:6]}
    assert first == {f"transfer/{t}/50/{m}" for t in ("line", "ring", "crossed-ring")
                     for m in ("swan", "adgn")}
    for cell in plan:
        if cell.runnable and not cell.measurement:
            gather.cell_config(cell)  # raises on a key the experiment does not know
        if cell.measurement:  # its command is a module of this tree
            argv = cells.command(cell, Path("run"), Path("reproductions"))
            assert argv[1] == "-m" and importlib.util.find_spec(argv[2]), argv


def test_a_bad_cells_file_is_named_in_one_line(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text('[[cell]]\nid = "a"\nexperiment = "transfer"\npriority = 1\ncost = 2\n')
    with pytest.raises(cells.PlanError, match="cell 1 .a.: unknown key.s. cost"):
        cells.load_cells(path)
    path.write_text('[[cell]]\nid = "a"\nexperiment = "trasnfer"\npriority = 1\n')
    with pytest.raises(cells.PlanError, match="experiment 'trasnfer' is none of"):
        cells.load_cells(path)


def test_until_takes_a_time_of_day_or_minutes():
    now = datetime.datetime(2026, 11, 28, 18, 0)
    assert deadline("30", now) == now.timestamp() + 1800
    assert deadline("19:30", now) == now.replace(hour=19, minute=30).timestamp()
    assert deadline("17:00", now) == (now.replace(hour=17) + datetime.timedelta(days=1)
                                      ).timestamp()
    with pytest.raises(SystemExit):
        main(["run", "--until", "soon"])


# ====================================================================== carried folders


STATE = random.Random(0).randbytes(20000)  # incompressible: several parts of 1 kB


def test_a_run_folder_carried_in_parts_comes_back_whole(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints" / "p" / "7").mkdir(parents=True)
    (run / "checkpoints" / "p" / "7" / "state").write_bytes(STATE)
    (run / "checkpoints" / "p" / "history.jsonl").write_text("{}\n" * 7)
    (run / "results.json").write_text(json.dumps({"records": [{"program": "a"}]}))
    (run / "submitit").mkdir()
    (run / "submitit" / "log").write_text("this machine's only")
    written = carry.pack(run, tmp_path / "carried", "cell", max_mb=0.001)
    assert len(written) > 1 and all(p.stat().st_size <= 1049 for p in written)
    assert carry.progress_of(tmp_path / "carried", "cell") == carry.progress(run) == (1, 7)
    carry.unpack(tmp_path / "carried", "cell", tmp_path / "back")
    assert (tmp_path / "back" / "checkpoints" / "p" / "7" / "state").read_bytes() == (
        STATE)
    assert not (tmp_path / "back" / "submitit").exists()
    assert carry.progress_of(tmp_path / "carried", "other") == (-1, -1)


def test_a_run_folder_s_progress_counts_the_epochs_of_its_programs_under_way(tmp_path):
    for name, epochs in (("p-done", 40), ("p-under-way", 7)):
        (tmp_path / "checkpoints" / name).mkdir(parents=True)
        (tmp_path / "checkpoints" / name / "history.jsonl").write_text("{}\n" * epochs)
    records = [{"checkpoint_dir": "elsewhere/checkpoints/p-done"}]  # another machine's path
    (tmp_path / "results.json").write_text(json.dumps({"records": records}))
    assert carry.progress(tmp_path) == (1, 7)


@pytest.mark.parametrize("programs, done", [
    ({"planned": 12, "done": 3}, False),  # a sweep stopped between programs
    ({"planned": 12, "done": 12}, True),
    (None, True),  # written before results.json counted them: its cells are the sweep's
])
def test_a_run_folder_is_finished_when_every_program_of_its_plan_is_done(
        tmp_path, programs, done):
    results = {"cells": [{"task": "sssp"}], "records": []}
    if programs is not None:
        results["programs"] = programs
    (tmp_path / "results.json").write_text(json.dumps(results))
    assert carry.finished(tmp_path) is done


# ====================================================================== the loop


# every epoch its own call and checkpoint (the same compiled step in both runs): a
# deadline always finds epochs saved
SAVED = {"epochs": 150, "checkpoint_seconds": 0}


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """A tiny cell run to its end by the loop (no deadline)."""
    opts = setup(tmp_path_factory.mktemp("straight"), "tree", **SAVED)
    lines = loop.run_campaign(opts)
    return opts, lines


def test_a_cell_runs_by_its_experiment_s_command_and_is_collected(straight):
    opts, lines = straight
    assert "transfer/line/1/swan: finished" in lines
    assert carry.finished(opts.work / "transfer__line__1__swan")
    assert len(collected_runs(opts)) == 1
    assert loop.chosen(opts) == []  # collected: nothing left to run
    assert not list(opts.carried.glob("*"))


def deadline_after_epochs(work: Path, epochs: int):
    """`loop.run_until` whose deadline comes once `work` holds `epochs` saved epochs."""
    import signal
    import subprocess

    def run_until(argv, until, grace):
        proc = subprocess.Popen(argv, env=loop.environment())
        while proc.poll() is None and sum(
                len(h.read_text().splitlines()) for h in work.rglob("history.jsonl")) < epochs:
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=grace), False

    return run_until


def test_a_deadline_stops_a_cell_which_a_fresh_machine_finishes_identically(tmp_path,
                                                                             straight,
                                                                             monkeypatch):
    here = setup(tmp_path, "here", **SAVED)
    # the deadline as the loop meets it (SIGTERM to the cell's command), once a few epochs
    # are saved: a wall-clock deadline found the compile unfinished on a loaded machine
    monkeypatch.setattr(loop, "run_until", deadline_after_epochs(here.work, 3))
    lines = loop.run_campaign(here)
    monkeypatch.undo()
    assert any(line.startswith("transfer/line/1/swan: unfinished") for line in lines)
    # a fresh machine: the tree (with the carried parts) but not the run folder
    shutil.rmtree(here.work)
    here.until = float("inf")
    assert "transfer/line/1/swan: finished" in loop.run_campaign(here)
    assert collected_runs(here) == collected_runs(straight[0])
    assert not carry.parts(here.carried, "transfer__line__1__swan")


def test_a_window_s_cells_are_merged_as_that_device_s(tmp_path, straight):
    opts = setup(tmp_path, "tree", other=True)
    window = tmp_path / "window"
    (window / "runs" / "transfer__line__1__swan").mkdir(parents=True)
    for file in (straight[0].work / "transfer__line__1__swan").glob("*.*"):  # no checkpoints
        shutil.copy(file, window / "runs" / "transfer__line__1__swan")
    under_way = tmp_path / "under_way"  # the other cell, left unfinished by the window
    (under_way / "p").mkdir(parents=True)
    (under_way / "p" / "history.jsonl").write_text("{}\n" * 3)
    carry.pack(under_way, window / "carried", "transfer__line__1__gcn")
    (window / "kind").write_text("h200\n")
    with tarfile.open(tmp_path / "window.tar", "w") as tar:
        tar.add(window, arcname=".")
    lines = merge_window(tmp_path / "window.tar", opts)
    assert (opts.reproductions / "campaign-transfer-h200" / "results.json").exists()
    assert "transfer/line/1/gcn: carried from the h200 window (3 epoch(s) under way)" in lines
    assert carry.progress_of(opts.carried, "transfer__line__1__gcn") == (0, 3)
    # taken once: the same window again brings nothing newer for that cell
    assert not any("carried" in line for line in merge_window(tmp_path / "window.tar", opts))


def test_a_collected_file_holding_a_renamed_model_takes_new_cells():
    """The committed campaign-transfer holds cells of models renamed since (their layer
    changed: `gcn-biasbefore`, left out of its `models`); a new cell collected beside them
    keeps their results and records, though their program digests are the same."""
    old = {"model": "gcn-biasbefore", "program": "a81c", "epochs": 2000}
    new = {**old, "model": "gcn"}  # the same program digest: the layer is not in it
    merged = gather.merge_results(
        {"config": {"models": []}, "cells": [{"model": "gcn-biasbefore"}],
         "records": [old]},
        {"experiment": "transfer", "config": {"models": ["gcn"]}, "cells": [{"model": "gcn"}],
         "records": [new]}, ["model"], ["models"])
    assert [c["model"] for c in merged["cells"]] == ["gcn-biasbefore", "gcn"]
    assert merged["records"] == [old, new]  # the renamed model's records kept


def test_a_signal_during_a_collect_waits_for_it():
    """SIGTERM while the loop collects or carries a cell: recorded, not raised (it
    printed a traceback and left the collect to the next call), handlers restored."""
    import os
    import signal

    before = signal.getsignal(signal.SIGTERM)
    arrived: list[int] = []
    with loop.held(arrived):
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
    assert arrived == [signal.SIGTERM, signal.SIGINT]
    assert signal.getsignal(signal.SIGTERM) is before
