"""The analysis notebooks run top to bottom (nbclient, this interpreter) and ship stripped."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = ["01_eigenvalues.ipynb", "02_information_flow.ipynb", "03_jacobian_drift.ipynb",
             "04_training_runs.ipynb"]
TIME_LIMIT_S = 60  # each notebook, on CPU, at SIZE = "small"


def stream_text(cell) -> str:
    return "".join(out.get("text", "") for out in cell.get("outputs", [])
                   if out.get("output_type") == "stream")


def test_the_notebooks_are_all_listed_and_have_no_outputs():
    assert sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb")) == NOTEBOOKS
    for name in NOTEBOOKS:
        notebook = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
        nbformat.validate(notebook)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [], f"{name} holds outputs: strip them"
                assert cell.execution_count is None, f"{name} holds execution counts"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_top_to_bottom(name, monkeypatch):
    monkeypatch.delenv("SWAN_CHECKPOINT", raising=False)  # notebook 3 trains for itself
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")  # the time limit is a CPU one
    notebook = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
    # A last cell reports the kernel's interpreter: it must be the one running the tests.
    notebook.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.executable)"))
    client = NotebookClient(notebook, timeout=TIME_LIMIT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    client.execute()  # a cell past TIME_LIMIT_S fails the run: a hang guard, not a timing
    assert Path(stream_text(notebook.cells[-1]).strip()) == Path(sys.executable)
    errors = [out for cell in notebook.cells for out in cell.get("outputs", [])
              if out.get("output_type") == "error"]
    assert not errors
    # The "is my trained model non-dissipative?" cell answers with the one-line summary.
    answer = stream_text(notebook.cells[-2])
    assert "max |Re(lambda(M2)) + gamma| = " in answer and "(non-dissipative)" in answer
