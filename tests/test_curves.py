"""Learning curves (issue 47): `swan-curves` on a program folder names the program in its
legend (it said "."), ticks whole epochs (it ticked 0.5, 1.5, ...), and a failure to draw
at the end of a run is a warning. A sweep writes them in each program folder and its
results folder (`test_sweep::test_a_toy_experiment_runs_through_the_shared_sweep`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from swan_jax.experiments import curves, report


def program_folder(root: Path, *, described: bool = True, epochs: int = 3) -> Path:
    """A sweep's program folder as training leaves it: run.json and history.jsonl."""
    folder = root / "checkpoints" / "line" / "3" / "swan" / "adjacency=sym-0e8238e021"
    folder.mkdir(parents=True)
    run = {"train": {"metric": "mse"}}
    if described:
        run["description"] = {"cell": {"topology": "line", "distance": 3, "model": "swan"},
                              "static": {"adjacency": "sym"}, "program": "0e8238e021"}
    (folder / "run.json").write_text(json.dumps(run))
    (folder / "history.jsonl").write_text("".join(
        json.dumps({"epoch": e, "train_loss": [1.0 / (e + 1), 1.2 / (e + 1)],
                    "val": [0.5 - 0.1 * e, 0.6 - 0.1 * e], "lr": [1e-3, 1e-3]}) + "\n"
        for e in range(epochs)))
    return folder


def legend_and_ticks(fig) -> tuple[list[str], np.ndarray]:
    val = fig.axes[1]
    ticks = np.asarray([t for t in val.get_xticks() if val.get_xlim()[0] <= t
                        <= val.get_xlim()[1]])
    return [t.get_text() for t in val.get_legend().get_texts()], ticks


def test_swan_curves_on_a_program_folder_names_the_program_and_ticks_whole_epochs(
        tmp_path, monkeypatch, capsys):
    folder = program_folder(tmp_path)
    monkeypatch.chdir(folder)
    assert curves.main(["."]) == 0  # the folder itself, as a user types it
    assert (folder / "curves.png").read_bytes()[:4] == b"\x89PNG"
    fig = report.curves_figure([Path(".")], title=".", below=Path("."))
    labels, ticks = legend_and_ticks(fig)
    assert labels == ["line/3/swan/adjacency=sym (mean of 2 runs, band min-max)"]
    assert fig._suptitle.get_text() == "line/3/swan/adjacency=sym"
    assert fig.axes[1].get_title() == "validation mse"
    assert len(ticks) and np.array_equal(ticks, np.round(ticks))


def test_a_folder_without_a_sweeps_name_is_named_by_its_path(tmp_path):
    folder = program_folder(tmp_path, described=False, epochs=2)
    labels, ticks = legend_and_ticks(report.curves_figure([folder], title="t", below=tmp_path))
    assert labels == ["line/3/swan/adjacency=sym-0e8238e021 (mean of 2 runs, band min-max)"]
    assert np.array_equal(ticks, np.round(ticks))
    [alone] = legend_and_ticks(report.curves_figure([folder], title="t", below=folder))[0]
    assert alone.startswith("adjacency=sym-0e8238e021 ")  # the folder's name, never "."


def test_curves_that_cannot_be_drawn_are_a_warning(tmp_path, monkeypatch, capsys):
    folder = program_folder(tmp_path)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report, "curves_figure", broken)
    assert not report.draw_curves([folder], folder / "curves.png", title="t")
    err = capsys.readouterr().err
    assert err.startswith(f"warning: the learning curves {folder / 'curves.png'} were not "
                          f"written (OSError: [Errno 28] No space left on device)")
    assert not (folder / "curves.png").exists()
    assert not report.draw_curves([tmp_path / "empty"], tmp_path / "c.png", title="t")
