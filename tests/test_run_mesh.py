"""A program's runs over devices (`shard_runs`): 4 simulated CPU devices in one process,
vmapping every run at once and in blocks (`run_block`), and the same sweep as two
processes after `jax.distributed.initialize()`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from swan_jax.train import RunBlockDoesNotDivide, TrainConfig, train
from tests.devices import report_on_devices
from tests.train_script import GRID, line_swap_dataset, model_fn, splits

ROOT = Path(__file__).resolve().parents[1]


def test_shard_runs_and_data_parallel_are_refused_together():
    with pytest.raises(ValueError, match="turn one of them off"):
        TrainConfig(shard_runs=True, data_parallel=True)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    """`tests/run_mesh_script.py`'s report: one subprocess of 4 simulated devices for the
    tests below, compiled as users' programs are. (With the suite's cheap compiles, LLVM
    at -O0 and the older emitters, the blocked sharded program still rounds Adam's update
    otherwise from its second step, though both programs fuse the same HLO arithmetic:
    LLVM contracts a product and a sum into one FMA in one program's kernel and not in the
    other's; with `--xla_cpu_max_isa=SSE4_2`, no FMA, they are the same bits.)"""
    return report_on_devices("tests.run_mesh_script",
                             tmp_path_factory.mktemp("run_mesh") / "report.json",
                             production=True)


def test_four_devices_hold_the_runs_and_train_them_like_one(report):
    single, sharded = report["single"], report["sharded"]
    assert report["devices"] == 4
    assert single["param_devices"] == [1] and sharded["param_devices"] == [4]
    # Vmapping every run at once, one device and four agree to float32 rounding, not bit
    # for bit: on XLA:CPU a run's numbers follow the width of the vmapped program it sits
    # in (8 runs here, 2 per device there; `python -m benchmarks.run_width_bits` shows it
    # on a toy model), and the partitioned program simplifies Adam's bias correction
    # otherwise (`train._optim.scale_by_adam`). `run_block` gives the same bits (below).
    # What sharding must not do is mix runs: device 0's runs are the same bits whatever
    # the other devices train.
    changed = report["others_changed"]["history"]
    for a, b in zip(sharded["history"], changed, strict=True):
        for key in ("train_loss", "val", "test"):
            assert a[key][:2] == b[key][:2]
            assert a[key][2:] != b[key][2:]
    for a, b in zip(sharded["history"], single["history"], strict=True):
        for key in ("train_loss", "val", "test"):
            np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-7)
    for a, b in zip(sharded["params"], single["params"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert [r["hparams"] for r in sharded["runs"]] == [r["hparams"] for r in single["runs"]]
    assert len({round(r["test"], 6) for r in single["runs"]}) > 1  # the runs differ
    assert report["refused"].startswith("odd has 6 runs (grid points x seeds), which do not "
                                        "divide over 4 devices")
    assert "shard_runs=False" in report["refused"] and "\n" not in report["refused"]
    assert report["share"] == [2, 3]


def test_in_blocks_of_runs_four_devices_train_the_same_bits_as_one(report):
    # In blocks of 2 runs (`run_block=2`), every run's numbers are one device's, bit for bit:
    # each sits in a vmapped program of width 2 on one device (4 blocks, one after another)
    # and sharded (one block per device).
    single, sharded = report["single_blocks"], report["sharded_blocks"]
    assert sharded["param_devices"] == [4]
    assert sharded["history"] == single["history"]
    assert sharded["runs"] == single["runs"]
    for a, b in zip(sharded["params"], single["params"], strict=True):
        assert np.array_equal(a, b)
    # the blocks hold the runs in their order: the blocked program trains the same runs as
    # the unblocked one (to float32 rounding: it is another program)
    for a, b in zip(single["history"], report["single"]["history"], strict=True):
        for key in ("train_loss", "val", "test"):
            np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-7)
    assert report["refused_block"] == (
        "wide has 8 runs (grid points x seeds), 2 per device on 4 devices, which do not split "
        "into blocks of 4 runs: choose a run_block that divides 2 (or none: each device's "
        "runs in one vmapped block)")


def test_a_run_block_that_does_not_divide_the_runs_is_refused_before_anything(tmp_path):
    folder = tmp_path / "program"
    cfg = TrainConfig(epochs=1, seeds=(0, 1, 2), run_block=2, quiet=True,
                      checkpoint_dir=str(folder))
    with pytest.raises(RunBlockDoesNotDivide) as err:
        train(model_fn, splits(line_swap_dataset()), cfg, GRID[:1])
    assert str(err.value) == (
        "train has 3 runs (grid points x seeds) which do not split into blocks of 2 runs: "
        "choose a run_block that divides 3 (or none: all runs in one vmapped block)")
    assert not folder.exists()


def test_two_processes_write_what_one_process_writes_bit_for_bit(tmp_path):
    """The same sweep on 4 devices: one process, then two of 2 devices each (gloo on
    127.0.0.1); each device trains the same runs, so the results are the same bits,
    and process 0 alone wrote them."""
    subprocess.run([sys.executable, "-m", "tests.hosts_script", str(tmp_path)], cwd=ROOT,
                   check=True, timeout=900)
    one, two = (json.loads((tmp_path / k / "results.json").read_text()) for k in ("one", "two"))
    assert [r["runs"] for r in two["records"]] == [r["runs"] for r in one["records"]]
    assert two["cells"][0]["test_mean"] == one["cells"][0]["test_mean"]
    assert len(two["records"][0]["runs"]) == 4
    folder = Path(two["records"][0]["checkpoint_dir"])
    history = (folder / "history.jsonl").read_text().splitlines()
    assert len(history) == 2  # one line per epoch: written once, not once per process
    assert sorted(p.name for p in folder.iterdir() if p.name.isdigit()) == ["1", "2"]


def test_a_sweep_refuses_runs_that_do_not_divide_before_anything(report):
    # the command line's `main` in the 4-device process of `report` (one process launch
    # fewer): a SystemExit with a message is the interpreter's exit status 1, the message
    # on stderr
    refused = report["sweep_refused"]
    assert refused["code"] == (
        "line/3/swan/adjacency=sym has 1 runs (grid points x seeds), which do not divide "
        "over 4 devices: choose grid points x seeds that are a multiple of 4, or train on "
        "one device (--no-shard-runs)")
    assert not refused["wrote"]


def test_run_block_optimiser_is_optax_to_rounding_and_keeps_its_state():
    """With `run_block`, Adam, AdamW and the clip divide by a run's number as products
    (`_optim.scale_by_adam`, `clip_by_global_norm`): optax's numbers to float32 rounding
    and the same state (a checkpoint resumes either way); unclipped, the same moments."""
    import jax

    from swan_jax.train import make_tx

    params = {"w": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),
              "b": np.zeros(4, np.float32)}
    hp = {"learning_rate": np.float32(1e-2), "weight_decay": np.float32(1e-3)}
    for optimizer, clip in (("adam", None), ("adamw", None), ("adam", 0.5)):
        h = hp if clip is None else {**hp, "grad_clip": np.float32(clip)}
        txs = [make_tx(TrainConfig(optimizer=optimizer, run_block=block), h)
               for block in (None, 2)]
        states = [tx.init(params) for tx in txs]
        assert (jax.tree_util.tree_structure(states[0])
                == jax.tree_util.tree_structure(states[1]))
        updates = [jax.jit(tx.update) for tx in txs]  # as in training: compiled
        for step in range(4):
            grads = jax.tree_util.tree_map(lambda p, s=step: np.cos(p * 7 + s) * 2, params)
            (u0, s0), (u1, s1) = (update(grads, st, params)
                                  for update, st in zip(updates, states, strict=True))
            for a, b in zip(jax.tree_util.tree_leaves(u0), jax.tree_util.tree_leaves(u1),
                            strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)
            if clip is None:
                for a, b in zip(jax.tree_util.tree_leaves(s0),
                                jax.tree_util.tree_leaves(s1), strict=True):
                    assert np.array_equal(a, b)
            states = [s0, s1]


