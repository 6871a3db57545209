"""RDKit is optional: only the SMILES featuriser needs it (the `chem` extra).

A fresh interpreter in which `import rdkit` fails imports swan-jax, generates the transfer
and graph-property data, builds the atom encoder and trains a tiny transfer model; the
featuriser then fails with the one-line install hint.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from swan_jax.data import molecules

ROOT = Path(__file__).resolve().parent.parent

WITHOUT_RDKIT = textwrap.dedent('''
    import importlib.abc
    import json
    import sys


    class BlockRdkit(importlib.abc.MetaPathFinder):
        """As if rdkit were not installed."""

        def find_spec(self, name, path=None, target=None):
            if name == "rdkit" or name.startswith("rdkit."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None


    sys.meta_path.insert(0, BlockRdkit())

    import jax
    import jax.numpy as jnp

    import swan_jax as sj
    import swan_jax.analysis
    import swan_jax.data
    from swan_jax.data import graphprop, lrgb, molecules, transfer
    from swan_jax.encoders import AtomEncoder
    from swan_jax.models import LinearEncoder, Model, NodeReadout, SWANBlock
    from swan_jax.train import TrainConfig, train

    splits = transfer.load_transfer("line", 3, cache_dir=sys.argv[1], sizes=(16, 8, 8))
    graphprop.make_graphprop_splits(0, nodes={s: (6,) for s in graphprop.SPLITS},
                                    per_size={s: 2 for s in graphprop.SPLITS})
    codes = sj.graph.line_graph(4)._replace(nodes=jnp.zeros((4, 9), jnp.int32))
    AtomEncoder(8).init(jax.random.PRNGKey(0), codes)

    swan = sj.SWANConfig(num_layers=3, epsilon=0.5)
    result = train(lambda hp: Model(LinearEncoder(8), SWANBlock(swan), NodeReadout((1,))),
                   splits, TrainConfig(epochs=1, batch_size=8, progress=False))
    try:
        molecules.smiles_to_graph("CCO")
        error = None
    except ImportError as err:
        error = str(err)
    print(json.dumps({
        "rdkit_loaded": any(m == "rdkit" or m.startswith("rdkit.") for m in sys.modules),
        "epochs": result.epochs_completed,
        "best_val": [float(run["best_val"]) for run in result.runs],
        "error": error,
    }))
''')


@pytest.mark.slow
def test_swan_jax_trains_a_transfer_model_without_rdkit(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", WITHOUT_RDKIT, str(tmp_path / "cache")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["rdkit_loaded"] is False
    assert report["epochs"] == 1
    assert report["best_val"] and all(math.isfinite(v) for v in report["best_val"])
    assert report["error"] == molecules.RDKIT_MISSING


def test_the_featuriser_names_the_missing_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "rdkit", None)  # `import rdkit` now fails
    with pytest.raises(ImportError) as caught:
        molecules.smiles_to_graph("CCO")
    message = str(caught.value)
    assert message == molecules.RDKIT_MISSING
    assert "swan-jax[chem]" in message and "\n" not in message
