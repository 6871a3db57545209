"""`make docs`'s API reference (docs/build.py --only api): the public face, nothing private;
docs/architecture.md's module list equal to the package's modules.

The notebooks part of `make docs` is not built here: tests/test_notebooks.py executes them.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# page -> names that must have an anchor there (re-exported names are documented on the
# page of the package whose `__all__` lists them)
PUBLIC = {
    "swan_jax.html": ["SWANBlock", "SWANConfig", "solve", "vector_field", "init_params",
                      "Model", "prepare_graph", "SolverError"],
    "swan_jax/analysis.html": ["model_dissipativity_summary", "spectrum"],
    "swan_jax/graph.html": ["GraphOps", "as_operator", "validate_graph"],
    "swan_jax/data.html": ["GraphDataset", "GraphDataset.from_graphs", "GraphDataset.split",
                           "iterate_batches"],
    "swan_jax/train.html": ["train", "TrainConfig", "TrainResult"],
    "swan_jax/experiments.html": ["run_sweep", "load_run", "SweepConfig"],
}


def test_api_reference_documents_the_public_face_only(tmp_path):
    out = tmp_path / "_build"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # nothing written into the repository
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "build.py"), "--only", "api",
                           "--out", str(out)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warn:" not in done.stderr, done.stderr  # pdoc imported and resolved everything
    api = out / "api"
    pages = {p.relative_to(api).as_posix() for p in api.rglob("*.html")}

    for page, names in PUBLIC.items():
        assert page in pages, f"no API page {page}: {sorted(pages)}"
        text = (api / page).read_text(encoding="utf-8")
        for name in names:
            assert f'id="{name}"' in text, f"{name} has no anchor in {page}"

    # No page of a private module (swan_jax/train/_loop.py, ...), nor a root page for
    # `gather` (in `__all__`, the module `swan_jax.graph.gather`, documented there).
    private = [p for p in pages if any(part.startswith("_") for part in p.split("/"))]
    assert not private, private
    assert "swan_jax/gather.html" not in pages
    assert all(p == "index.html" or p.startswith("swan_jax") for p in pages), sorted(pages)

    # Google-style sections render as sections (docformat), not as raw "Args:" text.
    root = (api / "swan_jax.html").read_text(encoding="utf-8")
    solve = root[root.index('<section id="solve">'):]
    solve = solve[:solve.index("</section>")]
    assert '<h6 id="arguments">Arguments:</h6>' in solve
    assert "<strong>save_trajectory:</strong>" in solve

    # Offline pages: no script or stylesheet from the network.
    for page in pages:
        text = (api / page).read_text(encoding="utf-8")
        assert not re.search(r'<(script|link)[^>]+(src|href)="(https?:)?//', text), page


# How this project's maintainers reach a lent GPU is not a user's business: what a user
# reads (README, docs, Makefile, the GPU benchmark's header) names no device tool and no
# carried paths.
INTERNAL = re.compile(r"device tool|\bcarry \[|timeout_s|\$OUT/state\.tar into")


def test_user_facing_files_hold_no_internal_device_instructions():
    header = (ROOT / "benchmarks" / "gpu_check.sh").read_text().split("set -euo")[0]
    texts = {"benchmarks/gpu_check.sh (header)": header,
             "README.md": (ROOT / "README.md").read_text(),
             "Makefile": (ROOT / "Makefile").read_text()}
    texts.update({str(p.relative_to(ROOT)): p.read_text()
                  for p in sorted((ROOT / "docs").glob("*.md"))})
    found = {name: INTERNAL.findall(text) for name, text in texts.items()}
    assert not {name: hits for name, hits in found.items() if hits}
    assert INTERNAL.search('Run (device tool): command "bash x.sh", carry [".whl"]')


# docs/architecture.md: its "Every module" table lists each module of the package and each
# top-level command, and every module the document names anywhere exists.
ARCHITECTURE = ROOT / "docs" / "architecture.md"
LISTED = re.compile(r"`((?:swan_jax|experiments)/[\w/]+\.py)`")
# `swan_jax/train/_loop.py`; `data/device.assemble`, `train/_folder`: a package's module
DOC_PATH = re.compile(r"(?<![\w/.])(?:swan_jax/)?((?:graph|data|train|analysis|experiments|runs"
                      r"|models)/\w+)(?:\.(\w+))?")
DOTTED = re.compile(r"(?<![\w/.])swan_jax(?:\.\w+)+")


def _the_modules() -> set[str]:
    found = {p.relative_to(ROOT).as_posix() for p in (ROOT / "swan_jax").rglob("*.py")}
    return found | {p.relative_to(ROOT).as_posix() for p in (ROOT / "experiments").glob("*.py")}


def _module_list_problems(text: str) -> list[str]:
    """What the "Every module" table misses or names wrongly, and the modules named
    elsewhere in `text` that do not exist (a path, `pkg/module.name` or a dotted name)."""
    table = text.split("## Every module", 1)[-1].split("\n## ", 1)[0]
    listed, real = set(LISTED.findall(table)), _the_modules()
    problems = [f"not in the module list: {m}" for m in sorted(real - listed)]
    problems += [f"listed but no such module: {m}" for m in sorted(listed - real)]
    for path, attr in DOC_PATH.findall(text):
        module = "swan_jax/" + path
        if not ((ROOT / f"{module}.py").exists() or (ROOT / module).is_dir()
                or (ROOT / f"{path}.py").exists()):
            problems.append(f"no such module: {path}")
        elif attr and attr != "py" and (ROOT / f"{module}.py").exists() and not hasattr(
                importlib.import_module(module.replace("/", ".")), attr):
            problems.append(f"no {attr} in {path}")
    for dotted in set(DOTTED.findall(text)):
        parts = dotted.split(".")
        depth = max(i for i in range(1, len(parts) + 1)
                    if (ROOT / "/".join(parts[:i])).is_dir()
                    or (ROOT / ("/".join(parts[:i]) + ".py")).exists())
        if depth < len(parts) and not hasattr(
                importlib.import_module(".".join(parts[:depth])), parts[depth]):
            problems.append(f"no such module or name: {dotted}")
    return problems


def test_the_architecture_doc_names_every_module():
    assert _module_list_problems(ARCHITECTURE.read_text()) == []


def test_the_module_list_check_would_catch_drift():
    text = ARCHITECTURE.read_text()
    row = "| `swan_jax/gps.py` |"
    assert row in text
    missing = text.replace(row, "| gps |")
    assert _module_list_problems(missing) == ["not in the module list: swan_jax/gps.py"]
    stale = text.replace(row, "| `swan_jax/gone.py` | x |\n" + row)
    assert _module_list_problems(stale) == ["listed but no such module: swan_jax/gone.py"]
    named = text + "\n`train/_gone.step`, `data/raw.Nothing`, `swan_jax.graphz.x`\n"
    assert sorted(_module_list_problems(named)) == [
        "no Nothing in data/raw", "no such module or name: swan_jax.graphz.x",
        "no such module: train/_gone"]


def test_package_docstrings_name_every_module():
    """`swan_jax.data`, `swan_jax.experiments`, `swan_jax.runs` and `swan_jax.models`
    introduce each of their modules."""
    for package in ("data", "experiments", "runs", "models"):
        folder = ROOT / "swan_jax" / package
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
        named = set(re.findall(r"`(\w+)`", doc))
        missing = sorted(p.stem for p in folder.glob("*.py")
                         if p.stem != "__init__" and p.stem not in named)
        assert missing == [], f"swan_jax/{package}/__init__.py's docstring omits {missing}"


# --- the README as a landing page, and the guide's pages ----------------------------------
README = ROOT / "README.md"
FIRST_SCREEN = 40  # lines a reader sees before scrolling


def test_the_readme_is_a_landing_page_with_the_two_commands_first():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move detail to docs/"
    screen = "\n".join(lines[:FIRST_SCREEN])
    for command in ("make install", "make test", "make reproduce-lrgb",
                    "make reproduce-lrgb QUICK=1"):
        assert re.search(rf"^{re.escape(command)}(\s|$)", screen, re.MULTILINE), command
    assert "dX/dt = " in screen  # what SWAN is, before the commands
    headings = re.findall(r"^## (.+)$", "\n".join(lines), re.MULTILINE)
    assert {"Install and run", "SWAN on your own graphs", "Documentation", "Cite"} <= set(
        headings), headings


def test_every_guide_page_is_linked_from_the_readme_and_the_guide():
    text = README.read_text(encoding="utf-8")
    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in text, f"README.md does not link docs/{page.name}"
        if page.name != "guide.md":
            assert f"({page.name})" in guide, f"docs/guide.md does not link {page.name}"


def _bibtex() -> dict[str, str]:
    text = README.read_text(encoding="utf-8").split("\n## Cite", 1)[1]
    entry = re.search(r"```bibtex\n(@inproceedings\{.*?\n\})\n```", text, re.S)
    assert entry, "README.md's Cite section has no @inproceedings BibTeX block"
    fields = re.findall(r"^\s*(\w+)\s*=\s*\{(.*?)\},?\s*$", entry.group(1), re.M | re.S)
    return {key: " ".join(value.split()) for key, value in fields}


def test_the_readmes_bibtex_is_the_papers_as_citation_cff_gives_it():
    cff = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    paper = cff[cff.index("\npreferred-citation:\n"):]
    bib = _bibtex()
    title = re.search(r'^  title: "(.+)"$', paper, re.M).group(1)
    assert bib["title"] == title
    families = re.findall(r"family-names: (.+)", paper)
    givens = re.findall(r"given-names: (.+)", paper)
    latex = [family.replace("ö", '{\\"o}') for family in families]  # Sch{\"o}nlieb
    names = [f"{f}, {g}" for f, g in zip(latex, givens, strict=True)]
    assert bib["author"] == " and ".join(names)
    for key, cff_key in (("year", "year"), ("volume", "volume"), ("number", "issue")):
        assert bib[key] == re.search(rf"^  {cff_key}: (\d+)$", paper, re.M).group(1), key
    start, end = (re.search(rf"^  {k}: (\d+)$", paper, re.M).group(1) for k in ("start", "end"))
    assert bib["pages"] == f"{start}--{end}"
    assert bib["booktitle"] == re.search(r'collection-title: "(.+)"', paper).group(1)
    assert "2405.01009" in bib["note"] and "2405.01009" in paper


def test_the_own_data_page_continues_the_readmes_example(tmp_path, monkeypatch):
    """docs/own-data.md's optimiser / metric / tracker example, run after the README's
    (whose names it uses), in a scratch folder: it trains two learning rates as one
    program with a custom metric and writes the trackers' files."""
    from tests.test_byod import readme_example

    page = (ROOT / "docs" / "own-data.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- own-data-example[^>]*-->\n```python\n(.*?)```", page, re.S)
    assert match, "docs/own-data.md lost its own-data-example block"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(readme_example(), "README.md:byod-example", "exec"), namespace)
    exec(compile(match.group(1), "docs/own-data.md:own-data-example", "exec"), namespace)
    runs = namespace["result"].runs
    assert sorted(run["hparams"]["learning_rate"] for run in runs) == [1e-4, 1e-3]
    assert (tmp_path / "runs" / "sgd" / "history.csv").is_file()
    assert any((tmp_path / "runs" / "sgd" / "tensorboard").rglob("events.*"))


