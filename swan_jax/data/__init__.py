"""Data sets as flat NumPy arrays, and padded jraph batches with fixed budgets.

- `dataset`: `GraphDataset`, the container every loader returns (atomic, versioned caches).
- `batching`: padded batches with fixed node / edge / graph budgets and masks.
- `device`: a data set placed on the device; `assemble` gathers a step's batch there.
- `convert`: one graph of a user's own data -> the dict `GraphDataset.from_graphs` joins.
- `transfer`: line / ring / crossed-ring graph transfer (paper Appendix D.1).
- `graphprop`: PNA-style graph property prediction (Appendix D.2).
- `lrgb`, `molecules`, `progress`: LRGB loaders, OGB-style SMILES featurisation over
  rdkit, the progress of a long featurisation.
- `node_classification`: Tolokers, Questions, ogbn-arxiv (one large graph, node splits).
- `positional`: LapPE and RWSE encodings, once per graph (GraphGPS).
- `raw`, `download`, `errors`: where raw files are looked for and their md5, md5-checked
  downloads, the data errors (each names the setting that fixes it).
- `safe_pickle`, `torch_legacy`: a numpy-only unpickler, PyTorch tensors read with NumPy.

RDKit is optional (`pip install 'swan-jax[chem]'`): `molecules` imports it on the first
featurisation only, so this package, the generators and cached LRGB data load without it.
"""

from swan_jax.data.batching import (
    Batch,
    Budget,
    budget_for,
    iterate_batches,
    iterate_sharded_batches,
    make_batch,
    stack_batches,
)
from swan_jax.data.dataset import CACHE_VERSION, GraphDataset
from swan_jax.data.download import ChecksumError, DownloadError, fetch, md5_of
from swan_jax.data.graphprop import load_graphprop, make_graphprop_splits
from swan_jax.data.lrgb import (
    DataFormatError,
    load_pascalvoc_sp,
    load_peptides_func,
    load_peptides_struct,
)
from swan_jax.data.molecules import ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS, smiles_to_graph
from swan_jax.data.safe_pickle import UnsafePickleError, safe_load
from swan_jax.data.transfer import TOPOLOGIES, load_transfer, make_transfer_dataset

__all__ = [
    "ATOM_FEATURE_DIMS", "BOND_FEATURE_DIMS", "ChecksumError", "DataFormatError",
    "DownloadError", "UnsafePickleError", "fetch", "load_pascalvoc_sp", "load_peptides_func",
    "load_peptides_struct", "md5_of", "safe_load", "smiles_to_graph",
    "CACHE_VERSION", "Batch", "Budget", "GraphDataset", "TOPOLOGIES", "budget_for",
    "iterate_batches", "iterate_sharded_batches", "load_graphprop", "load_transfer",
    "make_batch", "make_graphprop_splits", "stack_batches",
    "make_transfer_dataset",
]
