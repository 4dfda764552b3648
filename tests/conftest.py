"""Keep every test's cache and run store out of the user's folders."""

import sys

import pytest


@pytest.fixture(autouse=True)
def _private_folders(tmp_path_factory, monkeypatch):
    base = tmp_path_factory.getbasetemp()
    monkeypatch.setenv("CONTEXTLENS_CACHE_DIR", str(base / "cache"))
    monkeypatch.setenv("CONTEXTLENS_STORE", str(base / "runs.sqlite3"))


@pytest.fixture
def run_cli(monkeypatch, capsys):
    """Run the ``contextlens`` command in-process: ``(exit status, stdout + stderr)``."""
    from contextlens.cli import main

    def run(*args):
        monkeypatch.setattr(sys, "argv", ["contextlens", *map(str, args)])
        monkeypatch.setenv("COLUMNS", "200")
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    return run
