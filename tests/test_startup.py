"""Start-up: ``contextlens --version`` and ``--help``, ``import contextlens`` and the pytest
plugin load none of the engine's heavy packages; the package's names are there when used."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("numpy", "pydantic", "aiohttp", "onnxruntime", "contextlens.runner")
SRC = str(Path(__file__).parents[1] / "src")

PROBE = """
import runpy, sys
sys.argv = ["contextlens", *{args!r}]
try:
    {body}
except SystemExit:
    pass
print("LOADED", sorted(m for m in {heavy!r} if m in sys.modules))
"""


def loaded(body: str, args: tuple[str, ...] = ()) -> tuple[list[str], str]:
    """The heavy modules a fresh interpreter has imported after ``body``, and its output."""
    code = PROBE.format(args=list(args), body=body, heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": SRC, "COLUMNS": "100"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    said = next(x for x in done.stdout.splitlines() if x.startswith("LOADED"))
    return ast.literal_eval(said.removeprefix("LOADED ")), done.stdout


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_import_no_heavy_package(flag):
    heavy, output = loaded("runpy.run_module('contextlens', run_name='__main__')", (flag,))
    assert heavy == []
    assert ("contextlens 0.1.0" if flag == "--version" else "Usage: contextlens") in output


def test_importing_the_package_or_its_pytest_plugin_imports_no_heavy_package():
    assert loaded("import contextlens")[0] == []
    assert loaded("import contextlens.pytest_plugin")[0] == []  # loaded at every pytest start


def test_the_package_names_load_when_used_and_compare_stays_the_function():
    import contextlens

    heavy, _ = loaded("import contextlens; contextlens.evaluate")
    assert "numpy" in heavy  # the engine, once asked for
    assert sorted(contextlens.__all__) == sorted([*contextlens._EXPORTS, "__version__"])
    assert all(getattr(contextlens, name) is not None for name in contextlens.__all__)
    import contextlens.compare  # the submodule of the same name

    assert callable(contextlens.compare) and contextlens.compare.__name__ == "compare"
    from contextlens import compare

    assert compare is sys.modules["contextlens.compare"].compare
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        contextlens.nothing  # noqa: B018