def _build(tmp_path, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, str(ROOT / "docs" / "build.py"), *args,
                           "--out", str(tmp_path / "_build")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_make_docs_builds_every_guide_page_with_working_links(tmp_path):
    done = _build(tmp_path, "--only", "index")
    assert done.returncode == 0, done.stdout + done.stderr
    pages = tmp_path / "_build" / "pages"
    built = {p.name for p in pages.glob("*.html")}
    expected = {"README.html"} | {f"{p.stem}.html" for p in (ROOT / "docs").glob("*.md")}
    assert built == expected
    index = (tmp_path / "_build" / "index.html").read_text(encoding="utf-8")
    assert all(f'href="pages/{name}"' in index for name in expected)
    # A link between pages goes to the built page, with the anchor the page has.
    readme = (pages / "README.html").read_text(encoding="utf-8")
    assert 'href="experiments.html#data-offline"' in readme
    assert 'id="data-offline"' in (pages / "experiments.html").read_text(encoding="utf-8")
    for page in pages.glob("*.html"):
        for href in re.findall(r'href="([^"#]+)(?:#[^"]*)?"', page.read_text(encoding="utf-8")):
            if not re.match(r"[a-z][a-z0-9+.-]*:", href):
                assert (page.parent / href).resolve().exists(), (page.name, href)


def test_one_notebook_by_name_and_an_unknown_name_is_one_line(tmp_path):
    done = _build(tmp_path, "--notebook", "no_such_notebook")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "docs/build.py: no notebook no_such_notebook in notebooks/; --notebook takes one of "
        "01_eigenvalues, 02_information_flow, 03_jacobian_drift, 04_training_runs"]
    assert not (tmp_path / "_build" / "notebooks").exists()


def test_the_notebook_runner_executes_without_the_tcp_warning(tmp_path):
    """docs/build.py's kernel runs over IPC: ipykernel's "Kernel is running over TCP without
    encryption" never reaches the user, the cell's output comes back, and the kernel and
    its sockets are gone afterwards (no "Parent appears to have exited" either)."""
    build_py = str(ROOT / "docs" / "build.py")
    script = (
        "import importlib.util, nbformat\n"
        f"spec = importlib.util.spec_from_file_location('build', {build_py!r})\n"
        "build = importlib.util.module_from_spec(spec); spec.loader.exec_module(build)\n"
        "nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("
        "'import os; print(os.getcwd())')])\n"
        "build.execute(nb, timeout=60)\n"
        "print(nb.cells[0].outputs[0]['text'].strip())\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(ROOT / "notebooks")  # the kernel ran in notebooks/
    assert "TCP without encryption" not in done.stderr
    assert "Parent appears to have exited" not in done.stderr
    assert not list((ROOT / "notebooks").glob("kernel-ipc*"))
