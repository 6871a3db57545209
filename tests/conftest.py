"""Fixtures shared by the test modules."""

import jax
import pytest


@pytest.fixture
def x64():
    """Run the test in float64 (SPEC.md's exactness checks need it)."""
    with jax.enable_x64(True):
        yield


@pytest.fixture(autouse=True, scope="session")
def _downloads_never_go_to_the_home_folder(tmp_path_factory):
    """Loaders download into env SWAN_DOWNLOAD_DIR (default ~/.cache/swan-jax): in tests,
    a session temp folder (subprocesses inherit it). Nothing downloads from the internet in
    tests; this only keeps local-server downloads out of the user's home."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SWAN_DOWNLOAD_DIR", str(tmp_path_factory.mktemp("downloads")))
        yield
