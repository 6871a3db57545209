"""The measurement cells' commands (`reproductions.jacobian`, `benchmarks.runtime_table`): the
Jacobian figure's runner on a tiny synthetic Peptides-func, the runtime table's refusal
of stand-in graphs, and their rows in RESULTS.md."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest

from reproduce.results import render
from reproductions import jacobian
from tests.test_lrgb_experiment import write_peptides

REPO = Path(__file__).resolve().parents[1]


def _tiny_peptides(tmp_path):
    from swan_jax.data import load_peptides_func

    return load_peptides_func(write_peptides(tmp_path / "data"), download=False,
                              progress=False, verify_md5=False, cache_dir=tmp_path / "cache")


def test_the_jacobian_runner_measures_both_models(tmp_path, monkeypatch):
    """The measurement on each model's parameters (freshly initialised here: training is
    the next test's), on the smallest test graphs, GCN's against Jacobians by hand."""
    setting = jacobian.Setting(epochs=1, graphs=2, hidden=8, layers=3)
    splits = _tiny_peptides(tmp_path)

    def untrained(kind, splits, setting, work, on_epoch_end=None):
        model = jacobian.build_model(kind, setting)
        return model.init(jax.random.PRNGKey(0), splits["train"][0]), {"epochs": 0}

    monkeypatch.setattr(jacobian, "train_model", untrained)
    record = jacobian.measure(setting, tmp_path / "work", splits=splits)
    sizes = np.asarray(splits["test"].n_node)
    chosen = record["graphs"]["measured"]
    assert sorted(sizes[chosen]) == sorted(sizes)[:2]  # the smallest test graphs
    swan, gcn = record["models"]["swan"], record["models"]["gcn"]
    assert set(swan) == {"training", "field", "layer_map"} and set(gcn) == {"training",
                                                                          "layer_map"}
    for values in (swan["field"], swan["layer_map"], gcn["layer_map"]):
        assert len(values["per_layer"]) == 2 and np.shape(values["per_graph"]) == (2, 2)
        assert np.isfinite(values["mean"]) and values["mean"] >= 0

    # GCN's numbers against the Jacobians of its layers taken here by hand.
    model = jacobian.build_model("gcn", setting)
    graph = splits["test"][chosen[0]]
    variables = model.init(jax.random.PRNGKey(0), graph)
    x = model.apply(variables, graph, method=lambda m, g: m.encoder(g))
    jacs = []
    for layer in range(3):
        layer_vars = {"params": variables["params"]["processor"][f"GCNLayer_{layer}"]}

        def step(v, layer_vars=layer_vars, shape=x.shape):
            from swan_jax.models import GCNLayer

            out = jax.nn.relu(GCNLayer(8).apply(layer_vars, graph, v.reshape(shape)))
            return out.reshape(-1)

        jacs.append(np.asarray(jax.jacfwd(step)(x.reshape(-1))))
        x = step(x.reshape(-1)).reshape(x.shape)
    want = [np.linalg.norm(jacs[i] - jacs[i - 1]) / np.linalg.norm(jacs[i - 1])
            for i in (1, 2)]
    got = jacobian.relative_changes("gcn", model, variables, graph)["layer_map"]
    np.testing.assert_allclose(got, want, rtol=1e-4)

    jacobian.write(tmp_path / "out", record, "test")
    assert (tmp_path / "out" / jacobian.FIGURE).stat().st_size > 0


def test_the_jacobian_runner_trains_and_keeps_the_best_epoch(tmp_path):
    setting = jacobian.Setting(epochs=2, graphs=1, hidden=8, layers=2)
    splits = _tiny_peptides(tmp_path)
    variables, trained = jacobian.train_model("gcn", splits, setting, tmp_path / "work")
    init = jacobian.build_model("gcn", setting).init(jax.random.PRNGKey(0), splits["train"][0])
    assert jax.tree_util.tree_structure(variables) == jax.tree_util.tree_structure(init)
    assert trained["epochs"] == 2 and trained["best_epoch"] in (0, 1)
    assert 0.0 <= trained["test_ap"] <= 1.0 and trained["params"] > 0
    assert any((tmp_path / "work" / "gcn").iterdir())  # resumable: its checkpoints


@pytest.mark.parametrize(("argv", "message"), [
    (["--epochs", "0"], "--epochs must be at least 1 (got 0)"),
    (["--limit", "3"], "--limit must be at least 10 raw rows (got 3)"),
    (["--epsilon", "0"], "--epsilon must be > 0 (got 0.0)"),
])
def test_the_jacobian_runner_refuses_bad_settings_in_one_line(argv, message, capsys,
                                                              monkeypatch):
    monkeypatch.setattr(jacobian, "measure", lambda *a, **k: pytest.fail("it measured"))
    with pytest.raises(SystemExit) as exit_:
        jacobian.main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(message)


def test_missing_peptides_is_one_line_before_training(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SWAN_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setattr(jacobian, "measure", lambda *a, **k: pytest.fail("it measured"))
    with pytest.raises(SystemExit) as exit_:
        jacobian.main(["--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(err) == 1 and "peptides" in err[0].lower()


# ======================================================================= RESULTS.md


def _fake_record():
    models = {"gcn": {"train_s": 1.5, "inference_s": 0.2}}
    return {"experiment": "runtime", "cells": [], "config": {"epochs": 3, "quick": False},
            "machine": {"device": "cpu:0"}, "models": models, "load_average": [1.0],
            "graphs": {"train": 10873, "val": 2331, "test": 2331}}


def test_results_md_shows_the_runtime_and_jacobian_runs_with_their_device(tmp_path):
    root = tmp_path / "reproductions"
    root.mkdir()
    shutil.copy(REPO / "reproductions" / "paper_values.json", root)
    runtime = root / "runtime-cpu-2core"
    runtime.mkdir()
    record = _fake_record()
    record["models"]["graphcon"] = {"train_s": 2.25, "inference_s": 0.5}
    record["note"] = "shared CPU"
    (runtime / "results.json").write_text(json.dumps(record))
    (runtime / "collected.json").write_text("{}")
    jac = root / "jacobian-cpu-2core"
    jac.mkdir()
    per = {"per_layer": [0.01, 0.02], "mean": 0.015, "per_graph": [[0.01, 0.02]]}
    (jac / "results.json").write_text(json.dumps({
        "experiment": "jacobian", "cells": [], "machine": {"device": "cpu:0"},
        "config": {"epochs": 5, "limit": 1000},
        "graphs": {"train": 700, "val": 150, "test": 150, "measured": [3],
                   "measured_nodes": [21]},
        "models": {"swan": {"training": {"epochs": 5, "test_ap": 0.4}, "field": per,
                            "layer_map": per},
                   "gcn": {"training": {"epochs": 5}, "layer_map": dict(per, mean=0.3)}}}))
    (jac / "collected.json").write_text("{}")
    (jac / "jacobian.png").write_bytes(b"png")
    render(root, tmp_path / "RESULTS.md")
    text = (tmp_path / "RESULTS.md").read_text()
    assert "| GraphCON | 2.25 | 3.03 | 0.5 | 0.27 | – | full; shared CPU | runtime-cpu-2core " \
           "(cpu:0) |" in text
    assert "| GraphGPS+LapPE | not run | 23.04 | not run | 2.39 | – |  |  |" in text
    assert "| SWAN | field J(t) at x(l) | 1.5% | 0.6% | 1, 2 | reduced: first 1000 raw " \
           "rows; 700 of 10873 train graphs" in text
    assert "nodes; epsilon 1; test AP 40.0 |" in text  # SWAN's step, the packaged one
    assert "| GCN | layer map x(l-1) -> x(l) | 30% | 40% |" in text
    assert "(reproductions/jacobian-cpu-2core/jacobian.png)" in text
    assert "| Jacobian over layers (fig:jacobian_over_time) | 2 | 2 | 0 | 2 | 0 |" in text
    assert "Other experiment" not in text


def test_the_ablation_s_peptides_variants_train_as_lrgb_cells(tmp_path):
    """Table 3's Peptides rows: `swan-lrgb --variant swan-beta0,swan-ne,swan-learn-ne`,
    each cell beside the paper's value (tiny sizes; one layer: the variants' cells do not
    depend on the depth, and each of the three programs compiles faster)."""
    from swan_jax.experiments import lrgb

    data = write_peptides(tmp_path / "data")
    argv = ["--dataset", "peptides-func", "--variant", ",".join(lrgb.ABLATION_VARIANTS),
            "--data-dir", str(data), "--cache-dir", str(tmp_path / "cache"),
            "--results-dir", str(tmp_path / "res"), "--epochs", "1", "--seeds", "0",
            "--hidden", "8", "--layers", "1", "--batch-size", "4", "--no-verify-md5",
            "--no-download", "--no-progress"]
    assert lrgb.main(argv) == 0
    cells = json.loads((tmp_path / "res" / "results.json").read_text())["cells"]
    assert [c["variant"] for c in cells] == list(lrgb.ABLATION_VARIANTS)
    assert all(0.0 <= c["test_mean"] <= 1.0 for c in cells)
    assert [c["paper"] for c in cells] == [[61.95, 0.67], [61.19, 0.37], [62.49, 0.51]]


def test_the_runtime_table_is_never_timed_on_stand_in_graphs(tmp_path, monkeypatch, capsys):
    from benchmarks import runtime_table as runtime

    monkeypatch.setenv("SWAN_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setattr(runtime, "results", lambda *a: pytest.fail("it timed stand-ins"))
    with pytest.raises(SystemExit):
        runtime.main(["--reproductions", str(tmp_path)])
    assert (f"Peptides-func's raw files are not in {tmp_path / 'empty'} (set SWAN_DATA_DIR)"
            in capsys.readouterr().err)
    assert not list(tmp_path.glob("runtime-*"))
