"""Cells as cluster jobs (`--executor slurm`): the options, and submitit's local executor
(real subprocesses, the same code path as SLURM's) against the local run. A real SLURM:
`make test-cluster` (tests/cluster/run.sh)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from reproduce.campaign import loop
from swan_jax.experiments import cluster
from swan_jax.experiments import transfer as T
from tests.test_campaign import collected_runs, setup


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    cluster.add_arguments(p)
    return p.parse_args(argv)


def test_the_slurm_section_and_the_flags_make_the_options(tmp_path):
    toml = tmp_path / "cluster.toml"
    toml.write_text('[slurm]\npartition = "gpu"\ngpus = 1\ncpus = 8\ntime_minutes = 240\n'
                    'setup = ["module load cuda"]\n')
    opts = cluster.options_from(parse("--executor", "slurm", "--slurm-config", str(toml),
                                      "--time-minutes", "30"))
    assert (opts.partition, opts.gpus, opts.cpus, opts.time_minutes) == ("gpu", 1, 8, 30)
    assert opts.setup == ("module load cuda",) and opts.array_size == 16
    assert cluster.options_from(parse()) is None  # --executor local: today's behaviour
    toml.write_text('[slurm]\npartitoin = "gpu"\n')
    with pytest.raises(cluster.ClusterError, match=r"unknown key\(s\) partitoin in \[slurm\]"):
        cluster.options_from(parse("--executor", "slurm", "--slurm-config", str(toml)))
    with pytest.raises(cluster.ClusterError, match="need --executor slurm"):
        cluster.options_from(parse("--gpus", "2"))
    with pytest.raises(cluster.ClusterError, match="gpus must be a whole number >= 0"):
        cluster.options_from(parse("--executor", "slurm", "--gpus", "-1"))


def _local_jobs(tmp_path: Path) -> Path:
    toml = tmp_path / "jobs.toml"
    toml.write_text(f'[slurm]\ncluster = "local"\nfolder = "{tmp_path / "jobs"}"\n'
                    f'time_minutes = 10\n')
    return toml


def test_a_sweep_as_jobs_writes_what_the_local_sweep_writes(tmp_path):
    # line k = 1 (one SWAN layer): a job writes what the local run writes whatever the
    # depth, and the job's process compiles a smaller step
    argv = ["--topology", "line", "--distance", "1", "--model", "swan", "--epochs", "2",
            "--train-size", "8", "--val-size", "4", "--test-size", "4", "--epsilon", "0.1",
            "--beta", "1", "--adjacency", "sym", "--seeds", "0,1", "--no-progress",
            "--cache-dir", str(tmp_path / "cache")]
    assert T.main([*argv, "--results-dir", str(tmp_path / "here")]) == 0
    assert T.main([*argv, "--results-dir", str(tmp_path / "jobs_out"), "--executor", "slurm",
                   "--slurm-config", str(_local_jobs(tmp_path))]) == 0
    here, jobs = (json.loads((tmp_path / k / "results.json").read_text())
                  for k in ("here", "jobs_out"))
    assert [r["runs"] for r in jobs["records"]] == [r["runs"] for r in here["records"]]
    assert (tmp_path / "jobs_out" / "cells" / "line-1-swan" / "results.json").exists()
    assert (tmp_path / "jobs_out" / "table.md").exists()
    # every cell done: nothing is submitted again
    assert T.main([*argv, "--results-dir", str(tmp_path / "jobs_out"), "--executor", "slurm",
                   "--slurm-config", str(_local_jobs(tmp_path)), "--resume"]) == 0
    assert len(list((tmp_path / "jobs").glob("*_submitted.pkl"))) == 1


def test_a_campaign_cell_as_a_job_is_collected_as_a_local_run_collects_it(tmp_path):
    here = setup(tmp_path, "here", epochs=3)
    loop.run_campaign(here)
    jobs = setup(tmp_path, "jobs", epochs=3)
    jobs.slurm = cluster.SlurmOptions(cluster="local", time_minutes=10)
    lines = loop.run_campaign(jobs)
    assert "transfer/line/1/swan: finished" in lines
    assert list((jobs.work / "transfer__line__1__swan" / "submitit").glob("*_submitted.pkl"))
    assert collected_runs(jobs) == collected_runs(here)
