"""Runs per program (`swan_jax.experiments.packing`): which grid points share a program,
how many programs a cell takes, and that a cut program trains its runs as the whole one."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from swan_jax.experiments import packing, sweep
from swan_jax.experiments import transfer as T
from swan_jax.experiments.config import CONFIG_DIR, load_toml
from swan_jax.experiments.graphprop import EXPERIMENT as GRAPHPROP
from swan_jax.experiments.lrgb import EXPERIMENT as LRGB
from swan_jax.experiments.lrgb import LRGBConfig
from swan_jax.train import step_memory

RING = {"topology": "ring", "distance": 3, "model": "swan"}


def test_cut_makes_the_fewest_parts_of_near_equal_size_in_grid_order():
    assert packing.cut(list(range(10)), 4) == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert packing.cut(list(range(8)), 8) == [list(range(8))]
    assert packing.cut(list(range(3)), 1) == [[0], [1], [2]]
    # seeds stay together: 3 seeds and a limit of 8 runs -> 2 points per program
    assert packing.points_per_program(64, 3, 8) == 2
    assert packing.points_per_program(64, 3, 2) == 1  # never less than one point
    assert packing.points_per_program(64, 3, None) == 64


def test_runs_that_fit_solves_the_linear_estimate():
    # 10 GiB shared, 3 GiB per run, 64 GiB: 18 runs (10 + 18 x 3 = 64)
    gib = packing.GIB
    assert packing.runs_that_fit(3 * gib, 10 * gib, 64 * gib) == 18
    assert packing.runs_that_fit(3 * gib, 10 * gib, 12 * gib) == 0


def test_the_lrgb_paper_grid_is_one_program_per_static_point_or_cut_to_fit():
    cfg = load_toml(LRGBConfig, CONFIG_DIR / "lrgb-full.toml")
    cfg = LRGB.default_config(**{**{k: getattr(cfg, k) for k in ("grid", "seeds")},
                                 "datasets": ("peptides-func",), "variants": ("swan",)})
    programs = LRGB.plan(cfg)
    # num_layers x hidden x A_hat (4 x 2 x 2) static: 32 points x 3 seeds in each
    assert len(programs) == 16 and {len(p.grid) for p in programs} == {32}
    assert {(p.static["num_layers"], p.static["hidden"], p.static["adjacency"])
            for p in programs} == {(n, h, a) for n in (5, 8, 16, 32) for h in (64, 128)
                                   for a in ("adj", "sym")}
    # 48 runs at most: 16 points x 3 seeds, two programs per static point
    cut = LRGB.plan(LRGB.default_config(**{**vars_of(cfg), "runs_per_program": 48}))
    assert len(cut) == 32 and {len(p.grid) for p in cut} == {16}
    assert len({p.ident for p in cut}) == 32 and len({p.folder for p in cut}) == 32
    for whole in programs:  # the parts of a static point hold its points once, in order
        parts = [p for p in cut if p.static == whole.static]
        assert [pt for p in parts for pt in p.grid] == whole.grid
        assert [p.name.rsplit(",", 1)[1] for p in parts] == ["part=1-of-2", "part=2-of-2"]
    # a program that needs no cut keeps its name, identity and folder
    assert LRGB.plan(LRGB.default_config(**{**vars_of(cfg), "runs_per_program": 96})
                     ) == programs


def vars_of(cfg):
    return {"grid": cfg.grid, "seeds": cfg.seeds, "datasets": cfg.datasets,
            "variants": cfg.variants}


def test_graphprop_keeps_every_point_of_a_hidden_layers_pair_together():
    cfg = GRAPHPROP.default_config()
    programs = GRAPHPROP.plan(cfg)
    assert len(programs) == 12  # hidden 3 x layers 4; both A_hat in each (traced)
    assert {len(p.grid) for p in programs} == {72}


@pytest.mark.slow
def test_a_cut_program_trains_each_run_as_the_whole_program(tmp_path: Path):
    grid = {"learning_rate": (1e-3, 3e-3), "epsilon": (0.1,), "gamma": (0.1,),
            "beta": (1.0,), "adjacency": ("sym",)}
    base = {"sizes": (8, 4, 4), "grid": grid, "seeds": (0, 1), "epochs": 2,
            "patience": None, "progress": False, "cache_dir": tmp_path / "cache"}
    whole_cfg = T.EXPERIMENT.default_config(**base, results_dir=tmp_path / "whole")
    cut_cfg = T.EXPERIMENT.default_config(**base, results_dir=tmp_path / "cut",
                                          runs_per_program=2)
    [whole] = T.EXPERIMENT.plan(whole_cfg, [RING])
    parts = T.EXPERIMENT.plan(cut_cfg, [RING])
    assert [len(p.grid) for p in parts] == [1, 1]
    together = sweep.train_program(T.EXPERIMENT, whole_cfg, whole)
    alone = sweep.train_program(T.EXPERIMENT, cut_cfg, parts[1])  # the later part: offset
    for run in range(2):
        np.testing.assert_allclose([h["train_loss"][2 + run] for h in together.history],
                                   [h["train_loss"][run] for h in alone.history], rtol=1e-5)
        assert alone.runs[run]["test"] == pytest.approx(together.runs[2 + run]["test"],
                                                        rel=1e-4)
    assert alone.runs[0]["hparams"]["learning_rate"] == 3e-3


def test_memory_cut_follows_the_step_estimate(tmp_path: Path):
    """`program_memory_gib` cuts where the memory check's estimate says (one run's, and
    linear in the runs: two runs' estimate is one run's plus its per-run part): a budget
    of 2.5 runs' step holds 2 runs (one point of 2 seeds), one of 100 runs leaves it
    whole; a cache keeps the figure (a campaign's, across machines)."""
    grid = {"learning_rate": (1e-3, 3e-3, 1e-2), "epsilon": (0.1,), "gamma": (0.1,),
            "beta": (1.0,), "adjacency": ("sym",)}
    cfg = T.EXPERIMENT.default_config(sizes=(8, 4, 4), grid=grid, seeds=(0, 1), epochs=1,
                                      progress=False, cache_dir=tmp_path / "cache",
                                      results_dir=tmp_path)
    [program] = T.EXPERIMENT.plan(cfg, [RING])
    splits = T.EXPERIMENT.load_data(cfg, RING)
    model_fn = T.EXPERIMENT.model_fn(cfg, RING, program.static)
    tcfg = sweep.train_config(T.EXPERIMENT, cfg, program, None)
    (one, shared), (two, shared2) = (
        step_memory(model_fn, splits, dataclasses.replace(tcfg, seeds=seeds), program.grid[:1])
        for seeds in ((0,), (0, 1)))
    per_run = one - shared
    assert shared == shared2 > 0 and per_run > 0 and two == shared + 2 * per_run
    for budget_runs, parts in ((2.5, 3), (100, 1)):
        limited = dataclasses.replace(
            cfg, program_memory_gib=(shared + budget_runs * per_run) / packing.GIB)
        cache: dict = {}
        packed = T.EXPERIMENT.packed_plan(limited, [RING], lambda cell: splits, cache=cache)
        assert len(packed) == parts
        assert list(cache.values()) == [int(budget_runs)]
        assert T.EXPERIMENT.packed_plan(limited, [RING], None, cache=cache) == packed
        assert T.EXPERIMENT.plan(limited, [RING]) == [program]  # plan alone: no data, no cut


def test_tolokers_splits_together_train_and_score_as_each_split_alone(tmp_path: Path):
    """The official splits of one configuration as one vmapped program (one graph, a
    mask column per split, each run's `split` picking its own): every run's losses,
    validation and test ROC AUC are its split's program's; the summary pools the splits
    as before (never picks among them)."""
    from swan_jax.experiments import node_classification as nce
    from tests.test_node_classification_experiment import flags, write_tolokers

    data = write_tolokers(tmp_path / "data", n=40, splits=10)
    base = [*flags(tmp_path, data), "--models", "swan", "--splits", "2,5", "--epochs", "3",
            "--patience", "none"]
    apart = nce.parse_config(base)
    together = nce.parse_config([*base, "--splits-together"])
    [program] = nce.EXPERIMENT.plan(together)
    assert program.cell["split"] == nce.TOGETHER
    assert [p["split"] for p in program.grid] == [2, 5]  # official indices, vmapped
    both = sweep.train_program(nce.EXPERIMENT, together, program)
    for run, single in enumerate(nce.EXPERIMENT.plan(apart)):
        alone = sweep.train_program(nce.EXPERIMENT, apart, single)
        np.testing.assert_allclose([h["train_loss"][run] for h in both.history],
                                   [h["train_loss"][0] for h in alone.history], rtol=1e-5)
        for key in ("val_at_best", "test"):
            assert both.runs[run][key] == pytest.approx(alone.runs[0][key], rel=1e-5)
    assert both.runs[0]["test"] != both.runs[1]["test"]  # two splits' own rows
    record = sweep.program_record(nce.EXPERIMENT, together, program, both)
    [cell] = sweep.summarise_cells(nce.EXPERIMENT, together, [record])
    assert "split" not in cell["best_hparams"] and cell["grid_points"] == 1
    assert sorted(r["split"] for r in cell["per_seed"]) == [2, 5]


def test_a_memory_cut_program_with_checkpoints_needs_resume(tmp_path: Path):
    grid = {"learning_rate": (1e-3, 3e-3), "epsilon": (0.1,), "gamma": (0.1,),
            "beta": (1.0,), "adjacency": ("sym",)}
    cfg = T.EXPERIMENT.default_config(
        sizes=(8, 4, 4), grid=grid, seeds=(0,), epochs=1, progress=False,
        topologies=("ring",), distances=(3,), models=("swan",),
        cache_dir=tmp_path / "cache", results_dir=tmp_path / "res", program_memory_gib=1e-5)
    splits = T.EXPERIMENT.load_data(cfg, RING)
    parts = T.EXPERIMENT.packed_plan(cfg, [RING], lambda cell: splits)
    assert len(parts) == 2  # nothing fits 10 kB: one point per program
    (parts[1].folder / "1").mkdir(parents=True)  # a checkpoint of the second part
    with pytest.raises(sweep.SweepRefused, match="part=2-of-2.*--resume"):
        sweep.run_sweep(T.EXPERIMENT, cfg)
