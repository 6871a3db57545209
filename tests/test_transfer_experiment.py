"""The transfer experiment: CLI, end-to-end results + figure, vmapped seeds, resume."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from swan_jax.experiments import runs, sweep
from swan_jax.experiments import transfer as T

TINY = ["--train-size", "8", "--val-size", "4", "--test-size", "4", "--epsilon", "0.1",
        "--beta", "1", "--adjacency", "sym", "--seeds", "0,1", "--no-progress"]
RING = {"topology": "ring", "distance": 3, "model": "swan"}


def tiny_config(tmp: Path, **changes) -> T.TransferConfig:
    grid = {"learning_rate": (1e-3,), "epsilon": (0.1,), "gamma": (0.1,), "beta": (1.0,),
            "adjacency": ("sym",)}
    return T.EXPERIMENT.default_config(**{
        "sizes": (8, 4, 4), "grid": grid, "seeds": (0, 1), "epochs": 4, "patience": None,
        "progress": False, "cache_dir": tmp / "cache", "results_dir": tmp / "results",
        **changes})


def train_cell(cfg: T.TransferConfig, cell=RING):
    """The cell's one program (its only A_hat), trained; its result and record."""
    [program] = T.EXPERIMENT.plan(cfg, [cell])
    result = sweep.train_program(T.EXPERIMENT, cfg, program)
    return result, sweep.program_record(T.EXPERIMENT, cfg, program, result)


def losses(result, run=None):
    """Per-epoch (train loss, val metric) of every run, or of one run."""
    pick = (lambda v: v) if run is None else (lambda v: v[run])
    return [(pick(h["train_loss"]), pick(h["val"])) for h in result.history]


def test_cli_needs_a_cell_or_all_and_all_is_the_paper_grid():
    with pytest.raises(SystemExit):
        T.parse_config(["--topology", "ring"])
    cfg = T.parse_config(["--all"])
    assert cfg.topologies == ("line", "ring", "crossed-ring")
    assert cfg.distances == (3, 5, 10, 50)
    assert cfg.models == ("swan", "adgn", "gcn", "gin", "sage", "gat", "gps")
    assert (cfg.epochs, cfg.patience, cfg.grid["learning_rate"], cfg.seeds) == (
        2000, 100, (1e-3,), (0, 1, 2, 3))
    quick = T.parse_config(["--all", "--distances", "3,5", "--models", "swan,gcn", "--epochs",
                            "7", "--train-size", "50"])
    assert (quick.distances, quick.models, quick.epochs, quick.sizes[0]) == (
        (3, 5), ("swan", "gcn"), 7, 50)

    def programs(model, topology="ring"):
        return [(sorted({p.get("adjacency") for p in prog.grid}, key=str), len(prog.grid))
                for prog in T.EXPERIMENT.plan(cfg, [{**RING, "model": model,
                                                     "topology": topology}])]

    # SWAN up to k = 10: one program, both A_hat traced, 2 epsilons x 4 betas each on a line, beta
    # once on a ring (Psi vanishes on regular graphs); ADGN no beta; baselines lr only.
    assert programs("swan", "line") == [(["adj", "sym"], 16)]
    assert programs("swan") == [(["adj", "sym"], 4)]
    assert programs("adgn") == [(["adj", "sym"], 4)]
    # Past 10 hops the step is memory-bound: one program per A_hat, 32 runs each.
    far = T.EXPERIMENT.plan(cfg, [{**RING, "distance": 50, "topology": "line"}])
    assert [(p.static, len(p.grid)) for p in far] == [({"adjacency": "adj"}, 8),
                                                      ({"adjacency": "sym"}, 8)]
    assert programs("gat") == [([None], 1)]


