"""The package's documents: one version, the licence, the citation, the conventions it cites."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import swan_jax

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CONVENTIONS = ROOT / "docs" / "conventions.md"
OLD_NAME = "SPEC" ".md"  # the conventions' old name, outside the repository (split: not here)
# Where the code cites the conventions: docstrings, comments, tests, README, the guide's
# pages, notebooks.
CITING_FILES = [*ROOT.glob("swan_jax/**/*.py"), *ROOT.glob("tests/*.py"),
                *ROOT.glob("experiments/**/*.py"), *ROOT.glob("benchmarks/**/*.py"),
                ROOT / "notebooks" / "build_notebooks.py", ROOT / "README.md",
                *(p for p in ROOT.glob("docs/*.md") if p.name != "conventions.md")]


def test_the_version_is_written_once():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "swan_jax.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", swan_jax.__version__)
    # CITATION.cff states the release it describes: the same version, never a second one
    cited = re.findall(r'^version: "([^"]+)"', (ROOT / "CITATION.cff").read_text(), re.MULTILINE)
    assert cited == [swan_jax.__version__]


def test_mit_licence_declared_and_shipped():
    assert PYPROJECT["project"]["license"] == "MIT"  # an SPDX expression, not a table
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License")
    assert "Copyright (c) 2026 the swan-jax authors" in text


def test_rdkit_is_only_the_chem_extra():
    project = PYPROJECT["project"]
    assert not any(dep.startswith("rdkit") for dep in project["dependencies"])
    assert any(dep.startswith("rdkit") for dep in project["optional-dependencies"]["chem"])
    extras = re.findall(r"^EXTRAS_\w+ := (\S+)$", (ROOT / "Makefile").read_text(),
                        re.MULTILINE)  # one line per DEVICE
    assert extras and all("chem" in line.split(",") for line in extras)  # tests need it


def test_citation_names_the_paper():
    text = (ROOT / "CITATION.cff").read_text()
    assert text.startswith("cff-version: 1.2.0\n")
    assert "\ntype: software\n" in text and "\nlicense: MIT\n" in text
    paper = text[text.index("\npreferred-citation:\n"):]
    assert ('title: "On Oversquashing in Graph Neural Networks Through the Lens of '
            'Dynamical Systems"') in paper
    for family in ("Gravina", "Eliasof", "Gallicchio", "Bacciu", "Schönlieb"):
        assert f"family-names: {family}\n" in paper
    assert "year: 2025\n" in paper


def test_every_cited_conventions_section_exists():
    headings = set(re.findall(r"^## (.+)$", CONVENTIONS.read_text(), re.MULTILINE))
    assert {"Graphs", "Operators", "The vector field", "Integration",
            "Jacobian facts"} <= headings
    cited = {}
    for path in CITING_FILES:
        text = path.read_text()
        assert OLD_NAME not in text, f"{path.relative_to(ROOT)} still cites {OLD_NAME}"
        for section in re.findall(r'docs/conventions\.md,? \(?"([^"]+)"', text):
            cited.setdefault(section, path.relative_to(ROOT))
    assert "Jacobian facts" in cited  # the pattern finds citations at all
    missing = {section: str(path) for section, path in cited.items() if section not in headings}
    assert not missing, f"cited sections absent from docs/conventions.md: {missing}"


BENCHMARKS_LOG = ROOT / "docs" / "benchmarks-log.md"
# A citation names the log, then a section in double quotes (the code's comments and
# docstrings, e.g. swan_jax/solvers.py); the quoted words, across a comment's line break,
# are part of one of the log's section headings.
LOG_CITATION = re.compile(r'docs/benchmarks-log\.md,?\s+(?:#\s+)?\(?"([^"]+)"')


def test_every_cited_benchmarks_log_section_exists():
    headings = re.findall(r"^## (.+)$", BENCHMARKS_LOG.read_text(), re.MULTILINE)
    cited = {}
    for path in [*CITING_FILES, *ROOT.glob("benchmarks/*.sh")]:
        text = path.read_text()
        # The sections moved from BENCHMARKS.md to the log: no citation names them there.
        assert not re.search(r'BENCHMARKS\.md,? \(?"', text), f"{path}: cites BENCHMARKS.md"
        for section in LOG_CITATION.findall(text):
            words = " ".join(re.sub(r"^\s*#", "", line) for line in section.splitlines())
            cited.setdefault(" ".join(words.split()), path.relative_to(ROOT))
    assert "A grid on a CPU" in cited  # the pattern finds citations at all
    missing = {section: str(path) for section, path in cited.items()
               if not any(section in heading for heading in headings)}
    assert not missing, f"cited sections absent from docs/benchmarks-log.md: {missing}"


DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _dated_lines(paths) -> list[str]:
    return [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in paths
            for i, line in enumerate(p.read_text().splitlines(), 1) if DATE.search(line)]


def test_the_package_holds_no_dated_fact():
    """No date in swan_jax/: compatibility goes by format numbers (a checkpoint's
    `fingerprint_format`), and a timing behind a constant lives in docs/benchmarks-log.md
    with the benchmark that measures it named beside the constant."""
    assert _dated_lines(sorted(ROOT.glob("swan_jax/**/*.py"))) == []
    assert DATE.search('if as_written_before == "2026-11-28":')
