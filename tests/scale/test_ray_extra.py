"""``pip install contextlens[ray]`` installs everything the Ray executor imports: each
third-party module ``contextlens.scale.ray`` imports belongs to a distribution that the
``ray`` extra requires, that Ray requires (with the extras the ``ray`` extra names), or that
contextlens itself requires; read from the installed package metadata."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parents[2]
RAY_PACKAGE = ROOT / "src" / "contextlens" / "scale" / "ray"


def imported_modules(folder: Path) -> dict[str, str]:
    """Each top-level module the sources under ``folder`` import (anywhere, a function's
    lazy imports too), with the first file that imports it."""
    found: dict[str, str] = {}
    for source in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.partition(".")[0], source.name)
    return found


def third_party(modules: dict[str, str]) -> dict[str, str]:
    own = {"contextlens", "__future__"}
    return {m: f for m, f in modules.items() if m not in own and m not in sys.stdlib_module_names}


def wanted(requirements: list[str] | None, extras: set[str]) -> set[str]:
    """The distributions ``requirements`` ask for with ``extras`` (and with none)."""
    names = set()
    for text in requirements or []:
        req = Requirement(text)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
            names.add(canonicalize_name(req.name))
    return names


def ray_extra() -> list[Requirement]:
    """The ``ray`` extra as the installed metadata of contextlens declares it."""
    requirements = metadata.requires("contextlens") or []
    found = [Requirement(t) for t in requirements]
    return [r for r in found if r.marker is not None and r.marker.evaluate({"extra": "ray"})]


def test_the_installed_metadata_declares_the_ray_extra_of_this_source_tree():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = sorted(str(Requirement(t)) for t in declared["optional-dependencies"]["ray"])
    installed = sorted(str(r).split(";")[0].strip() for r in ray_extra())
    assert installed == extra, "reinstall contextlens: its metadata is not this tree's"


def test_every_third_party_import_of_the_ray_executor_is_installed_by_the_extra():
    extra = ray_extra()
    allowed = {canonicalize_name(r.name) for r in extra}
    allowed |= wanted(metadata.requires("contextlens"), set())  # the core's own
    for req in extra:  # and what each requirement of the extra requires, with its extras
        allowed |= wanted(metadata.requires(req.name), set(req.extras))
    owners = metadata.packages_distributions()
    imports = third_party(imported_modules(RAY_PACKAGE))
    assert "ray" in imports  # the scan reads the executor's imports at all
    unmet = {
        module: (where, owners.get(module))
        for module, where in imports.items()
        if not {canonicalize_name(d) for d in owners.get(module, [])} & allowed
    }
    assert not unmet, (
        "imported by contextlens.scale.ray (module: (file, distributions)) but installed "
        f"neither by the ray extra, by Ray, nor by contextlens: {unmet}"
    )


def test_the_executor_imports_where_no_standalone_cloudpickle_is_installed():
    """As on a fresh ``pip install contextlens[ray]``: current Ray wheels do not install
    the ``cloudpickle`` distribution (they ship their own ``ray.cloudpickle``)."""
    code = (
        "import sys, threading; sys.modules['cloudpickle'] = None\n"  # as if not installed
        "from contextlens.scale.ray.executor import check_sendable\n"
        "check_sendable([], 'openai:m', None)\n"
        "try:\n"
        "    check_sendable([], threading.Lock(), None)\n"
        "except TypeError as exc:\n"
        "    print('refused:', exc)\n"
    )
    path = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: the judge cannot be sent to Ray workers" in done.stdout, done.stdout
