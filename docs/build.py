"""Build the documentation, offline: `make docs` (= `python docs/build.py`).

Writes into `docs/_build/` (git-ignored; `--out DIR` for another folder):

- `api/`: the API reference of the public face with pdoc: `swan_jax` (its `__all__`, and
  the subpackages it lists: `analysis`, `graph`), and the public subpackages `data`,
  `train`, `experiments` (each by its `__all__`). Private `_modules` get no page.
- `notebooks/`: the notebooks in `notebooks/` executed top to bottom and converted to HTML,
  the way tests/test_notebooks.py runs them (nbclient, the `python3` kernel of this
  interpreter, `notebooks/` as the working folder, `JAX_PLATFORMS=cpu`, no
  `SWAN_CHECKPOINT`, each notebook's own `SIZE = "small"`). The `.ipynb` files are only
  read: their outputs never reach git.
- `pages/`: README.md and the guide's pages docs/*.md as HTML; `index.html`: links to
  all of it.

`--only api` (repeatable: `api`, `notebooks`, `index`) builds some parts only; the
tests build the API reference and the pages this way (tests/test_docs.py).
`--notebook NAME` (repeatable, e.g. `01_eigenvalues`) executes only those notebooks to
`notebooks/NAME.html`: the command that runs one notebook. Nothing is downloaded, and
the pages load nothing from the network.

The kernels talk to this process over IPC (Unix sockets in a temporary folder), not TCP:
ipykernel warns "Kernel is running over TCP without encryption" on every TCP start, and a
local run has no use for TCP.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
DEFAULT_OUT = ROOT / "docs" / "_build"

# The public face: pdoc documents each of these with its `__all__`, and the submodules that
# `__all__` names (swan_jax -> analysis, graph, graphs; graph -> builders, gather).
API_MODULES = ["swan_jax", "swan_jax.data", "swan_jax.train", "swan_jax.experiments"]
# `gather` in the root's `__all__` is the module `swan_jax.graph.gather`, documented on its
# own page there (swan_jax/graph/gather.html); no second copy under the root.
API_EXCLUDE = [r"!swan_jax\.gather$"]
# pdoc cannot evaluate the string annotations (`from __future__ import annotations`) of
# NamedTuple / dataclass constructors; it shows them as written and warns once per class.
PDOC_QUIET = ["-W", "ignore:Error parsing type annotation"]
CELL_TIMEOUT_S = 600  # a hang guard per cell (the tests use 60 s, on an unloaded CPU)
# README.md first, then the guide's contents page, then every other page of docs/.
PAGES = [ROOT / "README.md", ROOT / "docs" / "guide.md",
         *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "guide.md")]

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 58rem; margin: 2rem auto;
       padding: 0 1rem; line-height: 1.5; color: #222; }
code, pre { font-family: ui-monospace, monospace; font-size: 0.92em; }
pre { background: #f5f5f5; padding: 0.6rem; overflow-x: auto; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 0.2rem 0.5rem; }
a { color: #0b57a4; }
"""


def page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n"
            f"<body>\n{body}\n</body>\n</html>\n")


def build_api(out: Path) -> Path:
    """The pdoc reference of `API_MODULES` in `out/api`; returns that folder."""
    version = re.search(r'^__version__ = "([^"]+)"',
                        (ROOT / "swan_jax" / "__init__.py").read_text(), re.MULTILINE)[1]
    api = out / "api"
    shutil.rmtree(api, ignore_errors=True)  # no page of a module that has gone
    subprocess.run([sys.executable, *PDOC_QUIET, "-m", "pdoc", "--docformat", "google",
                    "--footer-text", f"swan-jax {version}",
                    *API_MODULES, *API_EXCLUDE, "-o", str(api)], check=True)
    return api


def execute(notebook, *, timeout: int = CELL_TIMEOUT_S) -> None:
    """Run `notebook` (an nbformat node) in place, top to bottom, as tests/test_notebooks.py
    does: the `python3` kernel of this interpreter, `notebooks/` as the working folder. The
    kernel is reached over IPC, so ipykernel has no TCP to warn about."""
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    # The sockets' path must be absolute: the kernel starts in notebooks/, this process
    # wherever it was started, and a relative path would name two different sockets.
    with tempfile.TemporaryDirectory(prefix="swan-kernel-") as sockets:
        manager = KernelManager(kernel_name="python3", transport="ipc",
                                ip=str(Path(sockets) / "kernel"))
        try:
            NotebookClient(notebook, km=manager, timeout=timeout, kernel_name="python3",
                           resources={"metadata": {"path": str(NOTEBOOK_DIR)}}).execute()
        finally:  # nbclient leaves a kernel it was handed running: end it here
            if manager.has_kernel:
                manager.shutdown_kernel(now=True)


def notebook_paths(names: list[str] | None = None) -> list[Path]:
    """The notebooks named (`01_eigenvalues` or `01_eigenvalues.ipynb`), else all."""
    every = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
    if not names:
        return every
    known = {p.stem: p for p in every}
    unknown = [n for n in names if n.removesuffix(".ipynb") not in known]
    if unknown:
        raise SystemExit(f"docs/build.py: no notebook {', '.join(unknown)} in notebooks/; "
                         f"--notebook takes one of {', '.join(known)}")
    return [known[n.removesuffix(".ipynb")] for n in names]


