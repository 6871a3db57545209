"""Fixtures shared by the test modules."""

import jax
import pytest


@pytest.fixture
def x64():
    """Run the test in float64 (docs/conventions.md's exactness checks need it)."""
    with jax.enable_x64(True):
        yield


@pytest.fixture(autouse=True, scope="session")
def _compiled_programs_are_reused_within_the_session(tmp_path_factory):
    """JAX's persistent compilation cache in a folder of this test session (empty at its
    start, so a fresh clone's `make test` pays every first compile): a program compiled
    again, bit for bit the same (a resumed run, the tiny transfer run many tests train),
    is read back instead. Compiling is most of the suite's time on a CPU. The folder is
    per xdist worker, so no two processes write one entry; subprocesses (scripts,
    notebook kernels) inherit it and are run one at a time by their worker."""
    folder = tmp_path_factory.getbasetemp() / "jax-compilation-cache"
    folder.mkdir(exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JAX_COMPILATION_CACHE_DIR", str(folder))
        mp.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
        yield


@pytest.fixture(autouse=True, scope="session")
def _downloads_never_go_to_the_home_folder(tmp_path_factory):
    """Loaders download into env SWAN_DOWNLOAD_DIR (default ~/.cache/swan-jax) and cache
    into SWAN_CACHE_DIR (default ~/.cache/swan-jax/processed): in tests, session temp
    folders (subprocesses inherit them). Nothing downloads from the internet in
    tests; this only keeps local-server downloads out of the user's home."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SWAN_DOWNLOAD_DIR", str(tmp_path_factory.mktemp("downloads")))
        mp.setenv("SWAN_DOWNLOAD_RETRIES", "0")  # a failing stub is asked once, no pauses
        # the processed-data cache defaults to the user cache folder: a temp one in tests
        mp.setenv("SWAN_CACHE_DIR", str(tmp_path_factory.mktemp("processed")))
        yield


@pytest.fixture(autouse=True, scope="session")
def _no_internet_in_tests():
    """Nothing may download during tests: `requests.get` (what `download.fetch` uses,
    through pooch) and `urllib.request.urlopen` reach only this machine; any other host
    fails as an unreachable network."""
    import urllib.error
    import urllib.parse
    import urllib.request

    import requests

    real = urllib.request.urlopen
    real_get = requests.get

    def local_get(url, *args, **kwargs):
        if urllib.parse.urlsplit(str(url)).hostname not in ("127.0.0.1", "localhost", "::1"):
            raise requests.exceptions.ConnectionError(f"network disabled in tests ({url})")
        return real_get(url, *args, **kwargs)

    def local_only(url, *args, **kwargs):
        full = url.full_url if isinstance(url, urllib.request.Request) else str(url)
        if urllib.parse.urlsplit(full).hostname not in ("127.0.0.1", "localhost", "::1"):
            raise urllib.error.URLError(f"network disabled in tests ({full})")
        return real(url, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(urllib.request, "urlopen", local_only)
        mp.setattr(requests, "get", local_get)
        yield