def test_a_blocked_step_is_estimated_with_one_blocks_activations():
    """The memory check weighs one block's activations (the blocks run one after
    another) beside every run's parameters and optimiser states."""
    from swan_jax.train import step_memory

    data = splits(line_swap_dataset())
    whole, shared = step_memory(model_fn, data, TrainConfig(seeds=(0, 1)), GRID)
    blocked, same = step_memory(model_fn, data, TrainConfig(seeds=(0, 1), run_block=1), GRID)
    assert same == shared and blocked < whole


def test_a_sweep_refuses_a_run_block_that_does_not_divide_in_one_line(tmp_path):
    from swan_jax.experiments import transfer

    with pytest.raises(SystemExit) as err:
        transfer.main(["--topology", "line", "--distance", "3", "--model", "swan",
                       "--seeds", "0,1", "--epsilon", "0.1", "--gamma", "0.1", "--beta", "1",
                       "--adjacency", "sym", "--run-block", "3", "--no-progress",
                       "--results-dir", str(tmp_path / "out"),
                       "--cache-dir", str(tmp_path / "cache")])
    assert str(err.value) == (
        "line/3/swan/adjacency=sym has 2 runs (grid points x seeds) which do not split into "
        "blocks of 3 runs: choose a --run-block that divides 2 (or none: all runs in one "
        "vmapped block)")
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()