def build_notebooks(out: Path, names: list[str] | None = None) -> list[Path]:
    """The notebooks (`names`, else all) executed to `out/notebooks/<name>.html`."""
    import jinja2
    import nbformat
    from nbconvert import HTMLExporter

    os.environ.pop("SWAN_CHECKPOINT", None)  # notebook 3 trains for itself
    os.environ["JAX_PLATFORMS"] = "cpu"  # the notebooks' SIZE = "small" is sized for a CPU
    # The lab template without the two scripts it loads from a CDN (require.js for widgets,
    # MathJax): the notebooks have neither widgets nor math, and the pages stay offline.
    template = ("{%- extends 'lab/index.html.j2' -%}\n"
                "{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}\n"
                "{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}\n")
    exporter = HTMLExporter(extra_loaders=[jinja2.DictLoader({"offline.html.j2": template})],
                            template_file="offline.html.j2")
    folder = out / "notebooks"
    if not names:
        shutil.rmtree(folder, ignore_errors=True)  # no page of a notebook that has gone
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for path in notebook_paths(names):
        start = time.perf_counter()
        notebook = nbformat.read(path, as_version=4)
        execute(notebook)
        body, _ = exporter.from_notebook_node(notebook, resources={"metadata": {"name": path.stem}})
        target = folder / f"{path.stem}.html"
        target.write_text(body, encoding="utf-8")
        written.append(target)
        print(f"{path.name} -> {target} ({time.perf_counter() - start:.0f} s)", flush=True)
    return written


def markdown_page(source: Path, target: Path, rendered: dict[Path, Path]) -> None:
    """`source` (Markdown) as `target` (HTML). Relative links point to the rendered page of
    a file in `rendered`, else to the file itself in the repository."""
    import markdown2  # a dependency of pdoc

    body = markdown2.markdown(source.read_text(encoding="utf-8"), extras=[
        "fenced-code-blocks", "tables", "header-ids", "cuddled-lists", "code-friendly"])

    def relink(match: re.Match) -> str:
        href = html.unescape(match.group(2))
        if re.match(r"[a-z][a-z0-9+.-]*:|#|/", href):  # a URL, an anchor, an absolute path
            return match.group(0)
        path, _, anchor = href.partition("#")
        linked = (source.parent / path).resolve()
        linked = rendered.get(linked, linked)
        new = os.path.relpath(linked, target.parent) + (f"#{anchor}" if anchor else "")
        return f'{match.group(1)}"{html.escape(new)}"'

    body = re.sub(r'(href=)"([^"]*)"', relink, body)
    title = source.relative_to(ROOT).as_posix()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page(f"swan-jax: {title}", body), encoding="utf-8")


def notebook_title(path: Path) -> str:
    import nbformat

    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            heading = re.search(r"^#\s+(.+)$", cell.source, re.MULTILINE)
            if heading:
                return heading.group(1).strip()
    return path.stem


def build_index(out: Path) -> Path:
    """`out/index.html`, linking the API reference, the notebooks, README and docs/*.md."""
    pages = {source: out / "pages" / f"{source.stem}.html" for source in PAGES}
    for source, target in pages.items():
        markdown_page(source, target, pages)

    def link(target: Path | str, text: str) -> str:
        href = target if isinstance(target, str) else target.relative_to(out).as_posix()
        return f'<li><a href="{html.escape(href)}">{text}</a></li>'

    api = out / "api"
    modules = sorted(p.relative_to(api).with_suffix("").as_posix().replace("/", ".")
                     for p in api.rglob("*.html") if p.name != "index.html")
    api_items = [link(api / (m.replace(".", "/") + ".html"), f"<code>{m}</code>")
                 for m in modules] or [link("api/swan_jax.html", "<code>swan_jax</code>")]
    notebook_items = [link(out / "notebooks" / f"{p.stem}.html",
                           f"{html.escape(notebook_title(p))} <small>({p.name})</small>")
                      for p in sorted(NOTEBOOK_DIR.glob("*.ipynb"))]
    page_items = [link(target, source.relative_to(ROOT).as_posix())
                  for source, target in pages.items()]
    body = "\n".join([
        "<h1>swan-jax documentation</h1>",
        "<p>SWAN (Space-Weight ANtisymmetric GNN) in JAX. Built by <code>make docs</code> "
        "from the repository; the notebooks were executed at <code>SIZE = \"small\"</code>.</p>",
        "<h2>API reference</h2>", "<ul>", *api_items, "</ul>",
        "<h2>Notebooks</h2>", "<ul>", *notebook_items, "</ul>",
        "<h2>README and the guide</h2>", "<ul>", *page_items, "</ul>",
    ])
    index = out / "index.html"
    index.write_text(page("swan-jax documentation", body), encoding="utf-8")
    return index


PARTS = {"api": build_api, "notebooks": build_notebooks, "index": build_index}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="output folder (default: docs/_build)")
    parser.add_argument("--only", action="append", choices=list(PARTS),
                        help="build this part only (repeatable; default: all)")
    parser.add_argument("--notebook", action="append", metavar="NAME",
                        help="execute only this notebook to notebooks/NAME.html "
                             "(repeatable; e.g. 01_eigenvalues)")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.notebook:
        notebook_paths(args.notebook)  # an unknown name: one line, before any work
        for written in build_notebooks(out, args.notebook):
            print(f"docs: {written}")
        return
    for name in args.only or list(PARTS):
        start = time.perf_counter()
        PARTS[name](out)
        print(f"docs: {name} built in {time.perf_counter() - start:.0f} s", flush=True)
    print(f"docs: {out / 'index.html'}")


if __name__ == "__main__":
    main()
