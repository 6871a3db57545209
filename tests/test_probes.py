"""Probes and the plan priced from them (`reproduce.campaign.probe`, `.shapes`): a fake
measured probe prices every program of its shape and the smaller ones of its cells (the
arithmetic, no timing asserted), screens are priced as the programs the campaign would
build, probes go by the plan minutes they price, and a probe keeps nothing but its cost."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from reproduce.campaign import costs, loop, plan, probe, shapes
from reproduce.campaign.defaults import measured
from reproduce.campaign.runner import cell_config

REPO = Path(__file__).resolve().parents[1]
SMALL = {"hidden": [10, 20], "num_layers": [1, 2]}  # 4 programs of 72 runs each


def _screen(task: str, minutes: float = 100.0) -> plan.Entry:
    return plan.Entry(id=f"graphprop-screen/{task}/swan", experiment="graphprop",
                      table="Table 1", priority=400, status="runnable",
                      config={"tasks": [task], "labels": ["paper"], "models": ["swan"],
                              "epochs": 200, "seeds": [0], "patience": 100, "grid": SMALL},
                      cost_minutes={"cpu-2core": 9000.0, "h100": 1.2 * minutes,
                                    "h200": minutes},
                      basis="modelled (test)")


def _probe(root: Path, program: shapes.ProgramShape, first: float, pace: float) -> None:
    costs.record(root / "campaign", "h200", "graphprop-screen/sssp/swan",
                 [{"program": program.name, "experiment": "graphprop", "runs": program.runs,
                   "nodes": 1000, "layers": 2, "hidden": 20, "shape": program.shape,
                   "epochs": 5, "first_epoch_seconds": first, "seconds_per_epoch": pace}],
                 probe=True)


def test_a_probe_of_the_largest_program_prices_its_screen_on_every_task(tmp_path: Path):
    sssp, diameter = _screen("sssp"), _screen("diameter")
    programs, epochs, note = shapes.cell_programs(sssp, tmp_path)
    assert (len(programs), epochs, note) == (4, 200, "")
    assert [p.runs for p in programs] == [72] * 4
    largest = max(programs, key=lambda p: p.work)
    assert "hidden=20,num_layers=2" in largest.shape and largest.shape.startswith(
        "graphprop:paper/swan/")  # the task is not part of the shape
    _probe(tmp_path, largest, first=12.0, pace=0.25)
    priced = measured(sssp, tmp_path)
    each = (12.0 + 200 * 0.25) / 60  # the first epoch, then the epoch cap at the pace
    assert priced.cost_minutes["h200"] == round(4 * each, 1)  # programs x epochs x pace
    assert priced.measured_minutes == {"h200": round(4 * each, 1)}
    assert priced.cost_minutes["h100"] == 120.0  # nothing measured there: the model
    assert priced.basis.startswith(
        "h100 modelled; h200 measured: 4 program(s), 1 at its own shape, 3 at a larger "
        "measured program's pace (an upper bound); from probe, h200, ")
    assert largest.shape in priced.basis and priced.basis.endswith(
        "; the model: modelled (test)")
    other = measured(diameter, tmp_path)  # the same graphs, another target column
    assert other.cost_minutes == priced.cost_minutes


def test_a_probe_of_a_small_program_leaves_the_larger_ones_modelled(tmp_path: Path):
    sssp = _screen("sssp")
    programs, _, _ = shapes.cell_programs(sssp, tmp_path)
    smallest = min(programs, key=lambda p: p.work)  # hidden 10, 1 layer: 720 of 6,480
    _probe(tmp_path, smallest, first=6.0, pace=0.05)
    priced = measured(sssp, tmp_path)
    own = (6.0 + 200 * 0.05) / 60
    rest = 100.0 * (1 - smallest.work / sum(p.work for p in programs))
    assert priced.cost_minutes["h200"] == round(own + rest, 1)
    assert priced.measured_minutes == {"h200": round(own, 1)}
    assert "4 program(s), 1 at its own shape, 3 modelled (their share" in priced.basis


def test_the_screens_are_priced_as_the_programs_the_campaign_builds(tmp_path: Path):
    """GraphProp: 12 programs (width x depth) of 72 points = the paper grid's 864;
    LRGB: 16 static points x 32 = 512 points, 16 runs a program, and with the memory
    figures the campaign records (packing.json) the cut it would make."""
    from swan_jax.experiments.sweep import _cell_programs

    cells = {e.id: e for e in plan.load_plan(REPO / "reproductions/campaign/plan.toml")}
    graphprop, _, _ = shapes.cell_programs(cells["graphprop-screen/sssp/swan"], tmp_path)
    assert (len(graphprop), sum(p.runs for p in graphprop)) == (12, 864)
    screen = cells["lrgb-screen/peptides-func/swan"]
    lrgb, epochs, note = shapes.cell_programs(screen, tmp_path)
    assert (len(lrgb), {p.runs for p in lrgb}, epochs) == (32, {16}, 30)
    assert "not known yet" in note
    exp, cfg = cell_config(screen, tmp_path / "w")
    uncut = [p for c in exp.cells(cfg) for p in _cell_programs(exp, cfg, c)]
    figures = {f"{p.ident}@64GiB": 8 if p.static["num_layers"] == 32 else 40 for p in uncut}
    (tmp_path / "campaign").mkdir()
    (tmp_path / "campaign" / costs.PACKING_FILE).write_text(json.dumps(figures))
    lrgb, _, note = shapes.cell_programs(screen, tmp_path)
    deep = [p for p in lrgb if "num_layers=32," in p.name]
    assert note == "" and (len(lrgb), sum(p.runs for p in lrgb)) == (40, 512)
    assert (len(deep), {p.runs for p in deep}) == (16, {8})


def _opts(tmp_path: Path, entries: list[plan.Entry], kind: str = "h200") -> loop.Options:
    root = tmp_path / "reproductions"
    (root / "campaign").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "reproductions" / "paper_values.json", root)
    plan_file = root / "campaign" / "plan.toml"
    plan_file.write_text(plan.dump_plan(entries, "test plan"))
    return loop.Options(plan=plan_file, reproductions=root, work=tmp_path / "work",
                        device_kind=kind, render=False)


TINY = {"sizes": [16, 8, 8], "hidden": 8, "seeds": [0], "epochs": 60, "patience": "none",
        "grid": {"epsilon": [0.5], "beta": [1.0], "adjacency": ["sym"]}}


def _transfer(minutes: float) -> plan.Entry:
    return plan.Entry(id="transfer/line/3/swan", experiment="transfer", table="Fig. 3",
                      priority=103, status="runnable",
                      config={"topologies": ["line"], "distances": [3], "models": ["swan"],
                              **TINY},
                      cost_minutes={"cpu-2core": minutes, "h100": minutes, "h200": minutes})


def test_probes_go_by_the_plan_minutes_they_price(tmp_path: Path):
    entries = [_transfer(150.0), _screen("sssp"), _screen("diameter")]
    opts = _opts(tmp_path, entries)
    order = probe.candidates(entries, opts, {})
    # the screens' largest shape prices both screens (200 minutes), before the transfer
    # cell's 150; each screen's smaller shapes are then priced already: not probed
    assert [c.minutes for c in order] == [200.0, 150.0]
    assert order[0].cells == ("graphprop-screen/diameter/swan", "graphprop-screen/sssp/swan")
    assert "hidden=20,num_layers=2" in order[0].shape and order[1].cell.id == entries[0].id
    programs, _, _ = shapes.cell_programs(entries[1], opts.reproductions)
    _probe(opts.reproductions, max(programs, key=lambda p: p.work), 12.0, 0.25)
    assert [c.cell.id for c in probe.candidates(entries, opts, {})] == [entries[0].id]


def test_a_probe_records_its_pace_and_keeps_nothing_else(tmp_path: Path):
    entry = _transfer(1.0)
    opts = _opts(tmp_path, [entry], kind="cpu-2core")
    lines = probe.run_probes(opts, seconds=600, epochs=3)
    [item] = json.loads((opts.folder / costs.COSTS_FILE).read_text())["programs"]
    [program] = shapes.cell_programs(entry, opts.reproductions)[0]
    assert item["probe"] is True and item["shape"] == program.shape
    assert item["cell"] == entry.id and item["device"] == "cpu-2core"
    assert item["epochs"] == 3 and item["seconds_per_epoch"] > 0
    assert any(line.startswith(f"probe 1: {program.shape}: 3 epoch(s)") for line in lines)
    # no cell collected, no state, no bundle, no work folder left
    assert sorted(p.name for p in opts.folder.iterdir()) == [costs.COSTS_FILE, "plan.toml"]
    assert not any(opts.reproductions.glob("campaign-*"))
    assert not any((opts.work / "_probes").rglob("*"))
    priced = measured(entry, opts.reproductions)  # a CPU pace prices no GPU column
    assert priced.cost_minutes == entry.cost_minutes
    assert probe.candidates([entry], opts, {}) == []  # measured: nothing left to probe


def test_sigterm_ends_the_probes_and_leaves_no_scratch_folder(tmp_path: Path, monkeypatch):
    """The slice's hard stop (`timeout -s TERM`) inside a probe: that probe's epochs so
    far are recorded, no further probe starts, its folder is deleted, the handler goes."""
    import dataclasses
    import os
    import signal

    swan = _transfer(2.0)
    gcn = dataclasses.replace(swan, id="transfer/line/3/gcn",
                              config={**swan.config, "models": ["gcn"]})
    opts = _opts(tmp_path, [swan, gcn], kind="cpu-2core")
    assert len(probe.candidates([swan, gcn], opts, {})) == 2
    plain = probe._ProbeDeadline.on_epoch_end

    def term_at_first_epoch(self, epoch, record):
        if self.epochs == 0:
            os.kill(os.getpid(), signal.SIGTERM)
        plain(self, epoch, record)

    monkeypatch.setattr(probe._ProbeDeadline, "on_epoch_end", term_at_first_epoch)
    before = signal.getsignal(signal.SIGTERM)
    lines = probe.run_probes(opts, seconds=600, epochs=3)
    assert "probes: stopped by a signal" in lines
    items = json.loads((opts.folder / costs.COSTS_FILE).read_text())["programs"]
    assert [i["cell"] for i in items] == [swan.id] and items[0]["epochs"] == 1
    assert not any((opts.work / "_probes").rglob("*"))
    assert signal.getsignal(signal.SIGTERM) == before
