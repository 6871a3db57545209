"""OGB's atom and bond feature vocabularies, without RDKit.

The codes `swan_jax.data.molecules` writes (one integer per feature: the value's index in
its vocabulary, the last index meaning "misc") and the table sizes the embedding encoders
of `swan_jax.encoders` read. Copied from `ogb/utils/features.py` (`allowable_features`);
`ATOM_FEATURE_DIMS` / `BOND_FEATURE_DIMS` are OGB's `get_atom_feature_dims()` /
`get_bond_feature_dims()`. Plain Python data: importing it needs no chemistry toolkit.
"""

from __future__ import annotations

MISC = "misc"

ALLOWABLE_FEATURES: dict[str, list] = {
    "possible_atomic_num_list": list(range(1, 119)) + [MISC],
    "possible_chirality_list": [
        "CHI_UNSPECIFIED", "CHI_TETRAHEDRAL_CW", "CHI_TETRAHEDRAL_CCW", "CHI_OTHER", MISC,
    ],
    "possible_degree_list": list(range(0, 11)) + [MISC],
    "possible_formal_charge_list": list(range(-5, 6)) + [MISC],
    "possible_numH_list": list(range(0, 9)) + [MISC],
    "possible_number_radical_e_list": list(range(0, 5)) + [MISC],
    "possible_hybridization_list": ["SP", "SP2", "SP3", "SP3D", "SP3D2", MISC],
    "possible_is_aromatic_list": [False, True],
    "possible_is_in_ring_list": [False, True],
    "possible_bond_type_list": ["SINGLE", "DOUBLE", "TRIPLE", "AROMATIC", MISC],
    "possible_bond_stereo_list": [
        "STEREONONE", "STEREOZ", "STEREOE", "STEREOCIS", "STEREOTRANS", "STEREOANY",
    ],
    "possible_is_conjugated_list": [False, True],
}

ATOM_FEATURE_NAMES = (
    "possible_atomic_num_list", "possible_chirality_list", "possible_degree_list",
    "possible_formal_charge_list", "possible_numH_list", "possible_number_radical_e_list",
    "possible_hybridization_list", "possible_is_aromatic_list", "possible_is_in_ring_list",
)
BOND_FEATURE_NAMES = (
    "possible_bond_type_list", "possible_bond_stereo_list", "possible_is_conjugated_list",
)

# Vocabulary sizes: [119, 5, 12, 12, 10, 6, 6, 2, 2] and [5, 6, 2].
ATOM_FEATURE_DIMS: tuple[int, ...] = tuple(len(ALLOWABLE_FEATURES[k]) for k in ATOM_FEATURE_NAMES)
BOND_FEATURE_DIMS: tuple[int, ...] = tuple(len(ALLOWABLE_FEATURES[k]) for k in BOND_FEATURE_NAMES)

__all__ = [
    "ALLOWABLE_FEATURES", "ATOM_FEATURE_DIMS", "ATOM_FEATURE_NAMES", "BOND_FEATURE_DIMS",
    "BOND_FEATURE_NAMES", "MISC",
]
