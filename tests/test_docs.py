"""`make docs`'s API reference (docs/build.py --only api): the public face, nothing private.

The notebooks part of `make docs` is not built here: tests/test_notebooks.py executes them.
"""

from __future__ import annotations

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

    # No page of a private module (swan_jax/train/_loop.py, ...), nor of the deprecated
    # module alias swan_jax/gather.py (in `__all__`, `gather` is the function).
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
