"""Every pointer a reader follows exists: the relative links (and their anchors) and the
repository paths named in README.md, RESULTS.md, reproductions/README.md and docs/*.md;
the `sj.X` and `swan_jax.x.y` names README.md and docs/*.md use; and the README's headline
cells as RESULTS.md shows them.

A path is a backticked or linked token whose first part is an entry of the repository's
root (`swan_jax/...`, `reproductions/...`) or of the document's own folder
(`campaign/plan.toml` in reproductions/README.md). Placeholders (`<run>`, `*`, `{a,b}`,
`...`, `$VAR`) and the git-ignored output folders (`results/`, `runs/`, `data/`,
`docs/_build/`) are not checked: they exist only after a run.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import swan_jax

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = ["README.md", "RESULTS.md", "reproductions/README.md",
             *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]
# What a run writes, or a machine holds: named in the documents, never committed.
OUTPUT_FOLDERS = ("results/", "runs/", "data/", "docs/_build", ".venv")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
PLACEHOLDER = re.compile(r"[<>*{}$~]|\.\.\.|\bNAME\b|\bDIR\b|\bFILE\b")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*$", re.MULTILINE)


def _top_entries(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if not p.name.startswith(".")}


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file (lower case, punctuation dropped,
    spaces as hyphens, repeats numbered)."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(text):
        plain = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
        slug = re.sub(r"[^\w\- ]", "", plain).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _path_problem(document: Path, target: str, *, linked: bool) -> str | None:
    """Why `target` (named in `document`) does not resolve, or None."""
    path, _, anchor = target.partition("#")
    path = path.split(":", 1)[0].rstrip(".,;")  # `file.py:main`, `test.py::test_x`
    if PLACEHOLDER.search(path) or path.startswith(OUTPUT_FOLDERS):
        return None
    if not linked:  # a backticked token: a path only when its first part is ours
        first = path.split("/", 1)[0]
        if "/" not in path or " " in path or first in (".", ".."):
            return None
        ours = _top_entries(ROOT) | (
            _top_entries(document.parent) if document.parent != ROOT else set())
        if first not in ours:
            return None
    # A backticked path is read from the document's folder, the root, or the package
    # (docs/architecture.md's `experiments/sweep.py` is swan_jax/experiments/sweep.py).
    candidates = [document.parent / path] + (
        [] if linked else [ROOT / path, ROOT / "swan_jax" / path])
    hit = next((c for c in candidates if c.exists()), None)
    if hit is None:
        return f"no such file: {path}"
    if anchor and linked and hit.suffix == ".md" and anchor not in anchors(hit):
        return f"no heading #{anchor} in {hit.relative_to(ROOT).as_posix()}"
    return None


def pointer_problems(document: Path) -> list[str]:
    """Every relative link or repository path in `document` that does not resolve."""
    text = document.read_text(encoding="utf-8")
    problems = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # a URL
            continue
        if target.startswith("#"):
            if target[1:] not in anchors(document):
                problems.append(f"no heading {target}")
            continue
        problems.append(_path_problem(document, target, linked=True))
    for token in CODE.findall(text):
        for word in token.split():
            problems.append(_path_problem(document, word, linked=False))
    return sorted({p for p in problems if p})


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_link_and_path_exists(name):
    assert pointer_problems(ROOT / name) == []


def test_the_pointer_check_would_catch_drift(tmp_path):
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text("# Title\n## A section\n[ok](#a-section) [bad](#nowhere)\n"
                    "[gone](../README.md#no-such-heading) `swan_jax/gone.py` "
                    "`reproductions/<run>/results.json` `results/lrgb/table.md` "
                    "`gravins/SWAN` `swan_jax/field.py:vector_field`\n")
    # the checker resolves links against the page's folder and paths against ROOT
    problems = pointer_problems(page)
    assert "no heading #nowhere" in problems
    assert "no such file: ../README.md" in problems  # resolved from the page's folder
    assert "no such file: swan_jax/gone.py" in problems
    assert len(problems) == 3, problems
    assert "cite" in anchors(ROOT / "README.md")


# `sj.X` (the package imported as sj) and dotted `swan_jax.x.y` names in the user's pages.
SJ_NAME = re.compile(r"(?<![\w.])sj((?:\.\w+)+)")
DOTTED = re.compile(r"(?<![\w./])swan_jax(?:\.\w+)+")
USER_PAGES = ["README.md", *(n for n in DOCUMENTS if n.startswith("docs/"))]


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for depth in range(len(parts), 0, -1):  # the longest importable module, then attributes
        try:
            obj = importlib.import_module(".".join(parts[:depth]))
        except ImportError:
            continue
        for attr in parts[depth:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def name_problems(text: str) -> list[str]:
    names = {"swan_jax" + m for m in SJ_NAME.findall(text)} | set(DOTTED.findall(text))
    # `swan_jax.experiments.lrgb` in `python -m ...` is a module; a trailing file suffix
    # (`swan_jax.py`) is not a name.
    names = {n for n in names if not re.search(r"\.(py|md|toml|json)$", n)}
    return sorted(f"no such name: {n}" for n in names if not _resolves(n))


@pytest.mark.parametrize("name", USER_PAGES)
def test_every_python_name_in_the_user_pages_exists(name):
    assert name_problems((ROOT / name).read_text(encoding="utf-8")) == []


def test_the_name_check_would_catch_drift():
    assert name_problems("sj.SWANConfig, swan_jax.data.GraphDataset") == []
    assert name_problems("sj.NoSuch and swan_jax.train.nothing") == [
        "no such name: swan_jax.NoSuch", "no such name: swan_jax.train.nothing"]
    assert swan_jax.SWANConfig  # the check imports the package it names


def headline_cells() -> list[list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- headline cells", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in block.splitlines()[1:] if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def test_the_readmes_headline_cells_are_results_md_numbers():
    """Each paper value and each of ours in the README's small table appears as RESULTS.md
    shows it: the landing page quotes, it does not compute."""
    results = (ROOT / "RESULTS.md").read_text(encoding="utf-8")
    cells = headline_cells()
    assert len(cells) >= 5
    missing = [(row[0], value) for row in cells for value in (row[2], row[3])
               if value not in results]
    assert missing == []
