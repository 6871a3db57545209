"""A program's runs over devices (`shard_runs`): 4 simulated CPU devices in one process,
and the same sweep as two processes after `jax.distributed.initialize()`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from swan_jax.settings import SettingError
from swan_jax.train import TrainConfig
from tests.devices import report_on_devices

ROOT = Path(__file__).resolve().parents[1]


def test_shard_runs_and_data_parallel_are_refused_together():
    with pytest.raises(ValueError, match="turn one of them off"):
        TrainConfig(shard_runs=True, data_parallel=True)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    """`tests/run_mesh_script.py`'s report: one subprocess of 4 simulated devices for the
    tests below."""
    return report_on_devices("tests.run_mesh_script",
                             tmp_path_factory.mktemp("run_mesh") / "report.json")


def test_four_devices_hold_the_runs_and_train_them_like_one(report):
    single, sharded = report["single"], report["sharded"]
    assert report["devices"] == 4
    assert single["param_devices"] == [1] and sharded["param_devices"] == [4]
    # Vmapping every run at once, one device and four agree to float32 rounding, not bit for
    # bit: on XLA:CPU a run's numbers follow the width of the vmapped program it sits in (8
    # runs here, 2 per device there; `python -m benchmarks.run_width_bits` shows it on a toy
    # model), and the partitioned program simplifies Adam's bias correction otherwise
    # (docs/benchmarks-log.md, "the runs axis on XLA:CPU"). What sharding must not do is mix
    # runs: device 0's runs are the same bits whatever the other devices train.
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


def test_the_removed_run_block_reads_as_before_at_its_default_and_is_refused_otherwise(
        capsys):
    """`run_block` is gone (each device chooses its runs' layout): an older config.toml
    holding its default "none" loads as before; a block size, from a file or a flag, is
    refused in one line saying what does its work now."""
    from swan_jax.experiments import transfer
    from swan_jax.experiments.config import from_dict

    exp = transfer.EXPERIMENT
    assert from_dict(exp.Config, {"run_block": "none", "epochs": 3}) == exp.Config(epochs=3)
    with pytest.raises(SettingError) as err:
        from_dict(exp.Config, {"run_block": 2}, source="old.toml")
    assert str(err.value).startswith("old.toml: run_block is removed: each device computes")
    with pytest.raises(SystemExit):
        transfer.main(["--run-block", "2", "--dry-run"])
    (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
    assert line.startswith("swan-transfer: error: argument --run-block: this flag is "
                           "removed: each device computes")
