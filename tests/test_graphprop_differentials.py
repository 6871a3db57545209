"""The GraphProp differentials against the authors' PyTorch code (reproductions/
_differential.py and the two studies beside their reports): the authors' steps import
without JAX, the stand-ins and the batch of graphs our field reads back, and the ADGN
study's vectorised stand-in for PNA's all-pairs shortest paths (the data comparison rests
on it). Nothing here needs torch."""

from __future__ import annotations

import importlib
import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reproductions import _differential as differential
from swan_jax.data import graphprop

gad = importlib.import_module("reproductions.graphprop-adgn-differential.study")
STUDIES = ("reproductions.graphprop-differential.study",
           "reproductions.graphprop-adgn-differential.study")
ROOT = Path(__file__).resolve().parents[1]


def test_the_studies_import_without_jax_torch_or_matplotlib():
    """The authors' steps run in a venv with torch and without JAX (and ours without
    torch): neither study, nor what they share, imports one at module top."""
    blocked = ("jax", "jraph", "swan_jax", "torch", "torch_geometric", "matplotlib")
    code = (f"import sys, importlib\nfor m in {blocked!r}: sys.modules[m] = None\n"
            f"for s in {STUDIES!r}: importlib.import_module(s)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # ... and the check would see one
    code = code.replace("'jax',", "'json',")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          timeout=60).returncode != 0


def test_the_ray_stand_in_runs_the_decorated_function_in_this_process(tmp_path):
    folder = differential.write_shims(tmp_path / "shims")
    assert sorted(p.name for p in folder.iterdir()) == ["ray.py", "torch_scatter.py"]
    spec = importlib.util.spec_from_file_location("ray_stand_in", folder / "ray.py")
    ray = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ray)

    def pipeline(x):
        return x + 1

    assert ray.remote(pipeline) is pipeline  # @ray.remote
    assert ray.remote(num_cpus=1)(pipeline) is pipeline  # @ray.remote(num_cpus=1)


def test_a_wrong_reference_is_refused_in_one_line(tmp_path):
    with pytest.raises(SystemExit, match=r"--ref .*: no graph_property_prediction/models/"
                                         r"swan.py there \(give the root of a gravins/SWAN"):
        differential.reference_code(tmp_path, tmp_path, code="graph_property_prediction",
                                    marker="models/swan.py", repo="gravins/SWAN")


def test_the_authors_batch_is_read_back_with_each_graphs_edges():
    """Two graphs of 3 and 2 nodes in torch_geometric's batch numbering: 4 + 2 edges."""
    edge_index = np.array([[0, 1, 1, 2, 3, 4], [1, 0, 2, 1, 4, 3]])
    graph = differential.batched_graph(edge_index, np.array([3, 2]))
    assert graph.n_edge.tolist() == [4, 2] and graph.n_node.tolist() == [3, 2]
    assert graph.senders.tolist() == edge_index[0].tolist()


def test_a_step_that_imports_the_authors_code_needs_ref_and_gets_the_stand_ins(tmp_path,
                                                                              capsys):
    seen = []
    cli = differential.Command("s", "doc", tmp_path)
    cli.step("authors", seen.append, "theirs", reference="x/y").add_argument("--tag")
    cli.step("plot", seen.append, "figure")
    assert cli(["plot"]) == 0
    assert not hasattr(seen[-1], "ref") and not (tmp_path / "shims").exists()
    with pytest.raises(SystemExit):
        cli(["authors", "--tag", "t"])
    assert "the following arguments are required: --ref" in capsys.readouterr().err
    cli(["authors", "--ref", "r", "--tag", "t"])
    assert (seen[-1].shims, seen[-1].tag) == (str(tmp_path / "shims"), "t")
    assert (tmp_path / "shims" / "torch_scatter.py").is_file()
    assert cli.parser.prog == "python -m reproductions.s.study"


def _pna_loops(adj, inf_sub=math.inf):
    """PNA's `graph_algorithms.all_pairs_shortest_paths` as written there: three loops."""
    a = np.array(adj, dtype=np.float64)
    n = a.shape[0]
    for i in range(n):
        for j in range(n):
            if a[i][j] == 0:
                a[i][j] = math.inf
            if i == j:
                a[i][j] = 0
    for k in range(n):
        for i in range(n):
            for j in range(n):
                a[i][j] = min(a[i][j], a[i][k] + a[k][j])
    return np.where(a == math.inf, inf_sub, a)


def test_the_fast_shortest_paths_equal_pnas_loops_and_our_bfs():
    fast = gad._fast_apsp()
    rng = np.random.default_rng(0)
    for family in ("caveman", "tree", "erdos_renyi", "lobster"):  # caveman: disconnected
        adj, _ = graphprop.draw_graph(9, rng, family=family)
        a = adj.astype(np.float64)
        for inf_sub in (math.inf, 0, -1):
            np.testing.assert_array_equal(fast(a, inf_sub), _pna_loops(a, inf_sub))
        np.testing.assert_array_equal(fast(a, -1), graphprop.shortest_path_lengths(adj))


def test_the_fast_shortest_paths_see_a_missing_edge():
    fast = gad._fast_apsp()
    path = np.diag(np.ones(4), 1) + np.diag(np.ones(4), -1)  # a line of 5 nodes
    assert fast(path)[0, 4] == 4
    path[2, 3] = path[3, 2] = 0
    assert math.isinf(fast(path)[0, 4])
