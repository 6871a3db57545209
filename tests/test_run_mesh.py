"""A program's runs over devices (`shard_runs`): 4 simulated CPU devices in one process,
and the same sweep as two processes after `jax.distributed.initialize()`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from swan_jax.train import TrainConfig
from tests.devices import report_on_devices

ROOT = Path(__file__).resolve().parents[1]


def test_shard_runs_and_data_parallel_are_refused_together():
    with pytest.raises(ValueError, match="turn one of them off"):
        TrainConfig(shard_runs=True, data_parallel=True)


def test_four_devices_hold_the_runs_and_train_them_like_one(tmp_path):
    report = report_on_devices("tests.run_mesh_script", tmp_path / "report.json")
    single, sharded = report["single"], report["sharded"]
    assert report["devices"] == 4
    assert single["param_devices"] == [1] and sharded["param_devices"] == [4]
    # One device and four agree to float32 rounding, not bit for bit: on XLA:CPU a run's
    # numbers follow the width of the vmapped program it sits in (8 runs here, 2 per
    # device there; `python -m benchmarks.run_width_bits` shows it on a toy model).
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


def test_a_sweep_refuses_runs_that_do_not_divide_before_anything(tmp_path):
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2"
    env = dict(os.environ, XLA_FLAGS=flags.strip(), JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-m", "swan_jax.experiments.transfer", "--topology", "line",
         "--distance", "3", "--model", "swan", "--seeds", "0", "--epsilon", "0.1",
         "--gamma", "0.1", "--beta", "1", "--adjacency", "sym", "--shard-runs",
         "--results-dir", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1
    assert out.stderr.strip() == (
        "line/3/swan/adjacency=sym has 1 runs (grid points x seeds), which do not divide "
        "over 2 devices: choose grid points x seeds that are a multiple of 2, or train on "
        "one device (--no-shard-runs)")
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()
