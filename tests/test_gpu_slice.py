"""What a GPU window runs by itself (`reproduce/gpu_slice.sh`): the cells in its order of
value (`campaign run --ordered`), and a returned tar cut into parts merged as one."""

from __future__ import annotations

import fnmatch
import re
import tarfile
from pathlib import Path

from reproduce.campaign import loop, plan
from reproduce.campaign.merge import _unpacked

REPO = Path(__file__).resolve().parents[1]


def _cell(id_: str, priority: int, minutes: float) -> plan.Entry:
    return plan.Entry(id=id_, experiment=id_.split("/")[0], table="", priority=priority,
                      status="runnable", config={}, cost_minutes={"h200": minutes})


def test_the_slice_takes_cells_by_pattern_then_under_way_then_cheapest(tmp_path: Path):
    cells = [_cell("transfer/line/50/swan", 150, 10.0), _cell("transfer/ring/50/gcn", 150, 2.0),
             _cell("tolokers/swan", 800, 9.0), _cell("lrgb-screen/peptides-func/swan", 310, 116),
             _cell("lrgb/peptides-func/swan-learn", 300, 5.6),
             _cell("graphprop-screen/sssp/swan", 400, 50.0), _cell("transfer/line/3/swan", 103, 1)]
    opts = loop.Options(plan=tmp_path / "plan.toml", reproductions=tmp_path, work=tmp_path,
                        device_kind="h200",
                        cells=["lrgb/*", "lrgb-screen/*", "graphprop/*", "graphprop-screen/*",
                               "transfer/*/50/*", "tolokers/*"], ordered=True)
    under_way = opts.bundle_path(cells[0])  # line k = 50 SWAN has a bundle: before ring GCN
    under_way.parent.mkdir(parents=True)
    under_way.write_bytes(b"")
    order = [e.id for e in loop.select(cells, opts, done={"tolokers/x"})]
    assert order == ["lrgb/peptides-func/swan-learn", "lrgb-screen/peptides-func/swan",
                     "graphprop-screen/sssp/swan", "transfer/line/50/swan",
                     "transfer/ring/50/gcn", "tolokers/swan"]
    under_way.unlink()
    order = [e.id for e in loop.select(cells, opts, done=set())]
    assert order[3:5] == ["transfer/ring/50/gcn", "transfer/line/50/swan"]  # cheapest first
    plain = loop.select(cells, opts.__class__(**{**opts.__dict__, "ordered": False}), set())
    assert [e.id for e in plain][0] == "transfer/line/50/swan"  # the plan's order


def test_the_slice_defaults_to_the_order_of_value():
    script = (REPO / "reproduce" / "gpu_slice.sh").read_text()
    default = re.search(r"DEFAULT_CELLS='([^']*)'", script).group(1).split()
    # Every pattern names cells of the committed plan (a pattern matching none would
    # silently spend nothing on what it was meant for), and Table 1's controls come
    # before any of its screens and before the LRGB grid's long screen.
    ids = [e.id for e in plan.load_plan(REPO / "reproductions/campaign/plan.toml")]
    for pattern in default:
        assert any(fnmatch.fnmatch(i, pattern) for i in ids), pattern
    for control in ("graphprop-control/*", "graphprop/sssp/gcn"):  # ADGN's, GCN's
        assert default.index(control) < min(
            default.index("graphprop-screen/*"), default.index("lrgb-screen/*"))
    assert default[0] == "lrgb/*"  # the LRGB cells under way: minutes each on a GPU
    assert "--ordered" in script and "RUNTIME_TABLE:-0" in script


def test_a_tar_cut_into_parts_is_merged_as_the_whole(tmp_path: Path):
    root = tmp_path / "copy" / "reproductions" / "campaign"
    root.mkdir(parents=True)
    (root / "state.json").write_text('{"cells": {}}')
    (root / "big.bin").write_bytes(bytes(range(256)) * 400)
    whole = tmp_path / "out" / "reproductions.tar"
    whole.parent.mkdir()
    with tarfile.open(whole, "w") as tar:
        tar.add(tmp_path / "copy" / "reproductions", arcname="reproductions")
    data = whole.read_bytes()
    whole.unlink()
    for i, start in enumerate(range(0, len(data), 40_000)):  # as `split -d -a 2` names them
        whole.with_name(f"reproductions.tar.part{i:02d}").write_bytes(data[start:start + 40_000])
    (tmp_path / "tmp").mkdir()  # merge's temporary folder
    unpacked = _unpacked(whole, tmp_path / "tmp")
    assert (unpacked / "campaign" / "big.bin").read_bytes() == bytes(range(256)) * 400
