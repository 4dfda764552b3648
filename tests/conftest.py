"""Keep every test's cache and run store out of the user's folders."""

import pytest


@pytest.fixture(autouse=True)
def _private_folders(tmp_path_factory, monkeypatch):
    base = tmp_path_factory.getbasetemp()
    monkeypatch.setenv("CONTEXTLENS_CACHE_DIR", str(base / "cache"))
    monkeypatch.setenv("CONTEXTLENS_STORE", str(base / "runs.sqlite3"))
