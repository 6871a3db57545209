"""SMILES -> molecular graph, feature for feature as OGB's `smiles2graph`.

Mirrors `ogb/utils/features.py` (`allowable_features`, `atom_to_feature_vector`,
`bond_to_feature_vector`) and `ogb/utils/mol.py` (`smiles2graph`, hydrogens implicit),
written over RDKit without importing OGB:

* 9 integer atom codes: atomic number, chirality tag, total degree, formal charge, total
  number of Hs, radical electrons, hybridisation, is-aromatic, is-in-ring. Each is the
  value's index in its vocabulary (`swan_jax.ogb_vocabulary`); a value outside it gets
  the last index ("misc").
* 3 integer bond codes: bond type (with "misc"), bond stereo, is-conjugated. As in OGB the
  stereo vocabulary has no "misc": a stereo flag outside it (RDKit's newer atropisomer
  flags) is an error, which OGB raises too.
* Edges: for each RDKit bond in order, `i -> j` then `j -> i` (begin atom, end atom),
  both with the bond's codes, so edge `2k` and `2k + 1` come from bond `k`.

`ATOM_FEATURE_DIMS` / `BOND_FEATURE_DIMS` are the vocabulary sizes (OGB's
`get_atom_feature_dims()` / `get_bond_feature_dims()`), for embedding-table encoders;
they live in `swan_jax.ogb_vocabulary` and are re-exported here.

RDKit is an optional dependency (`pip install 'swan-jax[chem]'`): it is imported on the
first featurisation, not with this module, so the vocabularies, the LRGB caches and the
rest of swan-jax load without it; featurising without it raises ImportError
(`RDKIT_MISSING`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from swan_jax.ogb_vocabulary import (
    ALLOWABLE_FEATURES,
    ATOM_FEATURE_DIMS,
    ATOM_FEATURE_NAMES,
    BOND_FEATURE_DIMS,
    BOND_FEATURE_NAMES,
    MISC,
)

RDKIT_MISSING = ("the molecule featuriser (SMILES -> graph) needs RDKit, which is not "
                 "installed: pip install 'swan-jax[chem]' (or pip install rdkit)")


def _index_map(name: str) -> dict:
    # No vocabulary mixes bools with ints, so bool keys cannot collide with 0 / 1.
    return {v: i for i, v in enumerate(ALLOWABLE_FEATURES[name]) if v != MISC}


_LOOKUPS = {name: _index_map(name) for name in ATOM_FEATURE_NAMES + BOND_FEATURE_NAMES}

# Fast paths: plain dict lookups (`.get(value, misc)`), keyed as OGB keys them.
_ATOMIC_NUM = _LOOKUPS["possible_atomic_num_list"].get
_DEGREE = _LOOKUPS["possible_degree_list"].get
_CHARGE = _LOOKUPS["possible_formal_charge_list"].get
_NUM_H = _LOOKUPS["possible_numH_list"].get
_RADICAL = _LOOKUPS["possible_number_radical_e_list"].get
_MISC_INDEX = {name: len(ALLOWABLE_FEATURES[name]) - 1 for name in _LOOKUPS}
_M = [_MISC_INDEX[name] for name in ATOM_FEATURE_NAMES]


def _rdkit() -> tuple[Any, Any]:
    """RDKit's `(Chem, rdBase)`, imported where it is used: the rest of swan-jax runs without."""
    try:
        from rdkit import Chem, rdBase
    except ImportError as err:
        raise ImportError(RDKIT_MISSING) from err
    return Chem, rdBase


def _enum_map(name: str, enum) -> dict:
    """Vocabulary `name` keyed by RDKit enum values (`str(value)` is the enum's name)."""
    return {value: _LOOKUPS[name][key] for key, value in enum.names.items()
            if key in _LOOKUPS[name]}


class _EnumCodes(NamedTuple):
    """Code lookups keyed by RDKit enums (`.get` of a dict; the stereo dict itself)."""

    chirality: Callable[..., int]
    hybridization: Callable[..., int]
    bond_type: Callable[..., int]
    bond_stereo: dict


@functools.cache
def _enum_codes() -> _EnumCodes:
    chem, _ = _rdkit()
    return _EnumCodes(
        chirality=_enum_map("possible_chirality_list", chem.rdchem.ChiralType).get,
        hybridization=_enum_map("possible_hybridization_list",
                                chem.rdchem.HybridizationType).get,
        bond_type=_enum_map("possible_bond_type_list", chem.rdchem.BondType).get,
        bond_stereo=_enum_map("possible_bond_stereo_list", chem.rdchem.BondStereo),
    )


