"""The campaign's measurement cells (`reproduce.campaign.measure`): the Jacobian figure's
runner on a tiny synthetic Peptides-func, the cells' scheduling and done-ness per device
kind, and their rows in RESULTS.md."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest

from reproduce import jacobian
from reproduce.campaign import loop, measure, plan
from reproduce.results import render
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
    (["--swan-checkpoint", "no/such/dir"], "--swan-checkpoint no/such/dir: no such folder"),
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


# ======================================================================= campaign


def _cells() -> list[plan.Entry]:
    return [plan.Entry(id="runtime/peptides-func", experiment="runtime", table="t",
                       priority=1, status="runnable", config={"epochs": 3, "quick": False},
                       cost_minutes={"cpu-2core": 1.0, "h200": 1.0}),
            plan.Entry(id="jacobian/peptides-func", experiment="jacobian", table="t",
                       priority=2, status="runnable", config={"epochs": 300, "graphs": 3},
                       cost_minutes={"cpu-2core": 500.0, "h200": 1.0})]


def _options(tmp_path: Path, kind: str = "cpu-2core") -> loop.Options:
    root = tmp_path / "reproductions"
    root.mkdir(exist_ok=True)
    shutil.copy(REPO / "reproductions" / "paper_values.json", root)
    plan_file = root / "campaign" / "plan.toml"
    plan_file.parent.mkdir(exist_ok=True)
    plan_file.write_text(plan.dump_plan(_cells(), "test plan"))
    return loop.Options(plan=plan_file, reproductions=root, work=tmp_path / "work",
                        device_kind=kind, budget_minutes=30, margin_seconds=0,
                        render=False)


def _fake_record(entry, work, deadline):
    models = {"gcn": {"train_s": 1.5, "inference_s": 0.2},
              "gps": {"not_available": "GPS is not implemented"}}
    return {"experiment": entry.experiment, "cells": [], "config": dict(entry.config),
            "machine": {"device": "cpu:0"}, "models": models, "load_average": [1.0],
            "graphs": {"train": 10873, "val": 2331, "test": 2331}}


def test_a_measurement_cell_runs_when_it_fits_and_is_done_per_device_kind(tmp_path,
                                                                          monkeypatch):
    ran = []
    monkeypatch.setattr(measure, "_measure",
                        lambda e, w, d: ran.append(e.id) or _fake_record(e, w, d))
    opts = _options(tmp_path)
    lines = loop.run_campaign(opts)
    # the runtime cell ran; the Jacobian cell (500 min here) does not fit 30 minutes
    assert ran == ["runtime/peptides-func"]
    assert any("jacobian/peptides-func: not started: a measurement runs whole (500 min"
               in line for line in lines)
    written = json.loads((opts.reproductions / "runtime-cpu-2core" / "results.json")
                         .read_text())
    assert written["models"]["gcn"]["train_s"] == 1.5
    state = json.loads((opts.reproductions / "campaign" / "state.json").read_text())
    assert state["cells"]["runtime/peptides-func"]["status"] == "finished"
    runtime_cell = _cells()[0]
    assert measure.is_done(runtime_cell, opts.reproductions, "cpu-2core")
    assert not measure.is_done(runtime_cell, opts.reproductions, "h200")  # its own run
    # done: a second call measures nothing again; another device kind measures its own
    loop.run_campaign(opts)
    assert ran == ["runtime/peptides-func"]
    loop.run_campaign(_options(tmp_path, "h200"))
    assert ran[1:] == ["runtime/peptides-func", "jacobian/peptides-func"]
    assert (opts.reproductions / "jacobian-h200" / "results.json").exists()
    # a reduced run by hand (another configuration) does not make the cell done
    quick = dict(written, config={"epochs": 3, "quick": True})
    (opts.reproductions / "runtime-cpu-2core" / "results.json").write_text(json.dumps(quick))
    assert not measure.is_done(runtime_cell, opts.reproductions, "cpu-2core")


def test_a_bad_measurement_configuration_fails_only_its_cell(tmp_path):
    opts = _options(tmp_path, "h200")
    bad = plan.Entry(id="jacobian/peptides-func", experiment="jacobian", table="t",
                     priority=1, status="runnable", config={"epochs": 0, "layers_": 2},
                     cost_minutes={"h200": 1.0})
    opts.plan.write_text(plan.dump_plan([bad], "test plan"))
    lines = loop.run_campaign(opts)
    assert any(line.startswith("jacobian/peptides-func: failed: ValueError: plan cell "
                               "jacobian/peptides-func: config layers_ is not a setting")
               for line in lines)


# ====================================================================== RESULTS.md


def test_results_md_shows_the_runtime_and_jacobian_runs_with_their_device(tmp_path):
    root = tmp_path / "reproductions"
    root.mkdir()
    shutil.copy(REPO / "reproductions" / "paper_values.json", root)
    runtime = root / "runtime-cpu-2core"
    runtime.mkdir()
    record = _fake_record(_cells()[0], None, None)
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
    assert "| GraphGPS+LapPE | not available | 23.04 | not available | 2.39 | – | GPS is not " \
           "implemented |" in text
    assert "| SWAN | field J(t) at x(l) | 1.5% | 0.6% | 1, 2 | reduced: first 1000 raw " \
           "rows; 700 of 10873 train graphs" in text
    assert "nodes; epsilon 1; test AP 40.0 |" in text  # SWAN's step, the packaged one
    assert "| GCN | layer map x(l-1) -> x(l) | 30% | 40% |" in text
    assert "(reproductions/jacobian-cpu-2core/jacobian.png)" in text
    assert "| Jacobian over layers (fig:jacobian_over_time) | 2 | 2 | 0 | 2 | 0 |" in text
    assert "Other experiment" not in text


def test_a_gpu_slice_s_measurements_merge_with_their_state(tmp_path):
    from reproduce.campaign.merge import merge_campaign

    opts = _options(tmp_path)
    theirs = tmp_path / "slice" / "reproductions"
    (theirs / "campaign").mkdir(parents=True)
    state = {"status": "finished", "seconds": {"h200": 60.0}, "updated": "2099-01-01"}
    (theirs / "campaign" / "state.json").write_text(json.dumps(
        {"cells": {"jacobian/peptides-func": state}}))
    (theirs / "jacobian-h200").mkdir()
    (theirs / "jacobian-h200" / "results.json").write_text('{"experiment": "jacobian"}')
    lines = merge_campaign(theirs, opts)
    assert "jacobian-h200: measured there, copied into reproductions/jacobian-h200" in lines
    assert (opts.reproductions / "jacobian-h200" / "results.json").exists()
    merged = json.loads((opts.reproductions / "campaign" / "state.json").read_text())
    assert merged["cells"]["jacobian/peptides-func"]["status"] == "finished"


def test_the_runtime_cell_is_never_timed_on_stand_in_graphs(tmp_path, monkeypatch):
    from reproduce import runtime

    monkeypatch.setenv("SWAN_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setattr(runtime, "results", lambda *a: pytest.fail("it timed stand-ins"))
    opts = _options(tmp_path)
    opts.plan.write_text(plan.dump_plan(_cells()[:1], "test plan"))
    lines = loop.run_campaign(opts)
    assert any(line.startswith("runtime/peptides-func: failed: ValueError: plan cell "
                               "runtime/peptides-func: Peptides-func's raw files are not in "
                               f"{tmp_path / 'empty'} (set SWAN_DATA_DIR)") for line in lines)
    assert not (opts.reproductions / "runtime-cpu-2core").exists()


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
