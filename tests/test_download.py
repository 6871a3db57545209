"""Downloads through pooch: md5 check, retries, a progress bar, nothing left on failure, one-line
errors, and the defaults of the download and processed-data folders.

Nothing downloads: `FakeWeb` stands in for `requests.get` (what `pooch.HTTPDownloader`
calls); conftest refuses any other host than this machine.
"""

from __future__ import annotations

import hashlib
import io
import os

import pytest
import requests

from swan_jax.data import download
from swan_jax.data.errors import ChecksumError, DownloadError


class FakeResponse:
    """What `pooch.HTTPDownloader` reads of a `requests` response."""

    def __init__(self, url: str, body: bytes | None, status: int = 200):
        self.url, self.body, self.status_code = url, body or b"", status
        self.reason = "OK" if status == 200 else "Not Found"
        self.headers = {"content-length": str(len(self.body))}

    def raise_for_status(self) -> None:
        if self.status_code != 200:
            raise requests.exceptions.HTTPError(f"{self.status_code} {self.reason}",
                                                response=self)

    def iter_content(self, chunk_size: int = 1024):
        stream = io.BytesIO(self.body)
        yield from iter(lambda: stream.read(chunk_size), b"")


class FakeWeb:
    """Serves `files[url]`; `failures[url]` first attempts fail; any other host is down."""

    def __init__(self, files: dict[str, bytes] | None = None):
        self.files = dict(files or {})
        self.failures: dict[str, int] = {}
        self.requests: list[str] = []

    def __call__(self, request, timeout=None):  # the old `urlopen` signature, for old stubs
        return self.get(getattr(request, "full_url", request), timeout=timeout)

    def get(self, url, timeout=None, **kwargs):
        self.requests.append(url)
        if self.failures.get(url, 0) > 0:
            self.failures[url] -= 1
            raise requests.exceptions.ConnectionError("Connection reset by peer")
        if url in self.files:
            return FakeResponse(url, self.files[url])
        if url.endswith("/missing.bin"):
            return FakeResponse(url, None, 404)
        raise requests.exceptions.ConnectionError(
            "[Errno -3] Temporary failure in name resolution")


@pytest.fixture
def web(monkeypatch):
    fake = FakeWeb()
    monkeypatch.setattr(requests, "get", fake.get)
    return fake


URL = "https://example.invalid/data/blob.bin"
BODY = b"swan" * 1000
MD5 = hashlib.md5(BODY).hexdigest()


def test_fetch_checks_md5_and_sets_ordinary_permissions(tmp_path, web):
    web.files[URL] = BODY
    dest = tmp_path / "dl" / "sub" / "blob.bin"
    assert download.fetch(URL, dest, MD5, retries=0, progress=False) == dest
    assert dest.read_bytes() == BODY and web.requests == [URL]
    umask = os.umask(0)
    os.umask(umask)
    assert dest.stat().st_mode & 0o777 == 0o666 & ~umask


def test_md5_mismatch_is_one_line_and_leaves_nothing(tmp_path, web):
    web.files[URL] = b"<html>quota exceeded</html>"
    dest = tmp_path / "dl" / "a" / "blob.bin"
    with pytest.raises(ChecksumError) as err:
        download.fetch(URL, dest, MD5, retries=1, progress=False)
    message = str(err.value)
    assert "\n" not in message and f"expected {MD5}" in message
    assert err.value.got == hashlib.md5(b"<html>quota exceeded</html>").hexdigest()
    assert "pass verify_md5=False" in message
    assert web.requests == [URL, URL]  # one retry
    assert not (tmp_path / "dl").exists()  # no partial file, no folder this call made


def test_a_failed_attempt_is_retried(tmp_path, web, monkeypatch):
    monkeypatch.setattr("time.sleep", lambda seconds: None)  # pooch pauses between tries
    web.files[URL] = BODY
    web.failures[URL] = 2
    dest = tmp_path / "blob.bin"
    download.fetch(URL, dest, MD5, retries=2, progress=False)
    assert dest.read_bytes() == BODY and len(web.requests) == 3
    web.failures[URL] = 3
    with pytest.raises(DownloadError, match="Connection reset"):
        download.fetch(URL, tmp_path / "again.bin", MD5, retries=2, progress=False)
    assert not (tmp_path / "again.bin").exists()


def test_unreachable_and_http_errors_name_the_url_and_the_path(tmp_path, web):
    dest = tmp_path / "dl" / "peptides.csv.gz"
    with pytest.raises(DownloadError) as err:
        download.fetch("https://nowhere.invalid/p.csv.gz", dest, "abc", retries=0)
    message = str(err.value)
    # the cause in a few words, not urllib3's paragraph
    assert "\n" not in message and "(cannot resolve nowhere.invalid (no network?))" in message
    assert str(dest.absolute()) in message and "(md5 abc)" in message
    with pytest.raises(DownloadError, match="HTTP 404 Not Found"):
        download.fetch("https://example.invalid/missing.bin", dest, retries=0)
    assert not (tmp_path / "dl").exists()


def test_progress_bar_goes_to_stderr(tmp_path, web, capsys):
    web.files[URL] = BODY
    download.fetch(URL, tmp_path / "blob.bin", MD5, retries=0, progress=True)
    assert "4.00k/4.00k" in capsys.readouterr().err


def test_fetch_first_falls_back_to_a_mirror(tmp_path, web):
    mirror = "https://mirror.invalid/blob.bin"
    web.files[mirror] = BODY
    dest = download.fetch_first([URL, mirror], tmp_path / "blob.bin", MD5, retries=0)
    assert dest.read_bytes() == BODY and web.requests == [URL, mirror]


def test_default_folders(monkeypatch, tmp_path):
    for name in ("SWAN_DOWNLOAD_DIR", "SWAN_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    assert download.default_download_dir() == tmp_path / "me" / ".cache" / "swan-jax"
    # the processed cache sits beside the downloads, and each is overridable
    assert download.default_cache_dir() == tmp_path / "me" / ".cache" / "swan-jax" / "processed"
    monkeypatch.setenv("SWAN_CACHE_DIR", str(tmp_path / "mine"))
    assert download.default_cache_dir() == tmp_path / "mine"
    assert download.default_cache_dir(tmp_path / "given") == tmp_path / "given"
    monkeypatch.setenv("SWAN_DOWNLOAD_RETRIES", "x")
    with pytest.raises(ValueError, match="SWAN_DOWNLOAD_RETRIES"):
        download.default_retries()


def test_the_test_session_cannot_reach_the_internet():
    """conftest's guard: `requests.get` to another host fails before any network use."""
    with pytest.raises(requests.exceptions.ConnectionError, match="network disabled"):
        requests.get("https://zenodo.org/records/6975830", timeout=1)
