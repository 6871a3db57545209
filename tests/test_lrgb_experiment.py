"""The LRGB experiment end to end on a tiny synthetic Peptides-func, and the AtomEncoder."""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest

from swan_jax.data.molecules import ATOM_FEATURE_DIMS
from swan_jax.encoders import AtomEncoder, LinearNodeEncoder
from swan_jax.experiments import lrgb, sweep

ROOT = Path(__file__).resolve().parents[1]
REAL_DATA = ROOT.parent / "shared" / "data"


SMILES = ["CCO", "CC(=O)O", "c1ccccc1", "CCN", "CC(C)O", "OCC(N)C(=O)O", "c1ccncc1",
          "CC(=O)NC", "CCCC", "NCC(=O)O", "CC(N)C(=O)O", "OC1CCCCC1"]


def write_peptides(root: Path) -> Path:
    """A peptides-func raw layout: 12 molecules, labels alternating per class."""
    folder = root / "peptides-functional"
    folder.mkdir(parents=True)
    lines = [",smiles,peptide_seq,labels,identifier"]
    for i, smi in enumerate(SMILES):
        labels = [(i + c) % 2 for c in range(10)]
        lines.append(f'{i},{smi},SEQ{i},"{json.dumps(labels)}",id{i}')
    with gzip.open(folder / "peptide_multi_class_dataset.csv.gz", "wt") as f:
        f.write("\n".join(lines) + "\n")
    split = {"train": np.arange(0, 6), "val": np.arange(6, 9), "test": np.arange(9, 12)}
    with open(folder / "splits_random_stratified_peptide.pickle", "wb") as f:
        pickle.dump(split, f)
    return root


def test_atom_encoder_sums_per_feature_embeddings():
    rng = np.random.default_rng(0)
    codes = np.stack([rng.integers(0, d, 7) for d in ATOM_FEATURE_DIMS], axis=1)
    graph = jraph.GraphsTuple(nodes=jnp.asarray(codes, jnp.int32), edges=None,
                              senders=jnp.zeros(0, jnp.int32), receivers=jnp.zeros(0, jnp.int32),
                              n_node=jnp.asarray([7]), n_edge=jnp.asarray([0]), globals=None)
    enc = AtomEncoder(16)
    params = enc.init(jax.random.PRNGKey(0), graph)
    tables = [params["params"][f"embed_{i}"]["embedding"] for i in range(len(ATOM_FEATURE_DIMS))]
    assert [t.shape for t in tables] == [(d, 16) for d in ATOM_FEATURE_DIMS]
    expected = sum(np.asarray(t)[codes[:, i]] for i, t in enumerate(tables))
    np.testing.assert_allclose(enc.apply(params, graph), expected, rtol=1e-6, atol=1e-6)
    floats = graph._replace(nodes=jnp.ones((7, 14)))
    lin = LinearNodeEncoder(16)
    assert lin.apply(lin.init(jax.random.PRNGKey(0), floats), floats).shape == (7, 16)


def test_end_to_end_results_table_and_resume(tmp_path, capsys):
    data = write_peptides(tmp_path / "data")
    common = ["--data-dir", str(data), "--cache-dir", str(tmp_path / "cache"),
              "--results-dir", str(tmp_path / "res"), "--checkpoint-dir", str(tmp_path / "ck"),
              "--epochs", "2", "--seeds", "0,1", "--hidden", "8", "--layers", "2",
              "--batch-size", "4", "--variant", "swan-learn", "--no-verify-md5", "--no-download",
              "--no-progress"]  # one variant: compiling the training step dominates
    assert lrgb.main(["--dataset", "peptides-func", *common]) == 0
    payload = json.loads((tmp_path / "res/results.json").read_text())
    records, cells = payload["records"], payload["cells"]
    assert [(r["dataset"], r["variant"]) for r in records] == [("peptides-func", "swan-learn")]
    assert [(c["dataset"], c["variant"]) for c in cells] == [("peptides-func", "swan-learn")]
    for r, c in zip(records, cells, strict=True):
        assert c["seeds"] == [0, 1] and len(c["per_seed"]) == 2 and r["epochs"] == 2
        assert c["epochs_completed"] == 2
        assert 0.0 <= c["test_mean"] <= 1.0 and 0.0 <= c["val_mean"] <= 1.0
        assert c["best_hparams"]["hidden"] == 8 and c["best_hparams"]["num_layers"] == 2
        assert 0 < c["params"] < 500_000 and c["seconds_per_epoch"] > 0
        assert r["machine"]["jax"] == jax.__version__
    table = (tmp_path / "res/table.md").read_text()
    assert "| peptides-func | swan-learn | AP | " in table and "| 67.51 ± 0.39 |" in table
    assert any((tmp_path / "ck/peptides-func/swan-learn").iterdir())

    # without --resume or --overwrite the results file is protected
    with pytest.raises(SystemExit, match="exists"):
        lrgb.main(["--dataset", "peptides-func", *common])
    # --all --resume with two data sets missing: refused before any training, listing both
    with pytest.raises(SystemExit) as refused:
        lrgb.main(["--all", "--resume", *common])
    message = str(refused.value)
    assert message.startswith("missing data, nothing was trained:")
    assert ("peptides-struct / swan-learn: not run: data unavailable (peptides-struct: 2 raw "
            "file(s) missing") in message
    assert "\nhow to get them:\n  peptides-struct: " in message  # the details, once
    assert "pascalvoc-sp / swan-learn: " in message
    assert "--skip-missing" in message
    # --skip-missing opts into the partial run: done cells skipped, nothing retrains,
    # and both the output and the table say what was not run
    capsys.readouterr()
    assert lrgb.main(["--all", "--resume", "--skip-missing", *common]) == 0
    out = capsys.readouterr().out
    assert out.count("already in") == 1
    assert ("PARTIAL RUN (--skip-missing): 2 data set(s) missing:\n  peptides-struct / "
            "swan-learn: not run: data unavailable (peptides-struct: 2 raw file(s) "
            "missing") in out
    assert out.count("how to get them:") == 1  # the long part once, before the work
    assert "pascalvoc-sp" in out.split("PARTIAL RUN")[1]
    assert len(json.loads((tmp_path / "res/results.json").read_text())["records"]) == 1
    assert "- pascalvoc-sp / swan-learn: not run: data unavailable" in (
        tmp_path / "res/table.md").read_text()


@pytest.mark.skipif(not (REAL_DATA / "peptides-functional").exists(),
                    reason="real Peptides-func not available")
def test_selected_config_on_real_peptides_is_within_budget(tmp_path, capsys):
    cfg = lrgb.parse_config(["--dataset", "peptides-func", "--data-dir", str(REAL_DATA),
                             "--cache-dir", str(tmp_path), "--limit", "50", "--no-progress",
                             "--no-download"])
    splits = lrgb.EXPERIMENT.load_data(cfg, {"dataset": "peptides-func"})
    assert sum(len(s) for s in splits.values()) == 50
    assert splits["train"].nodes.shape[1] == 9
    for variant in ("swan", "swan-learn"):
        cell = {"dataset": "peptides-func", "variant": variant}
        [program] = lrgb.EXPERIMENT.plan(cfg, [cell])  # the selected point: configs/lrgb.toml
        model_fn = lrgb.EXPERIMENT.model_fn(cfg, cell, program.static)
        params = sweep.parameter_count(model_fn, splits, program.grid[0])
        assert 50_000 < params < 500_000, (variant, params)