@pytest.mark.slow
def test_end_to_end_writes_results_and_figure_and_skips_done_cells(tmp_path):
    argv = ["--topology", "line", "--distance", "3", "--model", "swan,gcn", "--epochs", "3",
            "--results-dir", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"),
            *TINY]
    assert T.main(argv) == 0
    payload = json.loads((tmp_path / "out" / "results.json").read_text())
    cells = payload["cells"]
    assert [(c["topology"], c["distance"], c["model"]) for c in cells] == [
        ("line", 3, "swan"), ("line", 3, "gcn")]
    for c in cells:
        assert math.isfinite(c["test_mean"]) and c["test_std"] >= 0
        assert c["seeds"] == [0, 1] and c["epochs_completed"] == 3
        assert c["wall_time"] > 0
    records = payload["records"]
    assert len(records) == 2 and all("machine" in r for r in records)
    assert cells[0]["best_hparams"] == {"adjacency": "sym", "beta": 1.0, "epsilon": 0.1,
                                        "gamma": 0.1, "learning_rate": 1e-3}
    # The authors' Figure 3 values sit beside ours, MSEs in scientific notation
    # (transfer errors reach 1e-7: fixed decimals printed them as 0.0000).
    authors = T.authors_figure3()["values"]["line"]["3"]
    assert cells[0]["paper"] == [authors["swan"]["mean"], None]
    assert cells[1]["paper"] == [authors["gcn"]["mean"], authors["gcn"]["std"]]
    table = (tmp_path / "out" / "table.md").read_text()
    swan_row = next(line for line in table.splitlines() if line.startswith("| line | 3 | swan"))
    cols = [c.strip() for c in swan_row.split("|")]
    assert cols[6] == f"{authors['swan']['mean']:.1e}"
    assert cols[5] == f"{cells[0]['test_mean']:.1e} ± {cells[0]['test_std']:.1e}"
    png = (tmp_path / "out" / "transfer.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    # Transfer checkpoints by default, like every experiment: each program has a folder.
    for r in records:
        folder = Path(r["checkpoint_dir"])
        assert (folder / "run.json").exists() and (folder / "3").is_dir()
    with pytest.raises(SystemExit, match="exists; pass --resume"):
        T.main(argv)
    assert T.main([*argv, "--resume"]) == 0  # both cells done: nothing trains
    assert json.loads((tmp_path / "out" / "results.json").read_text())["records"] == records


@pytest.fixture(scope="module")
def together(tmp_path_factory):
    """The SWAN cell with seeds 0 and 1 in one vmapped program, 4 epochs."""
    tmp = tmp_path_factory.mktemp("together")
    return train_cell(tiny_config(tmp)), tmp


@pytest.mark.slow
def test_vmapped_seeds_equal_seeds_one_by_one(together):
    (both, _), tmp = together
    for run, seed in enumerate((0, 1)):
        alone, _ = train_cell(tiny_config(tmp, seeds=(seed,)))
        np.testing.assert_allclose([h["train_loss"][run] for h in both.history],
                                   [h["train_loss"][0] for h in alone.history], rtol=1e-5)
        assert both.runs[run]["test"] == pytest.approx(alone.runs[0]["test"], rel=1e-4)


@pytest.mark.slow
def test_both_adjacencies_in_one_program_train_as_each_alone(together, tmp_path):
    """The adjacency is traced (its code): one program trains sym and adj runs, each as
    its own program would, and its records name each run's adjacency."""
    (sym, _), _ = together

    def grid(*adjacencies):
        return {"learning_rate": (1e-3,), "epsilon": (0.1,), "gamma": (0.1,), "beta": (1.0,),
                "adjacency": adjacencies}

    both, record = train_cell(tiny_config(tmp_path / "both", grid=grid("sym", "adj")))
    adj, _ = train_cell(tiny_config(tmp_path / "adj", grid=grid("adj")))
    assert [r["hparams"]["adjacency"] for r in record["runs"]] == ["sym"] * 2 + ["adj"] * 2
    for offset, alone in ((0, sym), (2, adj)):
        for run in range(2):
            np.testing.assert_allclose([h["train_loss"][offset + run] for h in both.history],
                                       [h["train_loss"][run] for h in alone.history],
                                       rtol=1e-5)
            assert both.runs[offset + run]["test"] == pytest.approx(alone.runs[run]["test"],
                                                                    rel=1e-4)
    assert losses(both, 0) != losses(both, 2)  # the two adjacencies did train apart
    # Reopened for prediction, a run's model holds its adjacency by name (static).
    model, _, info = runs.load_run(record["checkpoint_dir"], 2)
    assert info["hparams"]["adjacency"] == model.processor.cfg.adjacency == "adj"


@pytest.mark.slow
def test_interrupted_and_resumed_cell_ends_where_an_uninterrupted_one_does(together, tmp_path):
    (whole, whole_record), _ = together
    ck = tmp_path / "ck"
    first, _ = train_cell(tiny_config(tmp_path, epochs=2, checkpoint_dir=ck))
    assert first.epochs_completed == 2
    resumed, record = train_cell(tiny_config(tmp_path, checkpoint_dir=ck, resume=True))
    assert losses(resumed) == losses(whole)
    assert resumed.runs == whole.runs
    keys = ("best_hparams", "test_mean", "test_std", "val_mean", "epochs_run",
            "epochs_completed")
    [a] = sweep.summarise_cells(T.EXPERIMENT, tiny_config(tmp_path), [record])
    [b] = sweep.summarise_cells(T.EXPERIMENT, tiny_config(tmp_path), [whole_record])
    assert {k: a[k] for k in keys} == {k: b[k] for k in keys}


def test_beta_is_trained_once_on_rings_and_searched_on_lines(tmp_path):
    cfg = tiny_config(tmp_path, grid={"learning_rate": (1e-3,), "epsilon": (0.1,),
                                      "gamma": (0.1,), "beta": (1.0, 0.1), "adjacency": ("sym",)})
    ring = T.EXPERIMENT.grid(cfg, RING)
    line = T.EXPERIMENT.grid(cfg, {**RING, "topology": "line"})
    assert ring["beta"] == (1.0,) and line["beta"] == (1.0, 0.1)
    assert "beta" not in T.EXPERIMENT.grid(cfg, {**RING, "model": "adgn"})


def test_data_variant_and_init_flags_reach_the_config_and_the_notes(tmp_path):
    cfg = T.parse_config(["--topology", "line", "--distance", "3", "--model", "swan",
                          "--data-variant", "authors", "--init", "flax", *TINY])
    assert (cfg.data_variant, cfg.init) == ("authors", "flax")
    assert any("authors" in n for n in T.EXPERIMENT.notes(cfg))
    assert T.parse_config(["--all"]).init == "torch"  # the authors' PyTorch default
    with pytest.raises(ValueError, match=r"init must be one of .* \(CLI: --init\)"):
        tiny_config(tmp_path, init="xavier")


def test_torch_init_draws_encoder_and_readout_within_one_over_sqrt_fan_in():
    import jax
    import jax.numpy as jnp
    import jraph

    from swan_jax.models import LinearEncoder, NodeReadout

    graph = jraph.GraphsTuple(nodes=jnp.ones((5, 4)), edges=None, senders=jnp.zeros(0, int),
                              receivers=jnp.zeros(0, int), n_node=jnp.array([5]),
                              n_edge=jnp.array([0]), globals=None)
    enc = LinearEncoder(64, weight_init="torch").init(jax.random.PRNGKey(0), graph)["params"]
    kernel, bias = enc["Dense_0"]["kernel"], enc["Dense_0"]["bias"]
    assert float(jnp.abs(kernel).max()) <= 0.5 and float(jnp.abs(bias).max()) <= 0.5
    assert float(jnp.abs(bias).min()) > 0  # not Flax's zero bias
    head = NodeReadout((1,), weight_init="torch").init(jax.random.PRNGKey(1), graph,
                                                        jnp.ones((5, 64)))
    assert float(jnp.abs(head["params"]["MLP_0"]["Dense_0"]["kernel"]).max()) <= 1 / 8
    flax_enc = LinearEncoder(64).init(jax.random.PRNGKey(0), graph)["params"]
    assert float(jnp.abs(flax_enc["Dense_0"]["bias"]).max()) == 0


def test_the_cpu_protocol_behind_results_md_loads_as_documented():
    from swan_jax.experiments.config import CONFIG_DIR

    cfg = T.parse_config(["--config", str(CONFIG_DIR / "transfer-cpu.toml")])
    cells = T.EXPERIMENT.cells(cfg)
    assert len(cells) == 27 and {c["distance"] for c in cells} == {3, 5, 10}
    assert (cfg.epochs, cfg.patience, cfg.seeds, cfg.sizes, cfg.init) == (
        300, 100, (0, 1), (1000, 100, 100), "torch")
    assert all(len(v) == 1 for v in cfg.grid.values())
