"""experiments/lrgb.py end to end on a tiny synthetic Peptides-func, and the AtomEncoder."""

from __future__ import annotations

import gzip
import importlib.util
import json
import pickle
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest

from swan_jax.data.molecules import ATOM_FEATURE_DIMS
from swan_jax.encoders import AtomEncoder, LinearNodeEncoder

ROOT = Path(__file__).resolve().parents[1]
REAL_DATA = ROOT.parent / "shared" / "data"


def load_experiment():
    if "lrgb_experiment" in sys.modules:
        return sys.modules["lrgb_experiment"]
    spec = importlib.util.spec_from_file_location("lrgb_experiment", ROOT / "experiments/lrgb.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


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
    lrgb = load_experiment()
    data = write_peptides(tmp_path / "data")
    common = ["--data-dir", str(data), "--cache-dir", str(tmp_path / "cache"),
              "--results-dir", str(tmp_path / "res"), "--checkpoint-dir", str(tmp_path / "ck"),
              "--epochs", "2", "--seeds", "0,1", "--hidden", "8", "--layers", "2",
              "--batch-size", "4", "--variant", "swan-learn", "--no-verify-md5", "--no-download",
              "--no-progress"]  # one variant: compiling the training step dominates
    assert lrgb.main(["--dataset", "peptides-func", *common]) == 0
    records = json.loads((tmp_path / "res/results.json").read_text())["records"]
    assert [(r["dataset"], r["variant"]) for r in records] == [("peptides-func", "swan-learn")]
    for r in records:
        assert r["seeds"] == [0, 1] and len(r["per_seed"]) == 2 and r["epochs"] == 2
        assert 0.0 <= r["test_mean"] <= 1.0 and 0.0 <= r["val_mean"] <= 1.0
        assert r["config"]["hidden"] == 8 and r["config"]["num_layers"] == 2
        assert 0 < r["params"] < 500_000 and r["seconds_per_epoch"] > 0
        assert r["machine"]["jax"] == jax.__version__
    table = (tmp_path / "res/table.md").read_text()
    assert "| peptides-func | AP | swan-learn | " in table and "| 67.51 ± 0.39 |" in table
    assert any((tmp_path / "ck/peptides-func/swan-learn").iterdir())

    # without --resume or --overwrite the results file is protected
    with pytest.raises(SystemExit, match="exists"):
        lrgb.main(["--dataset", "peptides-func", *common])
    # --all --resume: done cells are skipped, missing data sets are noted, nothing retrains
    capsys.readouterr()
    assert lrgb.main(["--all", "--resume", *common]) == 0
    out = capsys.readouterr().out
    assert out.count("already in") == 1
    assert "skipping peptides-struct" in out and "skipping pascalvoc-sp" in out
    assert len(json.loads((tmp_path / "res/results.json").read_text())["records"]) == 1
    assert "not run: pascalvoc-sp" in (tmp_path / "res/table.md").read_text()


@pytest.mark.skipif(not (REAL_DATA / "peptides-functional").exists(),
                    reason="real Peptides-func not available")
def test_selected_config_on_real_peptides_is_within_budget(tmp_path, capsys):
    lrgb = load_experiment()
    args = lrgb.parse_args(["--dataset", "peptides-func", "--data-dir", str(REAL_DATA),
                            "--cache-dir", str(tmp_path), "--limit", "50", "--no-progress",
                            "--no-download"])
    splits = lrgb.load_splits(args, "peptides-func")
    assert sum(len(s) for s in splits.values()) == 50
    assert splits["train"].nodes.shape[1] == 9
    for variant in ("swan", "swan-learn"):
        point = lrgb.CONFIGS[("peptides-func", variant)]
        static = {k: point[k] for k in lrgb.STATIC}
        numeric = {k: point[k] for k in lrgb.NUMERIC}
        model_fn = lrgb.make_model_fn(lrgb.TASKS["peptides-func"], variant, static, args)
        params = lrgb.parameter_count(model_fn, splits, numeric, args.batch_size)
        assert 50_000 < params < 500_000, (variant, params)
