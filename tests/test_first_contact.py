"""A new user's first contact (issue 41): the README's main job on a fresh machine.

`make reproduce-lrgb EPOCHS=1 SEEDS=0` with only Peptides-func present (Peptides-struct
and PascalVOC-SP absent, no network) trains what it has, says in one line per missing
data set what is missing and how to get it, marks those cells in `table.md`, and exits 0;
it fails only when nothing could run; `STRICT=1` keeps the refusal. The command line is
the one `make -n` builds from the Makefile, run here in this process (tiny sizes added).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from swan_jax.experiments import lrgb
from tests.test_lrgb_experiment import write_peptides
from tests.test_run_failures import exits

ROOT = Path(__file__).resolve().parents[1]
MAKE_ENV = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
TINY = ["--variant", "swan", "--hidden", "8", "--layers", "2", "--batch-size", "4",
        "--no-verify-md5", "--no-progress"]


def make_command(target: str, data: Path, *settings: str) -> list[str]:
    """The arguments the Makefile passes to the experiment for `make target settings`
    (its recipe as `make -n` prints it, the install step taken as done)."""
    if shutil.which("make") is None:  # the Makefile's line is the subject: no make, no test
        pytest.fail("make is not installed")
    done = subprocess.run(["make", "-n", "-o", "install", target, f"PY={sys.executable}",
                           f"SWAN_DATA_DIR={data}", *settings], cwd=ROOT, capture_output=True,
                          text=True, env=MAKE_ENV, check=True)
    [line] = done.stdout.strip().splitlines()
    words = shlex.split(line)
    assert words[:2] == [sys.executable, "experiments/lrgb.py"], line
    return words[2:]


def test_make_reproduce_lrgb_trains_the_data_it_has_and_marks_the_rest(tmp_path, capsys):
    data = write_peptides(tmp_path / "data")  # Peptides-func only
    argv = make_command("reproduce-lrgb", data, "EPOCHS=1", "SEEDS=0")
    assert argv == ["--all", "--data-dir", str(data), "--epochs", "1", "--seeds", "0",
                    "--skip-missing", "--resume"]
    outputs = ["--results-dir", str(tmp_path / "res"), "--cache-dir", str(tmp_path / "cache")]
    assert lrgb.main([*argv, *TINY, *outputs]) == 0
    out = capsys.readouterr().out
    results = json.loads((tmp_path / "res" / "results.json").read_text())
    assert [(c["dataset"], c["variant"]) for c in results["cells"]] == [
        ("peptides-func", "swan")]
    # one line per missing data set: its cells, what is missing, how to get it
    lines = results["not_run"]
    assert [line.split(":")[0] for line in lines] == ["peptides-struct / swan",
                                                      "pascalvoc-sp / swan"]
    for line in lines:
        assert "\n" not in line and ": not run: data unavailable (missing raw file" in line
        assert "download https://" in line and f"put it at {data}" in line
    said = out.split("PARTIAL RUN (--skip-missing): 2 data set(s) missing:\n")[1]
    assert said.splitlines()[:2] == [f"  {line}" for line in lines]
    table = (tmp_path / "res" / "table.md").read_text()
    assert "| peptides-func | swan | AP |" in table
    assert all(f"- {line}" in table for line in lines)


def test_make_reproduce_lrgb_fails_only_when_nothing_could_run(tmp_path):
    empty = tmp_path / "data"
    empty.mkdir()
    argv = make_command("reproduce-lrgb", empty, "EPOCHS=1", "SEEDS=0")
    message = str(exits(lrgb.main, [*argv, *TINY, "--results-dir", str(tmp_path / "res")]).code)
    head, *per_set, tail = message.splitlines()
    assert head == "no cell has its data, nothing was trained:"
    assert [line.split(":")[0] for line in per_set] == ["  peptides-func / swan",
                                                        "  peptides-struct / swan",
                                                        "  pascalvoc-sp / swan"]
    assert tail == "get the files above"
    assert not (tmp_path / "res").exists()


def test_make_strict_keeps_the_refusal_naming_what_lifts_it(tmp_path):
    data = write_peptides(tmp_path / "data")
    argv = make_command("reproduce-lrgb", data, "STRICT=1")
    assert "--skip-missing" not in argv and "--all" in argv
    message = str(exits(lrgb.main, [*argv, *TINY, "--results-dir", str(tmp_path / "res")]).code)
    assert message.startswith("missing data, nothing was trained:\n  peptides-struct / swan:")
    assert message.endswith("pass --skip-missing (make: leave out STRICT=1) to run only the "
                            "cells whose data is present")
    assert not (tmp_path / "res").exists()
