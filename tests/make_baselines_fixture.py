"""PyG's convolutions as the SWAN authors' baselines build them, run once on a fixed graph:
the recorded outputs `tests/fixtures/baselines_pyg.npz` that `tests/test_baselines_pyg.py`
holds `swan_jax.models.BASELINE_LAYERS` to (torch is no dependency of swan-jax).

    /work/torchenv/bin/python -m tests.make_baselines_fixture      # rewrites the fixture

The layers (gravins/SWAN `graph_transfer/models/gnn_model.py` and gravins/Anti-SymmetricDGN
`graph_prop_pred/models/dgn_GraphProp.py`): `GCNConv(C, D)`, `GINConv(Linear(C, D),
train_eps=True)`, `SAGEConv(C, D)`, `GATConv(C, D)`, PyG's defaults. The graph has
non-uniform degrees (a 4-node line, a 6-ring with a chord, an isolated node, and one
directed edge), so a bias before or after the normalised propagation differs. Every
weight is PyTorch's initial one plus Gaussian noise (std 0.1; GIN's eps too), so that
biases and eps (0 at initialisation) count in the outputs. The file keeps the graph, the
input, each conv's weights (PyTorch names and layouts) and output. Besides numpy, this
module imports torch only when called.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.make_gps_fixture import save_fixture

FIXTURE = Path(__file__).parent / "fixtures" / "baselines_pyg.npz"
IN, OUT = 5, 7  # non-square: a transposed kernel fails
KINDS = ("gcn", "gin", "sage", "gat")


def fixture_graph() -> dict[str, np.ndarray]:
    """11 nodes: a line 0-1-2-3, a 6-ring 4..9 with the chord 5-8 (both directions), node
    10 isolated, and the directed edge 3 -> 6; features normal."""
    line = [(0, 1), (1, 2), (2, 3)]
    ring = [(4 + i, 4 + (i + 1) % 6) for i in range(6)] + [(5, 8)]
    pairs = np.asarray(line + ring, np.int64)
    senders = np.concatenate([pairs[:, 0], pairs[:, 1], [3]])
    receivers = np.concatenate([pairs[:, 1], pairs[:, 0], [6]])
    x = np.random.default_rng(0).normal(size=(11, IN)).astype(np.float32)
    return {"x": x, "senders": senders, "receivers": receivers}


def authors_conv(kind: str, seed: int = 0):
    """The PyG conv the authors' code builds for `kind`, weights perturbed (docstring)."""
    import torch
    from torch_geometric.nn import GATConv, GCNConv, GINConv, SAGEConv

    torch.manual_seed(seed)
    conv = {"gcn": lambda: GCNConv(IN, OUT),
            "gin": lambda: GINConv(torch.nn.Linear(IN, OUT), train_eps=True),
            "sage": lambda: SAGEConv(IN, OUT),
            "gat": lambda: GATConv(IN, OUT)}[kind]().eval()
    with torch.no_grad():
        for weight in conv.parameters():
            weight.add_(0.1 * torch.randn_like(weight))
    return conv


def main() -> None:
    import torch

    graph = fixture_graph()
    edge_index = torch.from_numpy(np.stack([graph["senders"], graph["receivers"]]))
    arrays = dict(graph)
    for kind in KINDS:
        conv = authors_conv(kind)
        with torch.no_grad():
            arrays[f"{kind}/out"] = conv(torch.from_numpy(graph["x"]), edge_index).numpy()
        for name, value in conv.state_dict().items():
            arrays[f"{kind}/w/{name}"] = value.detach().numpy().astype(np.float32)
    save_fixture(FIXTURE, arrays)


if __name__ == "__main__":
    main()
