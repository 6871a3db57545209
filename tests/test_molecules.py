"""SMILES -> graph featuriser: OGB's atom / bond codes, checked by hand on small molecules."""

import numpy as np
import pytest
from rdkit import Chem

from swan_jax.data import molecules
from swan_jax.data.molecules import (
    ALLOWABLE_FEATURES,
    ATOM_FEATURE_DIMS,
    BOND_FEATURE_DIMS,
    atom_to_feature_vector,
    bond_to_feature_vector,
    smiles_to_graph,
)

# Atom codes: [atomic_num - 1, chirality, total degree, formal charge + 5, total Hs,
#              radical electrons, hybridisation (SP=0, SP2=1, SP3=2, misc=5), aromatic, ring]
C_SP3 = 5
O_ = 7


def test_vocabulary_sizes_are_ogbs():
    assert ATOM_FEATURE_DIMS == (119, 5, 12, 12, 10, 6, 6, 2, 2)
    assert BOND_FEATURE_DIMS == (5, 6, 2)
    assert ALLOWABLE_FEATURES["possible_atomic_num_list"][-1] == "misc"
    assert ALLOWABLE_FEATURES["possible_formal_charge_list"][5] == 0


def test_ethanol():
    g = smiles_to_graph("CCO")
    assert g["nodes"].tolist() == [
        [C_SP3, 0, 4, 5, 3, 0, 2, 0, 0],  # CH3: degree 4 counting Hs, 3 Hs, SP3
        [C_SP3, 0, 4, 5, 2, 0, 2, 0, 0],  # CH2
        [O_, 0, 2, 5, 1, 0, 2, 0, 0],  # OH
    ]
    # bond k -> edges 2k (begin -> end) and 2k + 1 (end -> begin)
    assert g["senders"].tolist() == [0, 1, 1, 2]
    assert g["receivers"].tolist() == [1, 0, 2, 1]
    assert g["edges"].tolist() == [[0, 0, 0]] * 4  # SINGLE, STEREONONE, not conjugated
    assert g["nodes"].dtype == np.int32 and g["edges"].dtype == np.int32


def test_benzene_aromatic_ring():
    g = smiles_to_graph("c1ccccc1")
    assert g["nodes"].tolist() == [[5, 0, 3, 5, 1, 0, 1, 1, 1]] * 6  # SP2, aromatic, in ring
    assert g["edges"].tolist() == [[3, 0, 1]] * 12  # AROMATIC, conjugated
    # ring closure bond 5 joins atom 5 and atom 0
    assert g["senders"].tolist() == [0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 0]
    assert g["receivers"].tolist() == [1, 0, 2, 1, 3, 2, 4, 3, 5, 4, 0, 5]


def test_acetate_charge_and_conjugation():
    g = smiles_to_graph("CC(=O)[O-]")
    assert g["nodes"][3].tolist() == [O_, 0, 1, 4, 0, 0, 1, 0, 0]  # charge -1 -> index 4
    assert g["nodes"][2].tolist() == [O_, 0, 1, 5, 0, 0, 1, 0, 0]
    assert g["nodes"][1, 6] == 1  # carboxylate C is SP2
    assert g["edges"].tolist() == [[0, 0, 0], [0, 0, 0],  # C-C, not conjugated
                                   [1, 0, 1], [1, 0, 1],  # C=O, DOUBLE, conjugated
                                   [0, 0, 1], [0, 0, 1]]  # C-O-, conjugated


def test_chirality_and_double_bond_stereo_ogb_example():
    # The example in OGB's features.py: chiral carbon and an E double bond.
    mol = Chem.MolFromSmiles("Cl[C@H](/C=C/C)Br")
    assert atom_to_feature_vector(mol.GetAtomWithIdx(1)) == [5, 2, 4, 5, 1, 0, 2, 0, 0]
    assert bond_to_feature_vector(mol.GetBondWithIdx(2)) == [1, 2, 0]
    g = smiles_to_graph("Cl[C@H](/C=C/C)Br")
    assert g["nodes"][1, 1] == 2  # CHI_TETRAHEDRAL_CCW
    assert g["edges"][4].tolist() == g["edges"][5].tolist() == [1, 2, 0]


def test_l_alanine_clockwise_tag():
    g = smiles_to_graph("N[C@@H](C)C(=O)O")
    assert g["nodes"][1].tolist() == [C_SP3, 1, 4, 5, 1, 0, 2, 0, 0]  # CHI_TETRAHEDRAL_CW
    assert g["nodes"][0].tolist() == [6, 0, 3, 5, 2, 0, 2, 0, 0]  # NH2


def test_misc_fallbacks_and_no_bonds():
    g = smiles_to_graph("[Na+].[Cl-]")
    assert g["nodes"][0].tolist() == [10, 0, 0, 6, 0, 0, 5, 0, 0]  # Na+: hybridisation S -> misc
    assert g["edges"].shape == (0, 3) and g["senders"].shape == (0,)
    star = smiles_to_graph("*C")
    assert star["nodes"][0, 0] == 118  # atomic number 0 -> misc


@pytest.mark.parametrize("smiles", ["C1CC", "not a smiles", ""])
def test_invalid_smiles_names_the_row(smiles):
    with pytest.raises(ValueError, match="row 17"):
        smiles_to_graph(smiles, name="row 17")


def test_every_edge_has_its_reverse_next_and_codes_in_range():
    smiles = "CC(C)C[C@H](NC(=O)[C@@H](N)Cc1ccc(O)cc1)C(=O)N1CCC[C@H]1C(=O)O"
    g = smiles_to_graph(smiles)
    mol = Chem.MolFromSmiles(smiles)
    assert g["nodes"].shape == (mol.GetNumAtoms(), 9)
    assert g["edges"].shape == (2 * mol.GetNumBonds(), 3)
    np.testing.assert_array_equal(g["senders"][0::2], g["receivers"][1::2])
    np.testing.assert_array_equal(g["receivers"][0::2], g["senders"][1::2])
    np.testing.assert_array_equal(g["edges"][0::2], g["edges"][1::2])
    assert np.all(g["nodes"] < np.asarray(ATOM_FEATURE_DIMS))
    assert np.all(g["edges"] < np.asarray(BOND_FEATURE_DIMS))
    assert molecules.safe_index("possible_degree_list", 42) == 11
