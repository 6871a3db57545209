"""Fixtures shared by the test modules."""

import jax
import pytest


@pytest.fixture
def x64():
    """Run the test in float64 (docs/conventions.md's exactness checks need it)."""
    with jax.enable_x64(True):
        yield
