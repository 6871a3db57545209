"""Installing: the device extras, `make install DEVICE=...` refusing unknown values, the user's
GPU check (on this CPU machine it must say that no GPU is used), and the packaging files."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import swan_jax
from swan_jax.experiments import gpu_check

ROOT = Path(__file__).resolve().parents[1]
# `make test` runs these tests from inside make: the inherited MAKEFLAGS/MAKELEVEL would make the
# inner make print "Entering directory" lines, which a user's own `make install` never shows.
MAKE_ENV = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_gpu_extras_are_jax_own_and_carry_no_test_tools():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert extras["cuda12"] == ["jax[cuda12]"] and extras["cuda13"] == ["jax[cuda13]"]
    assert any(dep.startswith("nbconvert") for dep in extras["notebooks"])
    assert any(dep.startswith("pooch") for dep in PYPROJECT["project"]["dependencies"])


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("device, extras", [("cpu", "test,chem"), ("cuda12", "chem,cuda12"),
                                            ("cuda13", "chem,cuda13")])
def test_make_install_picks_the_extras_of_the_device(device, extras):
    done = subprocess.run(["make", "-n", "-B", "install", f"DEVICE={device}"], cwd=ROOT,
                          capture_output=True, text=True, env=MAKE_ENV)
    assert done.returncode == 0, done.stderr
    assert f'pip install -q -e ".[{extras}]"' in done.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_install_refuses_an_unknown_device_in_one_line():
    done = subprocess.run(["make", "-n", "install", "DEVICE=cuda11"], cwd=ROOT,
                          capture_output=True, text=True, env=MAKE_ENV)
    assert done.returncode != 0 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert "DEVICE=cuda11 is not one of: cpu cuda12 cuda13" in line


def test_gpu_check_reports_the_devices_and_that_no_gpu_is_used(capsys):
    small = ["--graphs", "20", "--nodes", "6", "--hidden", "4", "--epochs", "2"]
    assert gpu_check.main(small) == 0
    out = capsys.readouterr().out
    assert "default backend: cpu" in out and "device 0: cpu" in out
    step = re.search(r"SWAN training step: ([0-9.]+) ms; one epoch \((\d+) steps", out)
    assert step and float(step.group(1)) > 0 and int(step.group(2)) >= 1
    assert "GPU used: no" in out and "DEVICE=cuda13" in out
    assert gpu_check.main([*small, "--require-gpu"]) == 1


def test_packaging_files():
    assert (ROOT / "swan_jax" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["swan_jax"]
    citation = (ROOT / "CITATION.cff").read_text()
    comment = r"\s*(#.*)?$"
    assert re.search(rf"^version: \"?{re.escape(swan_jax.__version__)}\"?{comment}", citation,
                     re.M)
    assert re.search(rf"^date-released: \"?\d{{4}}-\d{{2}}-\d{{2}}\"?{comment}", citation, re.M)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{swan_jax.__version__}]" in changelog


def test_console_scripts_exist():
    """Every console script's target imports (one interpreter for all of them)."""
    targets = PYPROJECT["project"]["scripts"]
    code = "\n".join(f"from {t.partition(':')[0]} import {t.partition(':')[2]}"
                     for t in targets.values())
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert {"swan-predict", "swan-results", "swan-lrgb"} <= set(targets)


def _writes_results_md(path: Path) -> bool:
    """A module whose code (docstrings aside) names RESULTS.md: the renderer's mark (its
    header, its default output path)."""
    import ast

    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)}
    return any(isinstance(c, ast.Constant) and isinstance(c.value, str)
               and "RESULTS.md" in c.value and id(c) not in docstrings
               for c in ast.walk(tree))


def test_the_wheel_holds_no_results_md_renderer():
    """The packages a wheel holds are setuptools' discovery under pyproject's
    `[tool.setuptools.packages.find]` (what `pip wheel` runs; building one here would need
    setuptools >= 77 from the network): swan_jax's only, and none renders RESULTS.md; the
    renderer is the repository's `reproduce/`, which the same check finds."""
    import setuptools

    find = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
    shipped = setuptools.find_packages(where=str(ROOT), **find)
    assert {"swan_jax", "swan_jax.experiments", "swan_jax.graph"} <= set(shipped)
    assert [p for p in shipped if p.split(".")[0] != "swan_jax"] == []
    modules = [m for p in shipped for m in (ROOT / p.replace(".", "/")).glob("*.py")]
    assert [m for m in modules if _writes_results_md(m)] == []
    tool = sorted((ROOT / "reproduce").rglob("*.py"))
    assert ROOT / "reproduce" / "results" / "render.py" in [m for m in tool
                                                            if _writes_results_md(m)]