def safe_index(name: str, value) -> int:
    """Index of `value` in vocabulary `name`, or the last ("misc") index when absent."""
    return _LOOKUPS[name].get(value, _MISC_INDEX[name])


def atom_to_feature_vector(atom) -> list[int]:
    """OGB's 9 atom codes for an RDKit atom."""
    codes = _enum_codes()
    return [
        _ATOMIC_NUM(atom.GetAtomicNum(), _M[0]),
        codes.chirality(atom.GetChiralTag(), _M[1]),
        _DEGREE(atom.GetTotalDegree(), _M[2]),
        _CHARGE(atom.GetFormalCharge(), _M[3]),
        _NUM_H(atom.GetTotalNumHs(), _M[4]),
        _RADICAL(atom.GetNumRadicalElectrons(), _M[5]),
        codes.hybridization(atom.GetHybridization(), _M[6]),
        1 if atom.GetIsAromatic() else 0,
        1 if atom.IsInRing() else 0,
    ]


def bond_to_feature_vector(bond) -> list[int]:
    """OGB's 3 bond codes for an RDKit bond (ValueError for a stereo flag OGB lacks)."""
    codes = _enum_codes()
    stereo = bond.GetStereo()
    if stereo not in codes.bond_stereo:
        raise ValueError(f"bond stereo {stereo} is not in OGB's bond stereo vocabulary")
    return [
        codes.bond_type(bond.GetBondType(), _MISC_INDEX["possible_bond_type_list"]),
        codes.bond_stereo[stereo],
        1 if bond.GetIsConjugated() else 0,
    ]


def smiles_to_graph(smiles: str, name: str | None = None) -> dict[str, np.ndarray]:
    """One molecule as a graph dict for `GraphDataset.from_graphs`.

    Returns `nodes` int32 `[n, 9]`, `edges` int32 `[2 * bonds, 3]`, `senders` /
    `receivers` int32 `[2 * bonds]` (bond k gives edges 2k: i -> j and 2k + 1: j -> i).
    Raises ValueError naming `name` (a row or identifier; else the SMILES itself) when
    RDKit cannot parse the SMILES, the molecule has no atoms, or a bond has a stereo flag
    outside OGB's vocabulary; ImportError (`RDKIT_MISSING`) when RDKit is not installed.
    """
    chem, rd_base = _rdkit()
    label = name if name is not None else repr(smiles)
    if not isinstance(smiles, str):
        raise ValueError(f"{label}: SMILES must be a string, got {type(smiles).__name__}")
    with rd_base.BlockLogs():
        mol = chem.MolFromSmiles(smiles)
    if mol is None:
        raise ValueError(f"{label}: RDKit could not parse the SMILES {smiles[:80]!r}")
    if mol.GetNumAtoms() == 0:
        raise ValueError(f"{label}: the SMILES {smiles[:80]!r} has no atoms")
    nodes = np.asarray([atom_to_feature_vector(mol.GetAtomWithIdx(i))
                        for i in range(mol.GetNumAtoms())], np.int32)
    pairs, feats = [], []
    for k in range(mol.GetNumBonds()):
        bond = mol.GetBondWithIdx(k)
        try:
            feats.append(bond_to_feature_vector(bond))
        except ValueError as err:
            raise ValueError(f"{label}: bond {k}: {err}") from None
        pairs.append((bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()))
    n_feats = len(BOND_FEATURE_DIMS)
    ends = np.asarray(pairs, np.int32).reshape(-1, 2)
    # bond k -> edge 2k (i -> j) and edge 2k + 1 (j -> i), both with the bond's codes
    edges = np.repeat(np.asarray(feats, np.int32).reshape(-1, n_feats), 2, axis=0)
    senders = ends.reshape(-1)
    receivers = ends[:, ::-1].reshape(-1)
    return {"nodes": nodes, "edges": edges, "senders": senders.copy(),
            "receivers": receivers.copy()}


__all__ = [
    "ALLOWABLE_FEATURES", "ATOM_FEATURE_DIMS", "ATOM_FEATURE_NAMES", "BOND_FEATURE_DIMS",
    "BOND_FEATURE_NAMES", "RDKIT_MISSING", "atom_to_feature_vector", "bond_to_feature_vector",
    "safe_index", "smiles_to_graph",
]
